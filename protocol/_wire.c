/*
 * The compiled twin of the generated codec (protocol/schema.py) for the broker's busiest messages in
 * their common shapes: produce requests and their answers (versions 3 to 11) and fetch answers
 * (versions 4 to 17). In Python these cost about as much as the rest of a request's framing.
 *
 * Every function only ever gives the answer the generated code gives, or None. A decode gives None
 * for anything but a well-formed request without tagged fields; an encode gives None for any field
 * outside the common answer (record errors, an error message, a leader hint, a diverging epoch, a
 * snapshot id, node endpoints, a value out of its wire type's range). The caller then runs the
 * generated code, so every refusal keeps its message. tests/protocol/test_compiled_wire.py holds the
 * two codecs to each other.
 *
 * The request's bytes are hostile: every read is checked against the frame's length, and lengths
 * and counts are checked against the bytes left before anything is allocated for them.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The generated classes, set once by protocol.compiled_wire. */
static PyObject *RequestCls, *TopicCls, *PartitionCls;
static PyObject *ObjectNew; /* object.__new__ */

/* Field names, interned once. */
static PyObject *s_transactional_id, *s_acks, *s_timeout_ms, *s_topic_data, *s_name, *s_topic_id,
    *s_partition_data, *s_index, *s_records, *s_responses, *s_partition_responses, *s_error_code,
    *s_base_offset, *s_log_append_time_ms, *s_log_start_offset, *s_record_errors, *s_error_message,
    *s_current_leader, *s_leader_id, *s_leader_epoch, *s_throttle_time_ms, *s_node_endpoints;

#define FLEXIBLE_FROM 9
#define MIN_VERSION 3
#define MAX_VERSION 11

/* ------------------------------------------------------------------------------------------------ */
/* Reading. Each reader returns 0, or -1 where the generated code would not take the plain path. */

typedef struct {
    const uint8_t *buf;
    Py_ssize_t len;
    Py_ssize_t pos;
} Reader;

static int read_i16(Reader *r, int32_t *out) {
    if (r->len - r->pos < 2) return -1;
    const uint8_t *p = r->buf + r->pos;
    *out = (int16_t)((p[0] << 8) | p[1]);
    r->pos += 2;
    return 0;
}

static int read_i32(Reader *r, int64_t *out) {
    if (r->len - r->pos < 4) return -1;
    const uint8_t *p = r->buf + r->pos;
    *out = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
    r->pos += 4;
    return 0;
}

/* An unsigned varint of at most four bytes (below 2^28): longer ones, which only a hostile or odd
 * client sends for a length, are left to the generated code and its Java semantics. */
static int read_uvarint(Reader *r, int64_t *out) {
    int64_t v = 0;
    for (int i = 0; i < 4; i++) {
        if (r->pos >= r->len) return -1;
        uint8_t b = r->buf[r->pos++];
        v |= (int64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* A length (strings, bytes, arrays) in the version's form: -1 for null. */
static int read_length(Reader *r, int flexible, int wide, int64_t *out) {
    if (flexible) {
        int64_t n;
        if (read_uvarint(r, &n) < 0) return -1;
        *out = n - 1;
        return 0;
    }
    if (wide) return read_i32(r, out);
    int32_t n16;
    if (read_i16(r, &n16) < 0) return -1;
    *out = n16;
    return 0;
}

/* The end of a struct in a flexible version: no tagged fields. */
static int read_no_tags(Reader *r, int flexible) {
    if (!flexible) return 0;
    if (r->pos >= r->len || r->buf[r->pos] != 0) return -1;
    r->pos++;
    return 0;
}

/* A string of n bytes at the reader's position; NULL with no exception set where it is not UTF-8. */
static PyObject *read_str(Reader *r, int64_t n) {
    if (n > r->len - r->pos) return NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->buf + r->pos, (Py_ssize_t)n, NULL);
    if (s == NULL) {
        PyErr_Clear();
        return NULL;
    }
    r->pos += n;
    return s;
}

static PyObject *bare(PyObject *cls) {
    return PyObject_CallOneArg(ObjectNew, cls);
}

/* Set an attribute and drop the reference to the value; -1 (exception set) on failure. */
static int put(PyObject *o, PyObject *name, PyObject *v) {
    if (v == NULL) return -1;
    int rc = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return rc;
}

/* The decoded request, or Py_None (a new reference) where the generated code must decide. */
#define GIVE_UP() do { result = Py_None; Py_INCREF(Py_None); goto done; } while (0)
#define FAIL() do { result = NULL; goto done; } while (0)

static PyObject *decode_produce(PyObject *self, PyObject *args) {
    PyObject *frame;
    Py_ssize_t pos;
    int version;
    if (!PyArg_ParseTuple(args, "Oni", &frame, &pos, &version)) return NULL;
    if (RequestCls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._wire is not configured");
        return NULL;
    }
    if (version < MIN_VERSION || version > MAX_VERSION || !PyMemoryView_Check(frame)) Py_RETURN_NONE;
    /* Slices of the view must be byte ranges of the buffer read here: a view of bytes, in one piece. */
    Py_buffer *shape = PyMemoryView_GET_BUFFER(frame);
    if (shape->itemsize != 1 || shape->ndim != 1 || !PyBuffer_IsContiguous(shape, 'C')) Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *req = NULL, *topics = NULL, *topic = NULL, *parts = NULL, *part = NULL;
    Reader r = {view.buf, view.len, pos};
    int flexible = version >= FLEXIBLE_FROM;
    int64_t n, ntopics, nparts;
    int32_t acks;
    int64_t timeout;
    if (pos < 0 || pos > view.len) GIVE_UP();

    req = bare(RequestCls);
    if (req == NULL) FAIL();
    if (read_length(&r, flexible, 0, &n) < 0) GIVE_UP();
    if (n < 0) {
        Py_INCREF(Py_None);
        if (put(req, s_transactional_id, Py_None) < 0) FAIL();
    } else {
        PyObject *s = read_str(&r, n);
        if (s == NULL) {
            if (PyErr_Occurred()) FAIL();
            GIVE_UP();
        }
        if (put(req, s_transactional_id, s) < 0) FAIL();
    }
    if (read_i16(&r, &acks) < 0 || read_i32(&r, &timeout) < 0) GIVE_UP();
    if (put(req, s_acks, PyLong_FromLong(acks)) < 0) FAIL();
    if (put(req, s_timeout_ms, PyLong_FromLongLong(timeout)) < 0) FAIL();
    if (read_length(&r, flexible, 1, &ntopics) < 0 || ntopics < 0 || ntopics > r.len - r.pos) GIVE_UP();
    topics = PyList_New(0);
    if (topics == NULL) FAIL();
    for (int64_t t = 0; t < ntopics; t++) {
        topic = bare(TopicCls);
        if (topic == NULL) FAIL();
        if (read_length(&r, flexible, 0, &n) < 0 || n < 0) GIVE_UP();
        PyObject *name = read_str(&r, n);
        if (name == NULL) {
            if (PyErr_Occurred()) FAIL();
            GIVE_UP();
        }
        if (put(topic, s_name, name) < 0) FAIL();
        if (read_length(&r, flexible, 1, &nparts) < 0 || nparts < 0 || nparts > r.len - r.pos) GIVE_UP();
        parts = PyList_New(0);
        if (parts == NULL) FAIL();
        for (int64_t i = 0; i < nparts; i++) {
            int64_t index;
            part = bare(PartitionCls);
            if (part == NULL) FAIL();
            if (read_i32(&r, &index) < 0) GIVE_UP();
            if (put(part, s_index, PyLong_FromLongLong(index)) < 0) FAIL();
            if (read_length(&r, flexible, 1, &n) < 0) GIVE_UP();
            if (n < 0) {
                Py_INCREF(Py_None);
                if (put(part, s_records, Py_None) < 0) FAIL();
            } else {
                if (n > r.len - r.pos) GIVE_UP();
                /* A view of the frame, as the generated code's buf[pos:end]: no copy. */
                if (put(part, s_records, PySequence_GetSlice(frame, r.pos, r.pos + n)) < 0) FAIL();
                r.pos += n;
            }
            if (read_no_tags(&r, flexible) < 0) GIVE_UP();
            if (PyList_Append(parts, part) < 0) FAIL();
            Py_CLEAR(part);
        }
        if (PyObject_SetAttr(topic, s_partition_data, parts) < 0) FAIL();
        Py_CLEAR(parts);
        if (read_no_tags(&r, flexible) < 0) GIVE_UP();
        if (PyList_Append(topics, topic) < 0) FAIL();
        Py_CLEAR(topic);
    }
    if (PyObject_SetAttr(req, s_topic_data, topics) < 0) FAIL();
    if (read_no_tags(&r, flexible) < 0) GIVE_UP();
    result = Py_BuildValue("(On)", req, r.pos);
done:
    Py_XDECREF(part);
    Py_XDECREF(parts);
    Py_XDECREF(topic);
    Py_XDECREF(topics);
    Py_XDECREF(req);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------------------------------------ */
/* Writing. */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Writer;

static int grow(Writer *w, Py_ssize_t more) {
    if (w->len + more <= w->cap) return 0;
    Py_ssize_t cap = w->cap * 2;
    if (cap < w->len + more) cap = w->len + more + 64;
    char *b = PyMem_Realloc(w->buf, cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->buf = b;
    w->cap = cap;
    return 0;
}

static int put_be(Writer *w, uint64_t v, int size) {
    if (grow(w, size) < 0) return -1;
    for (int i = size - 1; i >= 0; i--) {
        w->buf[w->len + i] = (char)(v & 0xff);
        v >>= 8;
    }
    w->len += size;
    return 0;
}

static int put_uvarint(Writer *w, uint64_t v) {
    if (grow(w, 10) < 0) return -1;
    while (v >= 0x80) {
        w->buf[w->len++] = (char)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    w->buf[w->len++] = (char)v;
    return 0;
}

static int put_length(Writer *w, int flexible, int wide, Py_ssize_t n) {
    if (flexible) return put_uvarint(w, (uint64_t)n + 1);
    return put_be(w, (uint64_t)n, wide ? 4 : 2);
}

/* Outcomes of reading a field of the answer. */
#define OK 0
#define ERROR -1    /* an exception is set */
#define UNCOMMON -2 /* the generated code decides */

/* An int attribute within [lo, hi]; UNCOMMON for anything else. */
static int get_int(PyObject *o, PyObject *name, int64_t lo, int64_t hi, int64_t *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return ERROR;
    if (!PyLong_Check(v)) {
        Py_DECREF(v);
        return UNCOMMON;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return ERROR;
    if (overflow || x < lo || x > hi) return UNCOMMON;
    *out = x;
    return OK;
}

#define CHECK(call) do { int _rc = (call); if (_rc != OK) { status = _rc; goto done; } } while (0)
#define WRITE(call) do { if ((call) < 0) { status = ERROR; goto done; } } while (0)

/* Whether attribute ``name`` is None, or an empty list: OK, else UNCOMMON. */
static int expect_empty(PyObject *o, PyObject *name, int none_ok, int list_ok) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return ERROR;
    int plain = (none_ok && v == Py_None) || (list_ok && PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0);
    Py_DECREF(v);
    return plain ? OK : UNCOMMON;
}

/* A non-nullable string attribute of ``o``, in the version's form. */
static int write_name(Writer *w, PyObject *o, PyObject *attr, int flexible) {
    PyObject *name = PyObject_GetAttr(o, attr);
    if (name == NULL) return ERROR;
    int status = OK;
    Py_ssize_t nlen;
    const char *utf8 = PyUnicode_CheckExact(name) ? PyUnicode_AsUTF8AndSize(name, &nlen) : NULL;
    if (utf8 == NULL) {
        PyErr_Clear(); /* not text, or lone surrogates: the generated code raises its own error */
        status = UNCOMMON;
    } else if (!flexible && nlen > INT16_MAX) {
        status = UNCOMMON;
    } else if (put_length(w, flexible, 0, nlen) < 0 || grow(w, nlen) < 0) {
        status = ERROR;
    } else {
        memcpy(w->buf + w->len, utf8, nlen);
        w->len += nlen;
    }
    Py_DECREF(name);
    return status;
}

static int write_partition(Writer *w, PyObject *p, int version, int flexible) {
    int status = OK;
    int64_t index, error_code, base_offset, append_time, start_offset;
    CHECK(get_int(p, s_index, INT32_MIN, INT32_MAX, &index));
    CHECK(get_int(p, s_error_code, INT16_MIN, INT16_MAX, &error_code));
    CHECK(get_int(p, s_base_offset, INT64_MIN, INT64_MAX, &base_offset));
    CHECK(get_int(p, s_log_append_time_ms, INT64_MIN, INT64_MAX, &append_time));
    if (version >= 5) CHECK(get_int(p, s_log_start_offset, INT64_MIN, INT64_MAX, &start_offset));
    if (version >= 8) {
        CHECK(expect_empty(p, s_record_errors, 0, 1));
        CHECK(expect_empty(p, s_error_message, 1, 0));
    }
    if (version >= 10) {
        /* The tagged CurrentLeader is written only when it differs from its default (-1, -1). */
        PyObject *leader = PyObject_GetAttr(p, s_current_leader);
        if (leader == NULL) return ERROR;
        int64_t id, epoch;
        int rc = get_int(leader, s_leader_id, -1, -1, &id);
        if (rc == OK) rc = get_int(leader, s_leader_epoch, -1, -1, &epoch);
        Py_DECREF(leader);
        CHECK(rc);
    }
    WRITE(put_be(w, (uint64_t)index, 4));
    WRITE(put_be(w, (uint64_t)error_code, 2));
    WRITE(put_be(w, (uint64_t)base_offset, 8));
    WRITE(put_be(w, (uint64_t)append_time, 8));
    if (version >= 5) WRITE(put_be(w, (uint64_t)start_offset, 8));
    if (version >= 8) {
        WRITE(put_length(w, flexible, 1, 0)); /* no record errors */
        WRITE(put_length(w, flexible, 0, -1)); /* no error message */
    }
    if (flexible) WRITE(put_uvarint(w, 0));
done:
    return status;
}

static int write_topic(Writer *w, PyObject *t, int version, int flexible) {
    int status = OK;
    PyObject *parts = NULL;
    CHECK(write_name(w, t, s_name, flexible));
    parts = PyObject_GetAttr(t, s_partition_responses);
    if (parts == NULL) {
        status = ERROR;
        goto done;
    }
    if (!PyList_CheckExact(parts)) {
        status = UNCOMMON;
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(parts);
    WRITE(put_length(w, flexible, 1, n));
    for (Py_ssize_t i = 0; i < n && status == OK; i++) {
        PyObject *p = PyList_GET_ITEM(parts, i);
        Py_INCREF(p);
        status = write_partition(w, p, version, flexible);
        Py_DECREF(p);
        if (n != PyList_GET_SIZE(parts) && status == OK) status = UNCOMMON; /* changed underneath */
    }
    if (status == OK && flexible) WRITE(put_uvarint(w, 0));
done:
    Py_XDECREF(parts);
    return status;
}

/* The whole response frame (size prefix and header included) as bytes, or None. */
static PyObject *encode_produce_response(PyObject *self, PyObject *args) {
    int version;
    long correlation_id;
    PyObject *body;
    if (!PyArg_ParseTuple(args, "ilO", &version, &correlation_id, &body)) return NULL;
    if (s_responses == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._wire is not configured");
        return NULL;
    }
    if (version < MIN_VERSION || version > MAX_VERSION) Py_RETURN_NONE;
    int flexible = version >= FLEXIBLE_FROM;
    int status = OK;
    PyObject *topics = NULL, *result = NULL;
    int64_t throttle;
    Writer w = {PyMem_Malloc(256), 0, 256};
    if (w.buf == NULL) return PyErr_NoMemory();
    WRITE(put_be(&w, 0, 4)); /* size, below */
    WRITE(put_be(&w, (uint64_t)(int64_t)correlation_id, 4));
    if (flexible) WRITE(put_uvarint(&w, 0)); /* response header v1: no tagged fields */
    CHECK(get_int(body, s_throttle_time_ms, INT32_MIN, INT32_MAX, &throttle));
    if (version >= 10) CHECK(expect_empty(body, s_node_endpoints, 0, 1));
    topics = PyObject_GetAttr(body, s_responses);
    if (topics == NULL) {
        status = ERROR;
        goto done;
    }
    if (!PyList_CheckExact(topics)) {
        status = UNCOMMON;
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(topics);
    WRITE(put_length(&w, flexible, 1, n));
    for (Py_ssize_t i = 0; i < n && status == OK; i++) {
        PyObject *t = PyList_GET_ITEM(topics, i);
        Py_INCREF(t);
        status = write_topic(&w, t, version, flexible);
        Py_DECREF(t);
        if (n != PyList_GET_SIZE(topics) && status == OK) status = UNCOMMON;
    }
    if (status != OK) goto done;
    WRITE(put_be(&w, (uint64_t)throttle, 4));
    if (flexible) WRITE(put_uvarint(&w, 0));
    if (w.len - 4 > INT32_MAX) {
        status = UNCOMMON;
        goto done;
    }
    {
        uint64_t size = (uint64_t)(w.len - 4);
        for (int i = 3; i >= 0; i--) {
            w.buf[i] = (char)(size & 0xff);
            size >>= 8;
        }
    }
    result = PyBytes_FromStringAndSize(w.buf, w.len);
    if (result == NULL) status = ERROR;
done:
    Py_XDECREF(topics);
    PyMem_Free(w.buf);
    if (status == ERROR) {
        Py_XDECREF(result);
        return NULL;
    }
    if (status == UNCOMMON) Py_RETURN_NONE;
    return result;
}

/* ------------------------------------------------------------------------------------------------ */
/* Fetch answers, versions 4 to 17: the same bytes and the same parts as the generated encoder, whose
 * Output splices record sets (file regions, big in-memory ones) into the frame instead of copying them. */

#define FETCH_MIN_VERSION 4
#define FETCH_MAX_VERSION 17
#define FETCH_FLEXIBLE_FROM 12
#define SPLICE_MIN 4096 /* protocol.schema.SPLICE_MIN */

static PyObject *FileRegionsCls; /* protocol.schema.FileRegions */

static PyObject *s_session_id, *s_topic, *s_partitions, *s_partition_index, *s_high_watermark,
    *s_last_stable_offset, *s_aborted_transactions, *s_preferred_read_replica, *s_diverging_epoch,
    *s_snapshot_id, *s_epoch, *s_end_offset, *s_producer_id, *s_first_offset, *s_size, *s_bytes;

typedef struct {
    Writer w;
    PyObject *splices; /* list of (offset in w, chunks) */
    int64_t spliced;   /* their bytes, which the size prefix counts */
} Frame;

/* A tagged struct of two int fields: OK when it is None or holds its defaults (-1, -1), which the
 * generated encoder leaves out; UNCOMMON otherwise. */
static int expect_default_pair(PyObject *o, PyObject *name, PyObject *a, PyObject *b) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return ERROR;
    if (v == Py_None) {
        Py_DECREF(v);
        return OK;
    }
    int64_t x, y;
    int rc = get_int(v, a, -1, -1, &x);
    if (rc == OK) rc = get_int(v, b, -1, -1, &y);
    Py_DECREF(v);
    return rc;
}

static int splice(Frame *f, PyObject *chunks, Py_ssize_t size) {
    f->spliced += size;
    PyObject *entry = Py_BuildValue("(nO)", f->w.len, chunks);
    if (entry == NULL) return -1;
    int rc = PyList_Append(f->splices, entry);
    Py_DECREF(entry);
    return rc;
}

static int write_records(Frame *f, PyObject *records, int flexible) {
    Writer *w = &f->w;
    if (records == Py_None) {
        if (flexible) return put_uvarint(w, 0) < 0 ? ERROR : OK;
        return put_be(w, 0xffffffffu, 4) < 0 ? ERROR : OK;
    }
    if (Py_IS_TYPE(records, (PyTypeObject *)FileRegionsCls)) {
        PyObject *size = PyObject_GetAttr(records, s_size);
        if (size == NULL) return ERROR;
        Py_ssize_t n = PyLong_AsSsize_t(size);
        Py_DECREF(size);
        if (n == -1 && PyErr_Occurred()) return ERROR;
        if (n < 0 || (!flexible && n > INT32_MAX)) return UNCOMMON;
        if ((flexible ? put_uvarint(w, (uint64_t)n + 1) : put_be(w, (uint64_t)n, 4)) < 0) return ERROR;
        return splice(f, records, n) < 0 ? ERROR : OK;
    }
    if (!(PyBytes_CheckExact(records) || PyByteArray_CheckExact(records) || PyMemoryView_Check(records)))
        return UNCOMMON;
    Py_buffer view;
    if (PyObject_GetBuffer(records, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear(); /* a view the generated encoder must judge (not contiguous bytes) */
        return UNCOMMON;
    }
    int status = OK;
    Py_ssize_t n = view.len;
    if (!flexible && n > INT32_MAX) {
        status = UNCOMMON;
    } else if ((flexible ? put_uvarint(w, (uint64_t)n + 1) : put_be(w, (uint64_t)n, 4)) < 0) {
        status = ERROR;
    } else if (n >= SPLICE_MIN) {
        PyObject *chunks = PyTuple_Pack(1, records);
        if (chunks == NULL || splice(f, chunks, n) < 0) status = ERROR;
        Py_XDECREF(chunks);
    } else if (grow(w, n) < 0) {
        status = ERROR;
    } else {
        memcpy(w->buf + w->len, view.buf, n);
        w->len += n;
    }
    PyBuffer_Release(&view);
    return status;
}

static int write_aborted(Writer *w, PyObject *p, int flexible) {
    PyObject *txns = PyObject_GetAttr(p, s_aborted_transactions);
    if (txns == NULL) return ERROR;
    int status = OK;
    if (txns == Py_None) {
        WRITE(put_length(w, flexible, 1, -1));
        goto done;
    }
    if (!PyList_CheckExact(txns)) {
        status = UNCOMMON;
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(txns);
    WRITE(put_length(w, flexible, 1, n));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(txns, i);
        int64_t producer_id, first_offset;
        Py_INCREF(t);
        int rc = get_int(t, s_producer_id, INT64_MIN, INT64_MAX, &producer_id);
        if (rc == OK) rc = get_int(t, s_first_offset, INT64_MIN, INT64_MAX, &first_offset);
        Py_DECREF(t);
        CHECK(rc);
        if (n != PyList_GET_SIZE(txns)) {
            status = UNCOMMON;
            goto done;
        }
        WRITE(put_be(w, (uint64_t)producer_id, 8));
        WRITE(put_be(w, (uint64_t)first_offset, 8));
        if (flexible) WRITE(put_uvarint(w, 0));
    }
done:
    Py_DECREF(txns);
    return status;
}

static int write_fetch_partition(Frame *f, PyObject *p, int version, int flexible) {
    Writer *w = &f->w;
    int status = OK;
    PyObject *records = NULL;
    int64_t index, error_code, hw, lso = 0, log_start = 0, preferred = 0;
    CHECK(get_int(p, s_partition_index, INT32_MIN, INT32_MAX, &index));
    CHECK(get_int(p, s_error_code, INT16_MIN, INT16_MAX, &error_code));
    CHECK(get_int(p, s_high_watermark, INT64_MIN, INT64_MAX, &hw));
    CHECK(get_int(p, s_last_stable_offset, INT64_MIN, INT64_MAX, &lso));
    if (version >= 5) CHECK(get_int(p, s_log_start_offset, INT64_MIN, INT64_MAX, &log_start));
    if (version >= 11) CHECK(get_int(p, s_preferred_read_replica, INT32_MIN, INT32_MAX, &preferred));
    if (flexible) {
        CHECK(expect_default_pair(p, s_diverging_epoch, s_epoch, s_end_offset));
        CHECK(expect_default_pair(p, s_current_leader, s_leader_id, s_leader_epoch));
        CHECK(expect_default_pair(p, s_snapshot_id, s_end_offset, s_epoch));
    }
    WRITE(put_be(w, (uint64_t)index, 4));
    WRITE(put_be(w, (uint64_t)error_code, 2));
    WRITE(put_be(w, (uint64_t)hw, 8));
    WRITE(put_be(w, (uint64_t)lso, 8));
    if (version >= 5) WRITE(put_be(w, (uint64_t)log_start, 8));
    CHECK(write_aborted(w, p, flexible));
    if (version >= 11) WRITE(put_be(w, (uint64_t)preferred, 4));
    records = PyObject_GetAttr(p, s_records);
    if (records == NULL) {
        status = ERROR;
        goto done;
    }
    CHECK(write_records(f, records, flexible));
    if (flexible) WRITE(put_uvarint(w, 0));
done:
    Py_XDECREF(records);
    return status;
}

static int write_fetch_topic(Frame *f, PyObject *t, int version, int flexible) {
    Writer *w = &f->w;
    int status = OK;
    PyObject *name = NULL, *parts = NULL;
    if (version <= 12) {
        CHECK(write_name(w, t, s_topic, flexible));
    } else {
        name = PyObject_GetAttr(t, s_topic_id);
        if (name == NULL) return ERROR;
        WRITE(grow(w, 16));
        if (name == Py_None) {
            memset(w->buf + w->len, 0, 16); /* the generated encoder's ZERO_UUID */
        } else {
            PyObject *raw = PyObject_GetAttr(name, s_bytes);
            if (raw == NULL) {
                PyErr_Clear();
                status = UNCOMMON;
                goto done;
            }
            if (!PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 16) {
                Py_DECREF(raw);
                status = UNCOMMON;
                goto done;
            }
            memcpy(w->buf + w->len, PyBytes_AS_STRING(raw), 16);
            Py_DECREF(raw);
        }
        w->len += 16;
    }
    parts = PyObject_GetAttr(t, s_partitions);
    if (parts == NULL) {
        status = ERROR;
        goto done;
    }
    if (!PyList_CheckExact(parts)) {
        status = UNCOMMON;
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(parts);
    WRITE(put_length(w, flexible, 1, n));
    for (Py_ssize_t i = 0; i < n && status == OK; i++) {
        PyObject *p = PyList_GET_ITEM(parts, i);
        Py_INCREF(p);
        status = write_fetch_partition(f, p, version, flexible);
        Py_DECREF(p);
        if (n != PyList_GET_SIZE(parts) && status == OK) status = UNCOMMON;
    }
    if (status == OK && flexible) WRITE(put_uvarint(w, 0));
done:
    Py_XDECREF(name);
    Py_XDECREF(parts);
    return status;
}

/* The parts of the frame in wire order: bytes, with the spliced chunks between them. */
static PyObject *fetch_parts(Frame *f) {
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t last = 0, n = PyList_GET_SIZE(f->splices);
    for (Py_ssize_t i = 0; i <= n; i++) {
        Py_ssize_t at = f->w.len;
        PyObject *chunks = NULL;
        if (i < n) {
            PyObject *entry = PyList_GET_ITEM(f->splices, i);
            at = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0));
            chunks = PyTuple_GET_ITEM(entry, 1);
        }
        if (at > last) {
            PyObject *b = PyBytes_FromStringAndSize(f->w.buf + last, at - last);
            if (b == NULL || PyList_Append(out, b) < 0) {
                Py_XDECREF(b);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(b);
        }
        if (chunks != NULL) {
            PyObject *items = PySequence_Fast(chunks, "spliced chunks");
            if (items == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(items); j++) {
                if (PyList_Append(out, PySequence_Fast_GET_ITEM(items, j)) < 0) {
                    Py_DECREF(items);
                    Py_DECREF(out);
                    return NULL;
                }
            }
            Py_DECREF(items);
        }
        last = at;
    }
    return out;
}

/* The whole answer (size prefix and header included) as a list of parts, or None. */
static PyObject *encode_fetch_response(PyObject *self, PyObject *args) {
    int version;
    long correlation_id;
    PyObject *body;
    if (!PyArg_ParseTuple(args, "ilO", &version, &correlation_id, &body)) return NULL;
    if (FileRegionsCls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._wire is not configured");
        return NULL;
    }
    if (version < FETCH_MIN_VERSION || version > FETCH_MAX_VERSION) Py_RETURN_NONE;
    int flexible = version >= FETCH_FLEXIBLE_FROM;
    int status = OK;
    PyObject *topics = NULL, *result = NULL;
    int64_t throttle, error_code = 0, session_id = 0;
    Frame f = {{PyMem_Malloc(256), 0, 256}, PyList_New(0), 0};
    Writer *w = &f.w;
    if (w->buf == NULL || f.splices == NULL) {
        PyMem_Free(w->buf);
        Py_XDECREF(f.splices);
        return PyErr_NoMemory();
    }
    WRITE(put_be(w, 0, 4)); /* size, below */
    WRITE(put_be(w, (uint64_t)(int64_t)correlation_id, 4));
    if (flexible) WRITE(put_uvarint(w, 0));
    CHECK(get_int(body, s_throttle_time_ms, INT32_MIN, INT32_MAX, &throttle));
    if (version >= 7) {
        CHECK(get_int(body, s_error_code, INT16_MIN, INT16_MAX, &error_code));
        CHECK(get_int(body, s_session_id, INT32_MIN, INT32_MAX, &session_id));
    }
    if (version >= 16) CHECK(expect_empty(body, s_node_endpoints, 1, 1));
    WRITE(put_be(w, (uint64_t)throttle, 4));
    if (version >= 7) {
        WRITE(put_be(w, (uint64_t)error_code, 2));
        WRITE(put_be(w, (uint64_t)session_id, 4));
    }
    topics = PyObject_GetAttr(body, s_responses);
    if (topics == NULL) {
        status = ERROR;
        goto done;
    }
    if (!PyList_CheckExact(topics)) {
        status = UNCOMMON;
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(topics);
    WRITE(put_length(w, flexible, 1, n));
    for (Py_ssize_t i = 0; i < n && status == OK; i++) {
        PyObject *t = PyList_GET_ITEM(topics, i);
        Py_INCREF(t);
        status = write_fetch_topic(&f, t, version, flexible);
        Py_DECREF(t);
        if (n != PyList_GET_SIZE(topics) && status == OK) status = UNCOMMON;
    }
    if (status != OK) goto done;
    if (flexible) WRITE(put_uvarint(w, 0));
    if (w->len - 4 + f.spliced > INT32_MAX) {
        status = UNCOMMON;
        goto done;
    }
    {
        uint64_t size = (uint64_t)(w->len - 4 + f.spliced);
        for (int i = 3; i >= 0; i--) {
            w->buf[i] = (char)(size & 0xff);
            size >>= 8;
        }
    }
    result = fetch_parts(&f);
    if (result == NULL) status = ERROR;
done:
    Py_XDECREF(topics);
    Py_XDECREF(f.splices);
    PyMem_Free(w->buf);
    if (status == ERROR) {
        Py_XDECREF(result);
        return NULL;
    }
    if (status == UNCOMMON) Py_RETURN_NONE;
    return result;
}

/* ------------------------------------------------------------------------------------------------ */
/* Fetch requests, versions 4 to 17. The fields a version does not carry on the wire (and its tagged
 * fields, since a request with any tag set is left to the generated decoder) get the generated
 * decoder's defaults, given per version and struct by protocol.compiled_wire as (name, kind, value):
 * kind 0 shares an immutable value, 1 calls value() for a fresh struct, 2 makes a fresh empty list. */

#define FETCH_REQ_MIN_VERSION 4
#define FETCH_REQ_MAX_VERSION 17

static PyObject *FetchRequestCls, *FetchTopicCls, *FetchPartitionCls, *ForgottenTopicCls;
static PyObject *UuidCls, *ZeroUuid;
static PyObject *FetchDefaults[FETCH_REQ_MAX_VERSION + 1]; /* per version: 4 tuples of (name, kind, value) */

static PyObject *s_replica_id, *s_max_wait_ms, *s_min_bytes, *s_max_bytes, *s_isolation_level,
    *s_session_epoch, *s_topics, *s_forgotten_topics_data, *s_rack_id, *s_partition,
    *s_current_leader_epoch, *s_fetch_offset, *s_last_fetched_epoch, *s_partition_max_bytes;

static int read_i8(Reader *r, int32_t *out) {
    if (r->len - r->pos < 1) return -1;
    *out = (int8_t)r->buf[r->pos++];
    return 0;
}

static int read_i64(Reader *r, int64_t *out) {
    if (r->len - r->pos < 8) return -1;
    const uint8_t *p = r->buf + r->pos;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    *out = (int64_t)v;
    r->pos += 8;
    return 0;
}

/* A uuid as the generated decoder makes it: the shared zero uuid, or UUID(bytes=...). */
static PyObject *read_uuid(Reader *r) {
    if (r->len - r->pos < 16) return NULL;
    const uint8_t *p = r->buf + r->pos;
    r->pos += 16;
    int zero = 1;
    for (int i = 0; i < 16; i++) zero &= p[i] == 0;
    if (zero) {
        Py_INCREF(ZeroUuid);
        return ZeroUuid;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, 16);
    if (raw == NULL) return NULL;
    PyObject *args = PyTuple_New(0), *kwargs = Py_BuildValue("{sO}", "bytes", raw);
    PyObject *u = (args && kwargs) ? PyObject_Call(UuidCls, args, kwargs) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    Py_DECREF(raw);
    return u;
}

/* The defaults of the fields ``o`` does not have on the wire in this version. */
static int put_defaults(PyObject *o, PyObject *specs) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(specs); i++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        PyObject *name = PyTuple_GET_ITEM(spec, 0), *value = PyTuple_GET_ITEM(spec, 2);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
        PyObject *v;
        if (kind == 0) {
            v = value;
            Py_INCREF(v);
        } else if (kind == 1) {
            v = PyObject_CallNoArgs(value);
        } else {
            v = PyList_New(0);
        }
        if (put(o, name, v) < 0) return -1;
    }
    return 0;
}

/* An int field: -1 where the bytes run out. */
#define READ_INTO(o, name, reader, type)                                       \
    do {                                                                       \
        type _v;                                                               \
        if (reader(&r, &_v) < 0) GIVE_UP();                                    \
        if (put((o), (name), PyLong_FromLongLong((long long)_v)) < 0) FAIL(); \
    } while (0)

/* A topic's name (versions 12 and below) or id (13 and up). */
#define READ_TOPIC(o)                                                          \
    do {                                                                       \
        if (version <= 12) {                                                   \
            if (read_length(&r, flexible, 0, &n) < 0 || n < 0) GIVE_UP();      \
            PyObject *_name = read_str(&r, n);                                 \
            if (_name == NULL) {                                               \
                if (PyErr_Occurred()) FAIL();                                  \
                GIVE_UP();                                                     \
            }                                                                  \
            if (put((o), s_topic, _name) < 0) FAIL();                          \
        } else {                                                               \
            if (r.len - r.pos < 16) GIVE_UP();                                 \
            if (put((o), s_topic_id, read_uuid(&r)) < 0) FAIL();               \
        }                                                                      \
    } while (0)

static PyObject *decode_fetch(PyObject *self, PyObject *args) {
    PyObject *frame;
    Py_ssize_t pos;
    int version;
    if (!PyArg_ParseTuple(args, "Oni", &frame, &pos, &version)) return NULL;
    if (version < FETCH_REQ_MIN_VERSION || version > FETCH_REQ_MAX_VERSION || FetchDefaults[version] == NULL ||
        !PyMemoryView_Check(frame))
        Py_RETURN_NONE;
    Py_buffer *shape = PyMemoryView_GET_BUFFER(frame);
    if (shape->itemsize != 1 || shape->ndim != 1 || !PyBuffer_IsContiguous(shape, 'C')) Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *req = NULL, *topics = NULL, *topic = NULL, *parts = NULL, *part = NULL;
    PyObject *defaults = FetchDefaults[version];
    Reader r = {view.buf, view.len, pos};
    int flexible = version >= FETCH_FLEXIBLE_FROM;
    int64_t n, ntopics, nparts;
    if (pos < 0 || pos > view.len) GIVE_UP();

    req = bare(FetchRequestCls);
    if (req == NULL) FAIL();
    if (version <= 14) READ_INTO(req, s_replica_id, read_i32, int64_t);
    READ_INTO(req, s_max_wait_ms, read_i32, int64_t);
    READ_INTO(req, s_min_bytes, read_i32, int64_t);
    READ_INTO(req, s_max_bytes, read_i32, int64_t);
    READ_INTO(req, s_isolation_level, read_i8, int32_t);
    if (version >= 7) {
        READ_INTO(req, s_session_id, read_i32, int64_t);
        READ_INTO(req, s_session_epoch, read_i32, int64_t);
    }
    if (read_length(&r, flexible, 1, &ntopics) < 0 || ntopics < 0 || ntopics > r.len - r.pos) GIVE_UP();
    topics = PyList_New(0);
    if (topics == NULL) FAIL();
    for (int64_t t = 0; t < ntopics; t++) {
        topic = bare(FetchTopicCls);
        if (topic == NULL) FAIL();
        READ_TOPIC(topic);
        if (read_length(&r, flexible, 1, &nparts) < 0 || nparts < 0 || nparts > r.len - r.pos) GIVE_UP();
        parts = PyList_New(0);
        if (parts == NULL) FAIL();
        for (int64_t i = 0; i < nparts; i++) {
            part = bare(FetchPartitionCls);
            if (part == NULL) FAIL();
            READ_INTO(part, s_partition, read_i32, int64_t);
            if (version >= 9) READ_INTO(part, s_current_leader_epoch, read_i32, int64_t);
            READ_INTO(part, s_fetch_offset, read_i64, int64_t);
            if (version >= 12) READ_INTO(part, s_last_fetched_epoch, read_i32, int64_t);
            if (version >= 5) READ_INTO(part, s_log_start_offset, read_i64, int64_t);
            READ_INTO(part, s_partition_max_bytes, read_i32, int64_t);
            if (put_defaults(part, PyTuple_GET_ITEM(defaults, 2)) < 0) FAIL();
            if (read_no_tags(&r, flexible) < 0) GIVE_UP();
            if (PyList_Append(parts, part) < 0) FAIL();
            Py_CLEAR(part);
        }
        if (PyObject_SetAttr(topic, s_partitions, parts) < 0) FAIL();
        Py_CLEAR(parts);
        if (put_defaults(topic, PyTuple_GET_ITEM(defaults, 1)) < 0) FAIL();
        if (read_no_tags(&r, flexible) < 0) GIVE_UP();
        if (PyList_Append(topics, topic) < 0) FAIL();
        Py_CLEAR(topic);
    }
    if (PyObject_SetAttr(req, s_topics, topics) < 0) FAIL();
    Py_CLEAR(topics);
    if (version >= 7) {
        if (read_length(&r, flexible, 1, &ntopics) < 0 || ntopics < 0 || ntopics > r.len - r.pos) GIVE_UP();
        topics = PyList_New(0);
        if (topics == NULL) FAIL();
        for (int64_t t = 0; t < ntopics; t++) {
            topic = bare(ForgottenTopicCls);
            if (topic == NULL) FAIL();
            READ_TOPIC(topic);
            if (read_length(&r, flexible, 1, &nparts) < 0 || nparts < 0 || nparts > (r.len - r.pos) / 4) GIVE_UP();
            parts = PyList_New(0);
            if (parts == NULL) FAIL();
            for (int64_t i = 0; i < nparts; i++) {
                int64_t index;
                if (read_i32(&r, &index) < 0) GIVE_UP();
                PyObject *v = PyLong_FromLongLong(index);
                if (v == NULL || PyList_Append(parts, v) < 0) {
                    Py_XDECREF(v);
                    FAIL();
                }
                Py_DECREF(v);
            }
            if (PyObject_SetAttr(topic, s_partitions, parts) < 0) FAIL();
            Py_CLEAR(parts);
            if (put_defaults(topic, PyTuple_GET_ITEM(defaults, 3)) < 0) FAIL();
            if (read_no_tags(&r, flexible) < 0) GIVE_UP();
            if (PyList_Append(topics, topic) < 0) FAIL();
            Py_CLEAR(topic);
        }
        if (PyObject_SetAttr(req, s_forgotten_topics_data, topics) < 0) FAIL();
        Py_CLEAR(topics);
    }
    if (version >= 11) {
        if (read_length(&r, flexible, 0, &n) < 0 || n < 0) GIVE_UP();
        PyObject *rack = read_str(&r, n);
        if (rack == NULL) {
            if (PyErr_Occurred()) FAIL();
            GIVE_UP();
        }
        if (put(req, s_rack_id, rack) < 0) FAIL();
    }
    if (put_defaults(req, PyTuple_GET_ITEM(defaults, 0)) < 0) FAIL();
    if (read_no_tags(&r, flexible) < 0) GIVE_UP();
    result = Py_BuildValue("(On)", req, r.pos);
done:
    Py_XDECREF(part);
    Py_XDECREF(parts);
    Py_XDECREF(topic);
    Py_XDECREF(topics);
    Py_XDECREF(req);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *configure_fetch(PyObject *self, PyObject *args) {
    PyObject *classes, *uuid_cls, *zero, *table;
    if (!PyArg_ParseTuple(args, "O!OOO!", &PyTuple_Type, &classes, &uuid_cls, &zero, &PyDict_Type, &table))
        return NULL;
    if (PyTuple_GET_SIZE(classes) != 4) {
        PyErr_SetString(PyExc_ValueError, "four classes: request, topic, partition, forgotten topic");
        return NULL;
    }
    for (int v = FETCH_REQ_MIN_VERSION; v <= FETCH_REQ_MAX_VERSION; v++) {
        PyObject *key = PyLong_FromLong(v);
        if (key == NULL) return NULL;
        PyObject *specs = PyDict_GetItemWithError(table, key); /* borrowed */
        Py_DECREF(key);
        if (specs == NULL) {
            if (PyErr_Occurred()) return NULL;
            PyErr_Format(PyExc_ValueError, "no defaults for version %d", v);
            return NULL;
        }
        if (!PyTuple_Check(specs) || PyTuple_GET_SIZE(specs) != 4) {
            PyErr_SetString(PyExc_ValueError, "defaults: four tuples per version");
            return NULL;
        }
        for (int i = 0; i < 4; i++) {
            PyObject *list = PyTuple_GET_ITEM(specs, i);
            if (!PyTuple_Check(list)) {
                PyErr_SetString(PyExc_ValueError, "defaults: a tuple of (name, kind, value) per struct");
                return NULL;
            }
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(list); j++) {
                PyObject *spec = PyTuple_GET_ITEM(list, j);
                if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(spec, 0)) ||
                    !PyLong_Check(PyTuple_GET_ITEM(spec, 1))) {
                    PyErr_SetString(PyExc_ValueError, "defaults: (name, kind, value)");
                    return NULL;
                }
            }
        }
        Py_INCREF(specs);
        Py_XSETREF(FetchDefaults[v], specs);
    }
    PyObject **slots[] = {&FetchRequestCls, &FetchTopicCls, &FetchPartitionCls, &ForgottenTopicCls};
    for (int i = 0; i < 4; i++) {
        PyObject *cls = PyTuple_GET_ITEM(classes, i);
        Py_INCREF(cls);
        Py_XSETREF(*slots[i], cls);
    }
    Py_INCREF(uuid_cls);
    Py_XSETREF(UuidCls, uuid_cls);
    Py_INCREF(zero);
    Py_XSETREF(ZeroUuid, zero);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------------ */

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *req, *topic, *part, *regions;
    if (!PyArg_ParseTuple(args, "OOOO", &req, &topic, &part, &regions)) return NULL;
    if (!PyType_Check(regions)) {
        PyErr_SetString(PyExc_TypeError, "FileRegions must be a type");
        return NULL;
    }
    Py_INCREF(regions);
    Py_XSETREF(FileRegionsCls, regions);
    Py_INCREF(req);
    Py_INCREF(topic);
    Py_INCREF(part);
    Py_XSETREF(RequestCls, req);
    Py_XSETREF(TopicCls, topic);
    Py_XSETREF(PartitionCls, part);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(request_cls, topic_cls, partition_cls, file_regions_cls): the generated classes."},
    {"decode_produce", decode_produce, METH_VARARGS,
     "decode_produce(frame, pos, version) -> (ProduceRequest, end) or None (the generated decoder decides)."},
    {"encode_produce_response", encode_produce_response, METH_VARARGS,
     "encode_produce_response(version, correlation_id, body) -> the whole frame as bytes, or None."},
    {"configure_fetch", configure_fetch, METH_VARARGS,
     "configure_fetch((request, topic, partition, forgotten_topic), UUID, ZERO_UUID, {version: defaults})."},
    {"decode_fetch", decode_fetch, METH_VARARGS,
     "decode_fetch(frame, pos, version) -> (FetchRequest, end) or None (the generated decoder decides)."},
    {"encode_fetch_response", encode_fetch_response, METH_VARARGS,
     "encode_fetch_response(version, correlation_id, body) -> the frame's parts in wire order, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wire(void) {
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&s_transactional_id, "transactional_id"}, {&s_acks, "acks"}, {&s_timeout_ms, "timeout_ms"},
        {&s_topic_data, "topic_data"}, {&s_name, "name"},
        {&s_partition_data, "partition_data"}, {&s_index, "index"}, {&s_records, "records"},
        {&s_responses, "responses"}, {&s_partition_responses, "partition_responses"},
        {&s_error_code, "error_code"}, {&s_base_offset, "base_offset"},
        {&s_log_append_time_ms, "log_append_time_ms"}, {&s_log_start_offset, "log_start_offset"},
        {&s_record_errors, "record_errors"}, {&s_error_message, "error_message"},
        {&s_current_leader, "current_leader"}, {&s_leader_id, "leader_id"},
        {&s_leader_epoch, "leader_epoch"}, {&s_throttle_time_ms, "throttle_time_ms"},
        {&s_node_endpoints, "node_endpoints"}, {&s_session_id, "session_id"}, {&s_topic, "topic"},
        {&s_partitions, "partitions"}, {&s_partition_index, "partition_index"},
        {&s_high_watermark, "high_watermark"}, {&s_last_stable_offset, "last_stable_offset"},
        {&s_aborted_transactions, "aborted_transactions"},
        {&s_preferred_read_replica, "preferred_read_replica"}, {&s_diverging_epoch, "diverging_epoch"},
        {&s_snapshot_id, "snapshot_id"}, {&s_epoch, "epoch"}, {&s_end_offset, "end_offset"},
        {&s_producer_id, "producer_id"}, {&s_first_offset, "first_offset"}, {&s_size, "size"},
        {&s_bytes, "bytes"}, {&s_topic_id, "topic_id"}, {&s_replica_id, "replica_id"},
        {&s_max_wait_ms, "max_wait_ms"}, {&s_min_bytes, "min_bytes"}, {&s_max_bytes, "max_bytes"},
        {&s_isolation_level, "isolation_level"}, {&s_session_epoch, "session_epoch"}, {&s_topics, "topics"},
        {&s_forgotten_topics_data, "forgotten_topics_data"}, {&s_rack_id, "rack_id"},
        {&s_partition, "partition"}, {&s_current_leader_epoch, "current_leader_epoch"},
        {&s_fetch_offset, "fetch_offset"}, {&s_last_fetched_epoch, "last_fetched_epoch"},
        {&s_partition_max_bytes, "partition_max_bytes"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) return NULL;
    }
    PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
    PyObject *object = builtins ? PyDict_GetItemString(builtins, "object") : NULL;
    if (object == NULL) {
        PyErr_SetString(PyExc_ImportError, "no builtins.object");
        return NULL;
    }
    ObjectNew = PyObject_GetAttrString(object, "__new__");
    if (ObjectNew == NULL) return NULL;
    return PyModule_Create(&module);
}
