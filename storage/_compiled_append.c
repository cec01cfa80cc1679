/*
 * The common appends, compiled (used through storage/compiled_append.py): the leader's of one client
 * batch (append_batch) and a follower's of what its fetch brought (append_follower).
 *
 * For each batch the broker runs PartitionLog.append: the header parsed again, the producer's epoch and
 * sequence checked, the segment's roll conditions asked, the offsets and leader epoch stamped in place
 * (as leader), the write, the segment's and the log's bookkeeping, the producer state updated. In Python
 * that is dozens of function calls a batch, and with a thousand partitions, or three replicas, it was
 * most of the broker's CPU. These are the same sequences, for the common cases only:
 *
 *   - as leader: exactly one v2 batch, neither transactional nor a control batch, in a writable buffer;
 *     no producer id, a producer's first batch here, or a producer already known here, in the same
 *     epoch, whose batch follows its last one (not a retry of one of its last five), without an open
 *     transaction; and no transaction verification in progress in the log;
 *   - as follower: whole v2 batches, neither transactional nor control batches, whose offsets continue
 *     the log from its LEO, each with a valid CRC;
 *   - within max.message.bytes and segment.bytes, into a segment that does not roll, whose rolling
 *     timestamp, largest timestamp and indexes are loaded.
 *
 * Anything else returns None before anything is changed, and PartitionLog.append runs as before,
 * with its own errors.
 *
 * The steps that are Python methods elsewhere are done here too where they are a few loads and stores,
 * since each Python call a batch costs about a microsecond: the segment file's reference
 * (FileHandle.acquire/release for an open file), the index entries (a store into the active index's
 * mapping where its page is allocated), the config's limits from their cache, the broker's clock, the
 * epoch cache's latest epoch, and the BatchHeader, BatchMetadata and AppendInfo built without running
 * their constructors. Each hands anything else to the Python method. A change to one of those methods
 * must be made here too.
 *
 * The order of the steps, and what each leaves behind if the write or an index fails, are
 * PartitionLog.append's and LogSegment.append's: tests/storage/test_leader_append.py and
 * tests/storage/test_follower_append.py run both on the same sequences and compare the files and the
 * state they leave after every append.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

/* Record batch v2 header (storage/batch_headers.py). */
#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define MIN_BATCH_LENGTH (HEADER_SIZE - LOG_OVERHEAD)
#define OFF_BATCH_LENGTH 8
#define OFF_EPOCH 12
#define OFF_MAGIC 16
#define OFF_CRC 17
#define OFF_ATTRIBUTES 21
#define OFF_LAST_OFFSET_DELTA 23
#define OFF_BASE_TIMESTAMP 27
#define OFF_MAX_TIMESTAMP 35
#define OFF_PRODUCER_ID 43
#define OFF_PRODUCER_EPOCH 51
#define OFF_BASE_SEQUENCE 53
#define OFF_RECORDS_COUNT 57
#define TRANSACTIONAL_FLAG 0x10
#define CONTROL_FLAG 0x20
#define INT32_MAX_ 2147483647LL
#define NO_PRODUCER_EPOCH (-1)

static PyObject *BatchHeader_t = NULL, *AppendInfo_t = NULL, *BatchMetadata_t = NULL, *now_ms_fn = NULL,
    *crc32c_fn = NULL;
/* AppendInfo's slots, in the order of its fields: it is built without running its __init__. */
#define APPEND_INFO_FIELDS 9
static PyMemberDef *append_info_members[APPEND_INFO_FIELDS];

static PyObject *s_offline, *s_closed, *s_lock, *s_acquire, *s_release, *s_append_limits, *s_clock,
    *s_producer_state, *s_producers, *s_verification_states, *s_producer_epoch, *s_batches,
    *s_current_txn_first_offset, *s_last_timestamp, *s_map_end_offset, *s_segments, *s_size,
    *s_rolling_ts, *s_created_ms, *s_roll_jitter_ms, *s_offset_index, *s_time_index, *s_loaded,
    *s_entries, *s_length, *s_base_offset, *s_leo, *s_max_ts, *s_file, *s_unsynced, *s_next_offset,
    *s_recent, *s_append, *s_bytes_since_index, *s_settings, *s_index_interval_bytes,
    *s_prefix_max_ts, *s_leader_epoch_cache, *s_latest_epoch,
    *s_apply_producer_state, *s_recovery_point, *s_flush, *s_log_start_offset, *s_config, *s_limits_cache,
    *s_epochs, *s_cache, *s_cache_lock, *s_refs, *s_fd, *s_idle, *s_pop, *s_open_count, *s_capacity,
    *s_appended, *s_mm, *s_mm_writable, *s_allocated, *s_writer, *s_last, *s_last_unread;

static inline uint64_t rd64(const unsigned char *p) {
    return ((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) | ((uint64_t)p[3] << 32) |
           ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) | ((uint64_t)p[6] << 8) | (uint64_t)p[7];
}
static inline uint32_t rd32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline uint16_t rd16(const unsigned char *p) { return (uint16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline void wr64(unsigned char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) { p[i] = (unsigned char)(v & 0xff); v >>= 8; }
}
static inline void wr32(unsigned char *p, uint32_t v) {
    for (int i = 3; i >= 0; i--) { p[i] = (unsigned char)(v & 0xff); v >>= 8; }
}

/* obj.name as a C integer: 0, or -1 with an exception (a missing attribute is a bug, not a fallback). */
static int get_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* obj.name as a truth value: 0 or 1, or -1 with an exception. */
static int get_bool(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static int set_ll(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) return -1;
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

/* A namedtuple of ``values`` (stolen) without the Python frame of its __new__: tuple.__new__(type, values). */
static PyObject *new_named_tuple(PyObject *type, PyObject *values) {
    if (values == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, values);
    Py_DECREF(values);
    if (args == NULL) return NULL;
    PyObject *o = PyTuple_Type.tp_new((PyTypeObject *)type, args, NULL);
    Py_DECREF(args);
    return o;
}

/* now_ms(): time.time_ns() // 1_000_000, from the same clock. */
static long long realtime_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* lock.acquire() (a threading lock's, implemented in C). 0, or -1 with an exception. */
static int acquire_lock(PyObject *lock) {
    PyObject *r = PyObject_CallMethodNoArgs(lock, s_acquire);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static int release_lock(PyObject *lock);

/* FileHandle.acquire(), done here for a handle whose file is open, under its cache's lock as there: a
 * reference taken, and the handle out of the idle list if it was idle. Any other case (closed, or not
 * open: an open may evict others) is FileHandle.acquire's own, called under the same re-entrant lock.
 * The descriptor, or -1 with an exception. */
static long long handle_acquire(PyObject *handle) {
    long long fd = -1, refs;
    PyObject *cache = PyObject_GetAttr(handle, s_cache), *lock = NULL;
    if (cache == NULL) return -1;
    lock = PyObject_GetAttr(cache, s_cache_lock);
    if (lock == NULL || acquire_lock(lock) < 0) { Py_DECREF(cache); Py_XDECREF(lock); return -1; }
    int closed = get_bool(handle, s_closed);
    if (closed < 0 || get_ll(handle, s_fd, &fd) < 0 || get_ll(handle, s_refs, &refs) < 0) { fd = -1; goto out; }
    if (closed || fd < 0) {
        PyObject *v = PyObject_CallMethodNoArgs(handle, s_acquire);
        fd = v == NULL ? -1 : PyLong_AsLongLong(v);
        Py_XDECREF(v);
        goto out;
    }
    if (refs == 0) {
        PyObject *idle = PyObject_GetAttr(cache, s_idle);
        PyObject *key = PyLong_FromVoidPtr(handle);
        PyObject *popped = (idle && key) ? PyObject_CallMethodObjArgs(idle, s_pop, key, Py_None, NULL) : NULL;
        Py_XDECREF(idle);
        Py_XDECREF(key);
        if (popped == NULL) { fd = -1; goto out; }
        Py_DECREF(popped);
    }
    if (set_ll(handle, s_refs, refs + 1) < 0) fd = -1;
out:
    if (release_lock(lock) < 0) fd = -1;
    Py_DECREF(lock);
    Py_DECREF(cache);
    return fd;
}

/* FileHandle.release(), done here while the file stays open: the reference dropped and, the last one,
 * the handle made idle (most recent) with the cache trimmed to its capacity. A closed handle's release
 * (which closes the file) is FileHandle.release's own. 0, or -1 with an exception. */
static int handle_release(PyObject *handle) {
    long long fd, refs, open_count, capacity;
    int r = -1;
    PyObject *cache = PyObject_GetAttr(handle, s_cache), *lock = NULL;
    if (cache == NULL) return -1;
    lock = PyObject_GetAttr(cache, s_cache_lock);
    if (lock == NULL || acquire_lock(lock) < 0) { Py_DECREF(cache); Py_XDECREF(lock); return -1; }
    int closed = get_bool(handle, s_closed);
    if (closed < 0 || get_ll(handle, s_fd, &fd) < 0 || get_ll(handle, s_refs, &refs) < 0) goto out;
    refs -= 1;
    if (refs > 0 || fd < 0 || closed) {
        if (refs > 0) {
            r = set_ll(handle, s_refs, refs);
        } else {
            PyObject *v = PyObject_CallMethodNoArgs(handle, s_release);
            r = v == NULL ? -1 : 0;
            Py_XDECREF(v);
        }
        goto out;
    }
    if (set_ll(handle, s_refs, refs) < 0) goto out;
    PyObject *idle = PyObject_GetAttr(cache, s_idle);
    PyObject *key = PyLong_FromVoidPtr(handle);
    int stored = (idle && key) ? PyObject_SetItem(idle, key, handle) : -1;
    Py_XDECREF(idle);
    Py_XDECREF(key);
    if (stored < 0) goto out;
    if (get_ll(cache, s_open_count, &open_count) < 0 || get_ll(cache, s_capacity, &capacity) < 0) goto out;
    if (open_count > capacity) {
        PyObject *v = PyObject_CallMethod(cache, "_evict_over", "L", capacity);
        if (v == NULL) goto out;
        Py_DECREF(v);
    }
    r = 0;
out:
    if (release_lock(lock) < 0) r = -1;
    Py_DECREF(lock);
    Py_DECREF(cache);
    return r;
}

/* Python's floor division, for the index capacities (lengths are never negative, but stay exact). */
static inline long long floor_div(long long a, long long b) {
    long long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* Is the producer's batch (same epoch as its entry) neither a retry of one of the entry's last batches
 * nor out of sequence, and the entry without an open transaction? 1 yes, 0 no (Python decides), -1 error. */
static int producer_batch_follows(PyObject *entry, long long base_seq, long long last_sequence) {
    int ok = 0;
    PyObject *batches = NULL, *it = NULL, *b = NULL, *txn = NULL;
    txn = PyObject_GetAttr(entry, s_current_txn_first_offset);
    if (txn == NULL) return -1;
    if (txn != Py_None) goto done;  /* InvalidTxnState or a transaction's rules: Python */
    batches = PyObject_GetAttr(entry, s_batches);
    if (batches == NULL) { ok = -1; goto done; }
    long long last_seq = -1;
    it = PyObject_GetIter(batches);
    if (it == NULL) { ok = -1; goto done; }
    while ((b = PyIter_Next(it)) != NULL) {
        /* BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp) */
        if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) < 2) { Py_DECREF(b); goto done; }
        long long first = PyLong_AsLongLong(PyTuple_GET_ITEM(b, 0));
        long long last = PyLong_AsLongLong(PyTuple_GET_ITEM(b, 1));
        Py_DECREF(b);
        if (PyErr_Occurred()) { ok = -1; goto done; }
        if (first == base_seq && last == last_sequence) goto done;  /* a retry: answered by Python */
        last_seq = last;
    }
    if (PyErr_Occurred()) { ok = -1; goto done; }
    /* _in_sequence(last_seq, base_seq) */
    ok = (base_seq == last_seq + 1) || (base_seq == 0 && last_seq == INT32_MAX_);
done:
    Py_XDECREF(txn);
    Py_XDECREF(batches);
    Py_XDECREF(it);
    return ok;
}

/* The part of LogSegment.should_roll that this path can answer without I/O: 1 roll (or cannot tell:
 * Python decides), 0 no roll, -1 error. */
static int segment_would_roll(PyObject *seg, long long seg_size, long long append_size, long long segment_bytes,
                              long long segment_ms, long long now, long long max_ts, long long last_offset) {
    long long v, created, jitter, base;
    if (seg_size > 0) {
        if (seg_size > segment_bytes - append_size) return 1;
        PyObject *rolling = PyObject_GetAttr(seg, s_rolling_ts);
        if (rolling == NULL) return -1;
        if (rolling == Py_None) { Py_DECREF(rolling); return 1; }  /* read from the file: Python */
        long long rolling_ts = PyLong_AsLongLong(rolling);
        Py_DECREF(rolling);
        if (rolling_ts == -1 && PyErr_Occurred()) return -1;
        long long waited;
        if (rolling_ts >= 0) {
            waited = max_ts - rolling_ts;
        } else {
            if (get_ll(seg, s_created_ms, &created) < 0) return -1;
            waited = now - created;
        }
        if (get_ll(seg, s_roll_jitter_ms, &jitter) < 0) return -1;
        if (waited > segment_ms - jitter) return 1;
    }
    PyObject *indexes[2] = {NULL, NULL};
    indexes[0] = PyObject_GetAttr(seg, s_offset_index);
    if (indexes[0] == NULL) return -1;
    indexes[1] = PyObject_GetAttr(seg, s_time_index);
    if (indexes[1] == NULL) { Py_DECREF(indexes[0]); return -1; }
    int r = 0;
    for (int i = 0; i < 2 && r == 0; i++) {
        long long entries, length;
        int loaded = get_bool(indexes[i], s_loaded);
        if (loaded < 0) { r = -1; break; }
        if (!loaded) { r = 1; break; }  /* is_full() would map it first: Python */
        if (get_ll(indexes[i], s_entries, &entries) < 0 || get_ll(indexes[i], s_length, &length) < 0) { r = -1; break; }
        /* OffsetIndex.is_full: entries >= length // 8; TimeIndex.is_full keeps one slot for a roll. */
        long long capacity = i == 0 ? floor_div(length, 8) : floor_div(length, 12) - 1;
        if (entries >= capacity) r = 1;
    }
    Py_DECREF(indexes[0]);
    Py_DECREF(indexes[1]);
    if (r != 0) return r;
    if (get_ll(seg, s_base_offset, &base) < 0) return -1;
    v = last_offset - base;
    return (v < 0 || v > INT32_MAX_) ? 1 : 0;
}

/* Is the log online and not closed (PartitionLog._check_online passes)? 1 yes, 0 no (Python raises its
 * error), -1 error. */
static int log_is_open(PyObject *log) {
    int r = get_bool(log, s_offline);
    if (r != 0) return r < 0 ? -1 : 0;
    r = get_bool(log, s_closed);
    if (r != 0) return r < 0 ? -1 : 0;
    return 1;
}

/* The active segment, when an append of ``total`` bytes up to ``last_offset`` goes into it without a roll
 * and its largest timestamp is in memory: 1 with *seg_out (a new reference) and *seg_size, 0 when Python
 * decides (no segment, a roll, a largest timestamp to read back), -1 error. */
static int active_segment(PyObject *log, Py_ssize_t total, long long segment_bytes, long long segment_ms,
                          long long now, long long max_ts, long long last_offset, PyObject **seg_out,
                          long long *seg_size) {
    PyObject *segments = PyObject_GetAttr(log, s_segments), *seg = NULL, *seg_max = NULL;
    if (segments == NULL) return -1;
    int r = -1;
    Py_ssize_t nseg = PyObject_Length(segments);
    if (nseg <= 0) {
        r = nseg < 0 ? -1 : 0;
        goto done;
    }
    seg = PySequence_GetItem(segments, nseg - 1);
    if (seg == NULL || get_ll(seg, s_size, seg_size) < 0) goto done;
    r = segment_would_roll(seg, *seg_size, total, segment_bytes, segment_ms, now, max_ts, last_offset);
    if (r != 0) {
        r = r < 0 ? -1 : 0;
        goto done;
    }
    seg_max = PyObject_GetAttr(seg, s_max_ts);
    if (seg_max == NULL) {
        r = -1;
        goto done;
    }
    r = PyTuple_Check(seg_max) && PyTuple_GET_SIZE(seg_max) == 2;  /* None: read back by Python */
    if (r == 1) *seg_out = Py_NewRef(seg);
done:
    Py_DECREF(segments);
    Py_XDECREF(seg);
    Py_XDECREF(seg_max);
    return r;
}

/* pwrite all of buf at position, as LogSegment.append: a partial write is cut off again before the
 * error is raised. 0, or -1 with OSError set. */
static int write_all(int fd, const unsigned char *buf, Py_ssize_t total, long long position) {
    Py_ssize_t written = 0;
    int err = 0;
    while (written < total) {
        ssize_t n;
        Py_BEGIN_ALLOW_THREADS
        n = pwrite(fd, buf + written, (size_t)(total - written), (off_t)(position + written));
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) { err = -1; break; }
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            err = -1;
            break;
        }
        if (n == 0) {  /* no progress on a regular file: report it rather than spin */
            errno = EIO;
            PyErr_SetFromErrno(PyExc_OSError);
            err = -1;
            break;
        }
        written += n;
    }
    if (err && written) {
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = ftruncate(fd, (off_t)position);
        Py_END_ALLOW_THREADS
        (void)r;
    }
    return err;
}

/* Calls lock.release() without losing an exception already set. 0, or -1 with an exception. */
static int release_lock(PyObject *lock) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallMethodNoArgs(lock, s_release);
    if (r == NULL) {
        if (type != NULL) {  /* the first error wins, as in a with-block whose exit does not raise */
            PyErr_Clear();
            PyErr_Restore(type, value, tb);
        }
        return -1;
    }
    Py_DECREF(r);
    PyErr_Restore(type, value, tb);
    return type != NULL ? -1 : 0;
}

/* _Index._write_entry's common case: a store of (key, value) into the active index's writable mapping,
 * where the entry's blocks are known allocated. 1 stored, 0 not this case (nothing changed), -1 error. */
static int index_store(PyObject *index, long long entries, int entry_size, long long key, long long value) {
    long long allocated;
    int r = get_bool(index, s_mm_writable);
    if (r <= 0) return r;
    PyObject *writer = PyObject_GetAttr(index, s_writer);
    if (writer == NULL) return -1;
    int has_writer = writer != Py_None;
    Py_DECREF(writer);
    if (!has_writer) return 0;
    if (get_ll(index, s_allocated, &allocated) < 0) return -1;
    const long long pos = entries * entry_size, end = pos + entry_size;
    if (end > allocated) return 0;  /* the page's blocks are allocated first: Python */
    PyObject *mm = PyObject_GetAttr(index, s_mm);
    if (mm == NULL) return -1;
    Py_buffer b;
    if (PyObject_GetBuffer(mm, &b, PyBUF_WRITABLE) < 0) {
        Py_DECREF(mm);
        PyErr_Clear();
        return 0;
    }
    if (b.len < end) {
        PyBuffer_Release(&b);
        Py_DECREF(mm);
        return 0;
    }
    unsigned char *p = (unsigned char *)b.buf + pos;
    if (entry_size == 8) {  /* offset index: relativeOffset int32, position int32 */
        wr32(p, (uint32_t)(int32_t)key);
        wr32(p + 4, (uint32_t)(int32_t)value);
    } else {  /* time index: timestamp int64, relativeOffset int32 */
        wr64(p, (uint64_t)key);
        wr32(p + 8, (uint32_t)(int32_t)value);
    }
    PyBuffer_Release(&b);
    Py_DECREF(mm);
    if (PyObject_SetAttr(index, s_unsynced, Py_True) < 0) return -1;
    if (set_ll(index, s_entries, entries + 1) < 0) return -1;
    return 1;
}

/* obj.name as a pair of C integers, as the indexes keep their last entry: 1, 0 when it is not a pair of
 * two items (None: not known), or -1 with an exception. */
static int get_pair(PyObject *obj, PyObject *name, long long *first, long long *second) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) { Py_DECREF(v); return 0; }
    *first = PyLong_AsLongLong(PyTuple_GET_ITEM(v, 0));
    *second = PyLong_AsLongLong(PyTuple_GET_ITEM(v, 1));
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : 1;
}

/* OffsetIndex.append(offset, position) for a loaded index whose last appended offset is known: 1 done,
 * 0 not this case (nothing changed: OffsetIndex.append decides, with its errors), -1 error. */
static int offset_index_append(PyObject *index, long long offset, long long position) {
    long long entries, base;
    int r = get_bool(index, s_loaded);
    if (r <= 0) return r;
    if (get_ll(index, s_entries, &entries) < 0) return -1;
    if (entries) {
        long long n, last;  /* the entry count and offset just after the last append (OffsetIndex._appended) */
        r = get_pair(index, s_appended, &n, &last);
        if (r <= 0) return r;
        if (n != entries || offset <= last) return 0;
    }
    if (get_ll(index, s_base_offset, &base) < 0) return -1;
    const long long rel = offset - base;
    if (rel < 0 || rel > INT32_MAX_ || position < 0 || position > INT32_MAX_) return 0;
    r = index_store(index, entries, 8, rel, position);
    if (r != 1) return r;
    PyObject *appended = Py_BuildValue("(LL)", entries + 1, offset);
    if (appended == NULL) return -1;
    r = PyObject_SetAttr(index, s_appended, appended);
    Py_DECREF(appended);
    return r < 0 ? -1 : 1;
}

/* TimeIndex.maybe_append(timestamp, offset) for a loaded index with room and a known last entry: 1 done
 * (an entry, or none needed), 0 not this case (nothing changed: maybe_append decides), -1 error. */
static int time_index_maybe_append(PyObject *index, long long timestamp, long long offset) {
    long long entries, length, base;
    int r = get_bool(index, s_loaded);
    if (r <= 0) return r;
    if (get_ll(index, s_entries, &entries) < 0 || get_ll(index, s_length, &length) < 0) return -1;
    if (entries >= floor_div(length, 12) - 1) return 0;  /* full */
    r = get_bool(index, s_last_unread);
    if (r != 0) return r < 0 ? -1 : 0;
    long long last_ts, last_offset;
    r = get_pair(index, s_last, &last_ts, &last_offset);
    if (r <= 0) return r;
    if (entries && offset < last_offset) return 0;
    if (timestamp <= last_ts) return 1;
    if (entries * 12 + 12 > length) return 0;  /* a resize */
    if (get_ll(index, s_base_offset, &base) < 0) return -1;
    const long long rel = offset - base;
    if (rel < 0 || rel > INT32_MAX_) return 0;
    r = index_store(index, entries, 12, timestamp, rel);
    if (r != 1) return r;
    PyObject *last = Py_BuildValue("(LL)", timestamp, offset);
    if (last == NULL) return -1;
    r = PyObject_SetAttr(index, s_last, last);
    Py_DECREF(last);
    return r < 0 ? -1 : 1;
}

/* LogSegment._append_index_entries(offset, position), with the segment's largest timestamp and its
 * offset: the entries that are not stores of the common case go through the Python methods, and one
 * that cannot be written (OSError) is skipped, as there. 0, or -1 with an exception. */
static int append_index_entries(PyObject *seg, long long offset, long long position, long long ts,
                                long long ts_offset) {
    PyObject *index = PyObject_GetAttr(seg, s_offset_index), *v;
    if (index == NULL) return -1;
    int r = offset_index_append(index, offset, position);
    Py_DECREF(index);
    if (r < 0) return -1;
    if (r == 0) {
        v = PyObject_CallMethod(seg, "_append_index_entries", "LL", offset, position);
        if (v == NULL) return -1;
        Py_DECREF(v);
        return 0;
    }
    index = PyObject_GetAttr(seg, s_time_index);
    if (index == NULL) return -1;
    r = time_index_maybe_append(index, ts, ts_offset);
    if (r == 0) {
        v = PyObject_CallMethod(index, "maybe_append", "LL", ts, ts_offset);
        if (v != NULL) {
            Py_DECREF(v);
        } else if (PyErr_ExceptionMatches(PyExc_OSError)) {
            PyErr_Clear();
        } else {
            r = -1;
        }
    }
    Py_DECREF(index);
    return r < 0 ? -1 : 0;
}

/* AppendInfo(...) without running its __init__: its slots set in field order (see configure). */
static PyObject *new_append_info(const long long *values, Py_ssize_t valid_bytes) {
    PyTypeObject *tp = (PyTypeObject *)AppendInfo_t;
    PyObject *o = tp->tp_alloc(tp, 0);
    if (o == NULL) return NULL;
    for (int i = 0; i < APPEND_INFO_FIELDS; i++) {
        PyObject *v = i < 7 ? PyLong_FromLongLong(values[i])
                    : i == 7 ? PyLong_FromSsize_t(valid_bytes) : Py_NewRef(Py_False);
        if (v == NULL || PyMember_SetOne((char *)o, append_info_members[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(o);
            return NULL;
        }
        Py_DECREF(v);
    }
    return o;
}

typedef struct {
    long long batch_length, crc, attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, records_count;
    int magic;
} Header;

/* LogSegment.append of ``total`` bytes holding the batches of ``headers`` (a list of BatchHeader, positions
 * within the bytes) at ``seg_size``, then PartitionLog.append's updates right after it: the LEO and the
 * prefix of largest timestamps. 0, or -1 with an exception (a failed write leaves what Python's leaves). */
static int segment_append(PyObject *log, PyObject *seg, const unsigned char *buf, Py_ssize_t total,
                          long long seg_size, long long last_offset, long long max_ts, long long offset_of_max,
                          PyObject *headers) {
    PyObject *handle = NULL, *seg_max = NULL, *recent_item = NULL, *tmp = NULL;
    long long fd_ll, bytes_since_index, index_interval, seg_max_ts, seg_max_offset;
    int r, result = -1;

    if (seg_size == 0 && set_ll(seg, s_rolling_ts, max_ts) < 0) goto done;
    handle = PyObject_GetAttr(seg, s_file);
    if (handle == NULL) goto done;
    fd_ll = handle_acquire(handle);
    if (fd_ll == -1 && PyErr_Occurred()) goto done;
    r = write_all((int)fd_ll, buf, total, seg_size);
    {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (handle_release(handle) < 0) {  /* the release's error replaces the write's, as in a finally block */
            Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
            goto done;
        }
        PyErr_Restore(type, value, tb);
    }
    if (r < 0) goto done;
    if (set_ll(seg, s_size, seg_size + total) < 0) goto done;
    if (PyObject_SetAttr(seg, s_unsynced, Py_True) < 0) goto done;
    if (set_ll(seg, s_next_offset, last_offset + 1) < 0) goto done;
    recent_item = Py_BuildValue("(LO)", seg_size, headers);
    if (recent_item == NULL) goto done;
    tmp = PyObject_GetAttr(seg, s_recent);
    if (tmp == NULL) goto done;
    {
        PyObject *ok = PyObject_CallMethodOneArg(tmp, s_append, recent_item);
        Py_CLEAR(tmp);
        if (ok == NULL) goto done;
        Py_DECREF(ok);
    }
    seg_max = PyObject_GetAttr(seg, s_max_ts);  /* read after the write, as the Python code does */
    if (seg_max == NULL) goto done;
    if (seg_max == Py_None) {  /* reset meanwhile: the property reads it back, as in LogSegment.append */
        Py_CLEAR(seg_max);
        seg_max = PyObject_GetAttrString(seg, "max_timestamp_and_offset");
        if (seg_max == NULL) goto done;
    }
    if (!PyTuple_Check(seg_max) || PyTuple_GET_SIZE(seg_max) < 1) {
        PyErr_SetString(PyExc_TypeError, "a segment's largest timestamp is a (timestamp, offset) tuple");
        goto done;
    }
    /* The segment's largest timestamp and its offset after this append, which its time index entry gets. */
    seg_max_ts = PyLong_AsLongLong(PyTuple_GET_ITEM(seg_max, 0));
    if (seg_max_ts == -1 && PyErr_Occurred()) goto done;
    if (max_ts > seg_max_ts) {
        tmp = Py_BuildValue("(LL)", max_ts, offset_of_max);
        if (tmp == NULL || PyObject_SetAttr(seg, s_max_ts, tmp) < 0) goto done;
        Py_CLEAR(tmp);
        seg_max_ts = max_ts;
        seg_max_offset = offset_of_max;
    } else {
        if (PyTuple_GET_SIZE(seg_max) != 2) {
            PyErr_SetString(PyExc_TypeError, "a segment's largest timestamp is a (timestamp, offset) tuple");
            goto done;
        }
        seg_max_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(seg_max, 1));
        if (seg_max_offset == -1 && PyErr_Occurred()) goto done;
    }
    if (get_ll(seg, s_bytes_since_index, &bytes_since_index) < 0) goto done;
    tmp = PyObject_GetAttr(seg, s_settings);
    if (tmp == NULL) goto done;
    r = get_ll(tmp, s_index_interval_bytes, &index_interval);
    Py_CLEAR(tmp);
    if (r < 0) goto done;
    if (bytes_since_index > index_interval) {
        if (append_index_entries(seg, last_offset, seg_size, seg_max_ts, seg_max_offset) < 0) goto done;
        bytes_since_index = 0;
    }
    if (set_ll(seg, s_bytes_since_index, bytes_since_index + total) < 0) goto done;

    /* PartitionLog.append, after the segment's write */
    if (set_ll(log, s_leo, last_offset + 1) < 0) goto done;
    tmp = PyObject_GetAttr(log, s_prefix_max_ts);
    if (tmp == NULL) goto done;
    if (tmp != Py_None) {
        Py_ssize_t n = PyObject_Length(tmp);
        if (n < 0) goto done;
        PyObject *lastv = PySequence_GetItem(tmp, n - 1);
        if (lastv == NULL) goto done;
        long long prefix_last = PyLong_AsLongLong(lastv);
        Py_DECREF(lastv);
        if (prefix_last == -1 && PyErr_Occurred()) goto done;
        if (max_ts > prefix_last) {
            PyObject *v = PyLong_FromLongLong(max_ts);
            if (v == NULL) goto done;
            r = PySequence_SetItem(tmp, n - 1, v);
            Py_DECREF(v);
            if (r < 0) goto done;
        }
    }
    result = 0;
done:
    Py_XDECREF(handle);
    Py_XDECREF(seg_max);
    Py_XDECREF(recent_item);
    Py_XDECREF(tmp);
    return result;
}

/* PartitionLog.append's leader-epoch step for one batch: the epoch cache gets (epoch, offset) when the
 * epoch is above its latest (LeaderEpochFileCache.latest_epoch: the last of its epochs, None without
 * any). 0, or -1 with an exception. */
static int assign_epoch_if_newer(PyObject *log, long long epoch, long long offset) {
    PyObject *cache = PyObject_GetAttr(log, s_leader_epoch_cache);
    if (cache == NULL) return -1;
    PyObject *epochs = PyObject_GetAttr(cache, s_epochs), *latest;
    if (epochs == NULL) {  /* a missing attribute is a bug, as in get_ll */
        Py_DECREF(cache);
        return -1;
    }
    if (PyList_CheckExact(epochs)) {
        Py_ssize_t n = PyList_GET_SIZE(epochs);
        latest = Py_NewRef(n ? PyList_GET_ITEM(epochs, n - 1) : Py_None);
    } else {
        latest = PyObject_GetAttr(cache, s_latest_epoch);
    }
    Py_DECREF(epochs);
    Py_DECREF(cache);
    if (latest == NULL) return -1;
    int assign = 1;
    if (latest != Py_None) {
        long long l = PyLong_AsLongLong(latest);
        if (l == -1 && PyErr_Occurred()) { Py_DECREF(latest); return -1; }
        assign = epoch > l;
    }
    Py_DECREF(latest);
    if (assign) {
        PyObject *v = PyObject_CallMethod(log, "_assign_epoch", "LL", epoch, offset);
        if (v == NULL) return -1;
        Py_DECREF(v);
    }
    return 0;
}

/* ProducerStateManager.update for one appended data batch, neither transactional nor a control batch
 * (``header`` is its BatchHeader): the producer's entry, when it is ``expected`` (or, with NULL, any
 * entry) and in the batch's epoch, gets the batch's metadata and timestamp here. Anything else (no
 * entry yet, another epoch, an entry replaced meanwhile) goes through PartitionLog._apply_producer_state.
 * 0, or -1 with an exception. */
static int producer_update(PyObject *log, PyObject *ps, PyObject *expected, PyObject *header, PyObject *seg,
                           const Header *h, long long base_offset, long long last_sequence) {
    long long entry_epoch;
    PyObject *producers = PyObject_GetAttr(ps, s_producers);
    if (producers == NULL) return -1;
    PyObject *pid = PyLong_FromLongLong(h->producer_id);
    if (pid == NULL) { Py_DECREF(producers); return -1; }
    PyObject *entry = PyObject_GetItem(producers, pid);
    Py_DECREF(pid);
    Py_DECREF(producers);
    if (entry == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) return -1;
        PyErr_Clear();
    }
    int r = entry != NULL && (expected == NULL || entry == expected) ? get_ll(entry, s_producer_epoch, &entry_epoch) : 1;
    if (r < 0) { Py_XDECREF(entry); return -1; }
    if (r == 0 && entry_epoch == h->producer_epoch) {
        PyObject *meta = new_named_tuple(BatchMetadata_t, Py_BuildValue(
            "(LLLLL)", h->base_sequence, last_sequence, base_offset, base_offset + h->last_offset_delta,
            h->max_timestamp));
        if (meta == NULL) { Py_DECREF(entry); return -1; }
        PyObject *batches = PyObject_GetAttr(entry, s_batches);
        if (batches == NULL) { Py_DECREF(meta); Py_DECREF(entry); return -1; }
        PyObject *ok = PyObject_CallMethodOneArg(batches, s_append, meta);
        Py_DECREF(batches);
        Py_DECREF(meta);
        if (ok == NULL) { Py_DECREF(entry); return -1; }
        Py_DECREF(ok);
        r = set_ll(entry, s_last_timestamp, h->max_timestamp);
        Py_DECREF(entry);
        return r;
    }
    Py_XDECREF(entry);
    PyObject *v = PyObject_CallMethodObjArgs(log, s_apply_producer_state, header, Py_None, seg, NULL);
    if (v == NULL) return -1;
    Py_DECREF(v);
    return 0;
}

/* The end of PartitionLog.append: the producer state's map end offset, a flush when flush.messages is
 * reached, and the AppendInfo of (first offset, last offset, largest timestamp, its offset, the log
 * append time, -, records) with the log start offset put in. NULL with an exception on failure. */
static PyObject *finish_append(PyObject *log, PyObject *ps, long long *info, Py_ssize_t total,
                               long long flush_messages) {
    long long recovery_point, log_start_offset;
    const long long last_offset = info[1];
    if (set_ll(ps, s_map_end_offset, last_offset + 1) < 0) return NULL;
    if (get_ll(log, s_recovery_point, &recovery_point) < 0) return NULL;
    if (last_offset + 1 - recovery_point >= flush_messages) {
        PyObject *v = PyObject_CallMethodNoArgs(log, s_flush);
        if (v == NULL) return NULL;
        Py_DECREF(v);
    }
    if (get_ll(log, s_log_start_offset, &log_start_offset) < 0) return NULL;
    info[5] = log_start_offset;
    return new_append_info(info, total);
}

/* The locked part: checks that may still send the append to Python, then the write and the updates.
 * Returns the AppendInfo, Py_None (new reference) for Python, or NULL with an exception. */
static PyObject *append_locked(PyObject *log, unsigned char *buf, Py_ssize_t total, const Header *h,
                               long long leader_epoch, long long log_append_time_ms, long long now,
                               long long segment_bytes, long long segment_ms, long long flush_messages) {
    PyObject *result = NULL, *ps = NULL, *entry = NULL, *seg = NULL, *header = NULL, *headers = NULL;
    long long leo, seg_size;
    long long last_sequence = -1;
    int r;

    r = log_is_open(log);
    if (r != 1) goto fallback_or_error;
    ps = PyObject_GetAttr(log, s_producer_state);
    if (ps == NULL) goto error;
    if (h->producer_id >= 0) {
        /* ProducerStateManager.check_append for one batch of a known producer in its epoch. */
        if (h->base_sequence < 0) goto fallback;
        PyObject *verifying = PyObject_GetAttr(ps, s_verification_states);
        if (verifying == NULL) goto error;
        r = PyObject_IsTrue(verifying);
        Py_DECREF(verifying);
        if (r != 0) goto fallback_or_error;
        PyObject *producers = PyObject_GetAttr(ps, s_producers);
        if (producers == NULL) goto error;
        PyObject *pid = PyLong_FromLongLong(h->producer_id);
        if (pid == NULL) { Py_DECREF(producers); goto error; }
        entry = PyObject_GetItem(producers, pid);
        Py_DECREF(pid);
        Py_DECREF(producers);
        last_sequence = (h->base_sequence + h->last_offset_delta) % (INT32_MAX_ + 1);
        if (entry == NULL) {
            /* The producer's first batch here: check_append has nothing to check for a producer without
             * state (any epoch and sequence start it, as in Kafka), and the update after the write
             * creates its entry through _apply_producer_state. With a thousand partitions, each new
             * producer's first batch in each of them comes this way. */
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) goto error;
            PyErr_Clear();
        } else {
            long long entry_epoch;
            if (get_ll(entry, s_producer_epoch, &entry_epoch) < 0) goto error;
            if (entry_epoch != h->producer_epoch || entry_epoch == NO_PRODUCER_EPOCH) goto fallback;
            r = producer_batch_follows(entry, h->base_sequence, last_sequence);
            if (r != 1) goto fallback_or_error;
        }
    }

    if (get_ll(log, s_leo, &leo) < 0) goto error;
    const long long last_offset = leo + h->last_offset_delta;
    const long long max_ts = h->max_timestamp > -1 ? h->max_timestamp : -1;
    r = active_segment(log, total, segment_bytes, segment_ms, now, max_ts, last_offset, &seg, &seg_size);
    if (r != 1) goto fallback_or_error;

    /* From here on, the append happens (or fails as PartitionLog.append would). Offsets and the
     * leader epoch go into the buffer in place: fields outside the CRC. */
    wr64(buf, (uint64_t)leo);
    wr32(buf + OFF_EPOCH, (uint32_t)(int32_t)leader_epoch);
    header = new_named_tuple(BatchHeader_t, Py_BuildValue(
        "(iLLLiLLLLLLLLL)", 0, leo, h->batch_length, leader_epoch, h->magic, h->crc, h->attributes,
        h->last_offset_delta, h->base_timestamp, h->max_timestamp, h->producer_id, h->producer_epoch,
        h->base_sequence, h->records_count));
    if (header == NULL) goto error;

    headers = PyList_New(1);
    if (headers == NULL) goto error;
    PyList_SET_ITEM(headers, 0, Py_NewRef(header));
    if (segment_append(log, seg, buf, total, seg_size, last_offset, max_ts, last_offset, headers) < 0) goto error;
    if (leader_epoch >= 0 && assign_epoch_if_newer(log, leader_epoch, leo) < 0) goto error;
    if (h->producer_id >= 0 && producer_update(log, ps, entry, header, seg, h, leo, last_sequence) < 0) goto error;
    {
        long long info[7] = {leo, last_offset, max_ts, last_offset, log_append_time_ms, 0, h->records_count};
        result = finish_append(log, ps, info, total, flush_messages);
    }
    goto done;

fallback_or_error:
    if (r < 0) goto error;
fallback:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(ps);
    Py_XDECREF(entry);
    Py_XDECREF(seg);
    Py_XDECREF(header);
    Py_XDECREF(headers);
    return result;
}

/* Reads a v2 batch header at ``p`` (at least HEADER_SIZE bytes) into ``h``. */
static void read_header(const unsigned char *p, Header *h) {
    h->batch_length = (int32_t)rd32(p + OFF_BATCH_LENGTH);
    h->magic = p[OFF_MAGIC];
    h->crc = rd32(p + OFF_CRC);
    h->attributes = (int16_t)rd16(p + OFF_ATTRIBUTES);
    h->last_offset_delta = (int32_t)rd32(p + OFF_LAST_OFFSET_DELTA);
    h->base_timestamp = (int64_t)rd64(p + OFF_BASE_TIMESTAMP);
    h->max_timestamp = (int64_t)rd64(p + OFF_MAX_TIMESTAMP);
    h->producer_id = (int64_t)rd64(p + OFF_PRODUCER_ID);
    h->producer_epoch = (int16_t)rd16(p + OFF_PRODUCER_EPOCH);
    h->base_sequence = (int32_t)rd32(p + OFF_BASE_SEQUENCE);
    h->records_count = (int32_t)rd32(p + OFF_RECORDS_COUNT);
}

/* Whether the log is online and open, and PartitionLog._append_limits() into ``lim``: (max.message.bytes,
 * segment.bytes, segment.ms, flush.messages, flush.ms), read from its cache while that is for the log's
 * current config. 1, 0 when Python decides (offline, closed, an unexpected shape), -1 error. */
static int read_limits(PyObject *log, long long *lim) {
    PyObject *limits = NULL;
    int r = log_is_open(log);
    if (r != 1) return r;
    PyObject *config = PyObject_GetAttr(log, s_config), *cached;
    if (config == NULL) return -1;
    cached = PyObject_GetAttr(log, s_limits_cache);
    if (cached != NULL && PyTuple_CheckExact(cached) && PyTuple_GET_SIZE(cached) == 2 &&
        PyTuple_GET_ITEM(cached, 0) == config)
        limits = Py_NewRef(PyTuple_GET_ITEM(cached, 1));
    Py_DECREF(config);
    Py_XDECREF(cached);
    if (cached == NULL) return -1;
    if (limits == NULL) limits = PyObject_CallMethodNoArgs(log, s_append_limits);
    if (limits == NULL) return -1;
    r = 1;
    if (!PyTuple_Check(limits) || PyTuple_GET_SIZE(limits) != 5) {
        r = 0;
    } else {
        for (int i = 0; i < 5 && r == 1; i++) {
            lim[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(limits, i));
            if (lim[i] == -1 && PyErr_Occurred()) r = -1;
        }
    }
    Py_DECREF(limits);
    return r;
}

/* The log's clock: the broker's (now_ms) read here, not through a Python call; a test's called. 0, or
 * -1 with an exception. */
static int log_now(PyObject *log, long long *now) {
    PyObject *clock = PyObject_GetAttr(log, s_clock);
    if (clock == NULL) return -1;
    if (clock == now_ms_fn) {
        Py_DECREF(clock);
        *now = realtime_ms();
        return 0;
    }
    PyObject *v = PyObject_CallNoArgs(clock);
    Py_DECREF(clock);
    if (v == NULL) return -1;
    *now = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*now == -1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *append_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "append_batch(log, records, leader_epoch, log_append_time_ms)");
        return NULL;
    }
    if (BatchHeader_t == NULL) Py_RETURN_NONE;  /* not configured: Python appends */
    PyObject *log = args[0], *records = args[1];
    long long leader_epoch = PyLong_AsLongLong(args[2]);
    if (leader_epoch == -1 && PyErr_Occurred()) return NULL;
    long long log_append_time_ms = PyLong_AsLongLong(args[3]);
    if (log_append_time_ms == -1 && PyErr_Occurred()) return NULL;
    if (!PyMemoryView_Check(records) || leader_epoch < INT32_MIN || leader_epoch > INT32_MAX) Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(records, &view, PyBUF_SIMPLE | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();  /* read-only or not contiguous: Python copies it */
        Py_RETURN_NONE;
    }
    PyObject *result = NULL, *lock = NULL;
    unsigned char *buf = (unsigned char *)view.buf;
    const Py_ssize_t total = view.len;
    Header h;
    /* buffer_headers' checks, for exactly one batch filling the buffer */
    if (total < HEADER_SIZE) goto fallback;
    read_header(buf, &h);
    if (h.magic != 2 || h.batch_length < MIN_BATCH_LENGTH || h.batch_length + LOG_OVERHEAD != total ||
        h.last_offset_delta < 0 || h.records_count < 0 || (int64_t)rd64(buf) < 0)
        goto fallback;
    if (h.attributes & (TRANSACTIONAL_FLAG | CONTROL_FLAG)) goto fallback;

    long long lim[5], now;
    int r = read_limits(log, lim);
    if (r != 1) goto fallback_or_error;
    if (h.batch_length + LOG_OVERHEAD > lim[0] || total > lim[1]) goto fallback;  /* refused by Python */
    if (log_now(log, &now) < 0) goto error;
    lock = PyObject_GetAttr(log, s_lock);
    if (lock == NULL || acquire_lock(lock) < 0) goto error;
    result = append_locked(log, buf, total, &h, leader_epoch, log_append_time_ms, now, lim[1], lim[2], lim[3]);
    if (release_lock(lock) < 0) Py_CLEAR(result);
    goto done;

fallback_or_error:
    if (r < 0) goto error;
fallback:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(lock);
    PyBuffer_Release(&view);
    return result;
}

/* At most this many batches in one follower append here; a longer fetch goes through Python. */
#define FOLLOWER_MAX_BATCHES 64

/* The locked part of a follower's append of ``n`` parsed batches (``hs``, at ``pos`` in the buffer, with
 * their own base offsets and partition leader epochs): as append_locked, without assigning anything.
 * Returns the AppendInfo, Py_None (new reference) for Python, or NULL with an exception. */
static PyObject *follower_locked(PyObject *log, const unsigned char *buf, Py_ssize_t total, const Header *hs,
                                 const long long *pos, const long long *base, const long long *ple, int n,
                                 long long now, long long segment_bytes, long long segment_ms,
                                 long long flush_messages) {
    PyObject *result = NULL, *ps = NULL, *seg = NULL, *headers = NULL;
    long long leo, seg_size;
    int r;

    r = log_is_open(log);
    if (r != 1) goto fallback_or_error;
    ps = PyObject_GetAttr(log, s_producer_state);
    if (ps == NULL) goto error;
    if (get_ll(log, s_leo, &leo) < 0) goto error;
    if (base[0] != leo) goto fallback;  /* a gap after the LEO (or an error below it): Python */
    const long long last_offset = base[n - 1] + hs[n - 1].last_offset_delta;
    long long max_ts = -1, offset_of_max = last_offset, count = 0;
    for (int i = 0; i < n; i++) {
        count += hs[i].records_count;
        if (hs[i].max_timestamp > max_ts) {
            max_ts = hs[i].max_timestamp;
            offset_of_max = base[i] + hs[i].last_offset_delta;
        }
    }
    r = active_segment(log, total, segment_bytes, segment_ms, now, max_ts, last_offset, &seg, &seg_size);
    if (r != 1) goto fallback_or_error;

    /* From here on, the append happens (or fails as PartitionLog.append would). */
    headers = PyList_New(n);
    if (headers == NULL) goto error;
    for (int i = 0; i < n; i++) {
        const Header *h = &hs[i];
        PyObject *header = new_named_tuple(BatchHeader_t, Py_BuildValue(
            "(LLLLiLLLLLLLLL)", pos[i], base[i], h->batch_length, ple[i], h->magic, h->crc, h->attributes,
            h->last_offset_delta, h->base_timestamp, h->max_timestamp, h->producer_id, h->producer_epoch,
            h->base_sequence, h->records_count));
        if (header == NULL) goto error;
        PyList_SET_ITEM(headers, i, header);
    }
    if (segment_append(log, seg, buf, total, seg_size, last_offset, max_ts, offset_of_max, headers) < 0) goto error;
    for (int i = 0; i < n; i++) {
        const Header *h = &hs[i];
        if (ple[i] >= 0 && assign_epoch_if_newer(log, ple[i], base[i]) < 0) goto error;
        if (h->producer_id >= 0) {
            const long long last_sequence = (h->base_sequence + h->last_offset_delta) % (INT32_MAX_ + 1);
            if (producer_update(log, ps, NULL, PyList_GET_ITEM(headers, i), seg, h, base[i], last_sequence) < 0)
                goto error;
        }
    }
    {
        long long info[7] = {base[0], last_offset, max_ts, offset_of_max, -1, 0, count};
        result = finish_append(log, ps, info, total, flush_messages);
    }
    goto done;

fallback_or_error:
    if (r < 0) goto error;
fallback:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(ps);
    Py_XDECREF(seg);
    Py_XDECREF(headers);
    return result;
}

/* Is the stored CRC-32C of the batch at ``p`` (``size`` bytes) that of its bytes from the attributes on?
 * 1 yes, 0 no, -1 error. With the crc32c package's function, as crc_is_valid. */
static int batch_crc_is_valid(const unsigned char *p, long long size, long long stored) {
    PyObject *section = PyMemoryView_FromMemory((char *)(p + OFF_ATTRIBUTES), size - OFF_ATTRIBUTES, PyBUF_READ);
    if (section == NULL) return -1;
    PyObject *crc = PyObject_CallOneArg(crc32c_fn, section);
    Py_DECREF(section);
    if (crc == NULL) return -1;
    unsigned long computed = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (computed == (unsigned long)-1 && PyErr_Occurred()) return -1;
    return (long long)computed == stored;
}

/* append_follower(log, records): a follower's append of the batches a fetch brought (Kafka's
 * appendAsFollower; in Python PartitionLog.append without assigning offsets), for the common case only:
 *
 *   - whole v2 batches, at most FOLLOWER_MAX_BATCHES, neither transactional nor control batches, whose
 *     offsets follow each other from the log's LEO, each with a valid CRC (checked whatever the batch's
 *     origin, as Python does), and a sequence for a producer's;
 *   - within max.message.bytes and segment.bytes, into a segment that does not roll.
 *
 * The producer state gets each producer's batch as ProducerStateManager.update would (a follower checks
 * no sequence). Anything else returns None before anything is changed. */
static PyObject *append_follower(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "append_follower(log, records)");
        return NULL;
    }
    if (BatchHeader_t == NULL || crc32c_fn == NULL) Py_RETURN_NONE;  /* not configured: Python appends */
    PyObject *log = args[0], *records = args[1];
    Py_buffer view;
    if (PyObject_GetBuffer(records, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *result = NULL, *lock = NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    const Py_ssize_t total = view.len;
    Header hs[FOLLOWER_MAX_BATCHES];
    long long pos[FOLLOWER_MAX_BATCHES], base[FOLLOWER_MAX_BATCHES], ple[FOLLOWER_MAX_BATCHES], lim[5], now;
    int n = 0, r = 0;
    /* buffer_headers' checks, and the batches' offsets one after the other */
    for (long long p = 0; p < total; n++) {
        if (n == FOLLOWER_MAX_BATCHES || total - p < HEADER_SIZE) goto fallback;
        Header *h = &hs[n];
        read_header(buf + p, h);
        base[n] = (int64_t)rd64(buf + p);
        ple[n] = (int32_t)rd32(buf + p + OFF_EPOCH);
        pos[n] = p;
        const long long size = h->batch_length + LOG_OVERHEAD;
        if (h->magic != 2 || h->batch_length < MIN_BATCH_LENGTH || h->last_offset_delta < 0 ||
            h->records_count < 0 || base[n] < 0 || p + size > total)
            goto fallback;
        if (h->attributes & (TRANSACTIONAL_FLAG | CONTROL_FLAG)) goto fallback;
        if (h->producer_id >= 0 && h->base_sequence < 0) goto fallback;
        if (n > 0 && base[n] != base[n - 1] + hs[n - 1].last_offset_delta + 1) goto fallback;
        p += size;
    }
    if (n == 0) goto fallback;
    r = read_limits(log, lim);
    if (r != 1) goto fallback_or_error;
    for (int i = 0; i < n; i++) {
        if (hs[i].batch_length + LOG_OVERHEAD > lim[0]) goto fallback;  /* refused by Python */
    }
    if (total > lim[1]) goto fallback;
    for (int i = 0; i < n; i++) {
        r = batch_crc_is_valid(buf + pos[i], hs[i].batch_length + LOG_OVERHEAD, hs[i].crc);
        if (r != 1) goto fallback_or_error;  /* corrupt: Python raises its error */
    }
    if (log_now(log, &now) < 0) goto error;
    lock = PyObject_GetAttr(log, s_lock);
    if (lock == NULL || acquire_lock(lock) < 0) goto error;
    result = follower_locked(log, buf, total, hs, pos, base, ple, n, now, lim[1], lim[2], lim[3]);
    if (release_lock(lock) < 0) Py_CLEAR(result);
    goto done;

fallback_or_error:
    if (r < 0) goto error;
fallback:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(lock);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char *const append_info_fields[APPEND_INFO_FIELDS] = {
        "first_offset", "last_offset", "max_timestamp", "offset_of_max_timestamp", "log_append_time_ms",
        "log_start_offset", "records_count", "valid_bytes", "duplicate"};
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "configure(BatchHeader, AppendInfo, BatchMetadata, now_ms, crc32c)");
        return NULL;
    }
    if (!PyCallable_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "configure: crc32c is a function");
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (!PyType_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "configure: the first three arguments are classes");
            return NULL;
        }
    }
    /* The namedtuples are built by tuple.__new__, AppendInfo by its slots: that is what their own
     * constructors do only while they are a plain namedtuple and a slots dataclass without __new__. */
    PyTypeObject *info = (PyTypeObject *)args[1];
    if (!PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)args[2], &PyTuple_Type) || info->tp_new != PyBaseObject_Type.tp_new ||
        info->tp_base != &PyBaseObject_Type)
        Py_RETURN_FALSE;
    for (int i = 0; i < APPEND_INFO_FIELDS; i++) {
        PyObject *d = PyObject_GetAttrString(args[1], append_info_fields[i]);
        if (d == NULL) return NULL;
        int is_slot = Py_IS_TYPE(d, &PyMemberDescr_Type);
        if (is_slot) append_info_members[i] = ((PyMemberDescrObject *)d)->d_member;
        Py_DECREF(d);  /* the class keeps its descriptors */
        if (!is_slot) Py_RETURN_FALSE;
    }
    Py_XSETREF(BatchHeader_t, Py_NewRef(args[0]));
    Py_XSETREF(AppendInfo_t, Py_NewRef(args[1]));
    Py_XSETREF(BatchMetadata_t, Py_NewRef(args[2]));
    Py_XSETREF(now_ms_fn, Py_NewRef(args[3]));
    Py_XSETREF(crc32c_fn, Py_NewRef(args[4]));
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"append_batch", (PyCFunction)(void (*)(void))append_batch, METH_FASTCALL,
     "append_batch(log, records, leader_epoch, log_append_time_ms): the AppendInfo of one client batch\n"
     "appended as leader, or None when PartitionLog.append has to decide."},
    {"append_follower", (PyCFunction)(void (*)(void))append_follower, METH_FASTCALL,
     "append_follower(log, records): the AppendInfo of a fetch's batches appended as follower, or None\n"
     "when PartitionLog.append has to decide."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(BatchHeader, AppendInfo, BatchMetadata, now_ms, crc32c): the classes the appends build, the\n"
     "broker's clock and the CRC-32C function; False (and not configured) when the classes cannot be built\n"
     "without their constructors."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_compiled_append", NULL, -1, methods, NULL, NULL, NULL, NULL};

#define INTERN(var, text) do { if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL; } while (0)

PyMODINIT_FUNC PyInit__compiled_append(void) {
    INTERN(s_offline, "_offline");
    INTERN(s_closed, "_closed");
    INTERN(s_lock, "_lock");
    INTERN(s_acquire, "acquire");
    INTERN(s_release, "release");
    INTERN(s_append_limits, "_append_limits");
    INTERN(s_clock, "clock");
    INTERN(s_producer_state, "producer_state");
    INTERN(s_producers, "producers");
    INTERN(s_verification_states, "verification_states");
    INTERN(s_producer_epoch, "producer_epoch");
    INTERN(s_batches, "batches");
    INTERN(s_current_txn_first_offset, "current_txn_first_offset");
    INTERN(s_last_timestamp, "last_timestamp");
    INTERN(s_map_end_offset, "map_end_offset");
    INTERN(s_segments, "_segments");
    INTERN(s_size, "size");
    INTERN(s_rolling_ts, "_rolling_ts");
    INTERN(s_created_ms, "created_ms");
    INTERN(s_roll_jitter_ms, "roll_jitter_ms");
    INTERN(s_offset_index, "offset_index");
    INTERN(s_time_index, "time_index");
    INTERN(s_loaded, "_loaded");
    INTERN(s_entries, "_entries");
    INTERN(s_length, "_length");
    INTERN(s_base_offset, "base_offset");
    INTERN(s_leo, "_leo");
    INTERN(s_max_ts, "_max_ts");
    INTERN(s_file, "file");
    INTERN(s_unsynced, "_unsynced");
    INTERN(s_next_offset, "_next_offset");
    INTERN(s_recent, "_recent");
    INTERN(s_append, "append");
    INTERN(s_bytes_since_index, "_bytes_since_index");
    INTERN(s_settings, "settings");
    INTERN(s_index_interval_bytes, "index_interval_bytes");
    INTERN(s_prefix_max_ts, "_prefix_max_ts");
    INTERN(s_leader_epoch_cache, "leader_epoch_cache");
    INTERN(s_latest_epoch, "latest_epoch");
    INTERN(s_apply_producer_state, "_apply_producer_state");
    INTERN(s_recovery_point, "_recovery_point");
    INTERN(s_flush, "flush");
    INTERN(s_log_start_offset, "_log_start_offset");
    INTERN(s_config, "config");
    INTERN(s_limits_cache, "_limits_cache");
    INTERN(s_epochs, "_epochs");
    INTERN(s_cache, "cache");
    INTERN(s_cache_lock, "lock");
    INTERN(s_refs, "_refs");
    INTERN(s_fd, "_fd");
    INTERN(s_idle, "_idle");
    INTERN(s_pop, "pop");
    INTERN(s_open_count, "open_count");
    INTERN(s_capacity, "capacity");
    INTERN(s_appended, "_appended");
    INTERN(s_mm, "_mm");
    INTERN(s_mm_writable, "_mm_writable");
    INTERN(s_allocated, "_allocated");
    INTERN(s_writer, "_writer");
    INTERN(s_last, "_last");
    INTERN(s_last_unread, "_last_unread");
    return PyModule_Create(&module);
}
