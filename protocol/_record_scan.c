/*
 * The compiled twin of protocol/record_scan.py's scan_records: the per-record loop of produce
 * validation, which in Python is the cost of the whole produce path.
 *
 * Same arguments, same RecordScan, same InvalidRecordError messages at the same records, for every
 * input: the pure-Python scanner is the reference and tests/protocol/test_record_scan.py holds the
 * two to each other. That includes the reference's arithmetic on unbounded integers: a 5-byte varint
 * carries 35 bits and a 10-byte varlong 70 (Kafka would wrap them), so varints are read into 64 bits
 * and varlongs into 128.
 *
 * The bytes are hostile: every read is checked against the buffer's length (reading past it is how
 * the reference notices a field that overruns, an IndexError), positions only ever grow by amounts
 * below 2^36, and nothing is written. The buffer is held through the buffer protocol for the whole
 * scan, so it cannot be resized or freed while the GIL is released around the loop.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef __int128 i128;
typedef unsigned __int128 u128;

/* Set once by protocol.record_scan (module import order keeps this extension free of imports). */
static PyObject *InvalidRecordError = NULL;
static PyObject *RecordScan = NULL;
/* crc32c.crc32c, for check_plain_batch (the package's hardware CRC, not a second one here). */
static PyObject *Crc32c = NULL;

/* Below this many bytes the scan keeps the GIL: handing it over and back costs more than it frees. */
#define RELEASE_GIL_MIN_BYTES (64 * 1024)

enum scan_error {
    SCAN_OK = 0,
    ERR_STRUCTURE,      /* the reference's IndexError: a read past the buffer */
    ERR_PREMATURE_EOF,
    ERR_VARINT_TOO_LONG, /* a = the varint's maximum length */
    ERR_RECORD_TOO_BIG, /* a = the record's declared size */
    ERR_SIZE_OVERRUN,   /* a = declared size, b = bytes left */
    ERR_HEADER_COUNT_NEGATIVE,
    ERR_HEADER_COUNT_TOO_BIG,
    ERR_HEADER_KEY_NEGATIVE,
    ERR_SIZE_MISMATCH,  /* a = declared size, b = bytes read */
};

/* What the reader functions say about one varint. */
enum varint_status { VARINT_OK = 0, VARINT_PAST_END, VARINT_TOO_LONG };

typedef struct {
    const uint8_t *buf;
    int64_t limit;          /* the buffer's length: no byte at or past it is read */
    int64_t end;            /* where the records end, as the caller says */
    int64_t count;
    int64_t max_record_size;
    int partial;
    /* results */
    int64_t pos;
    int64_t index;
    i128 min_ts;
    i128 max_ts;
    int64_t first_keyless;
    int consecutive;
    int error;
    int64_t a, b;
} scan_state;

static inline int64_t zigzag64(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* A zigzag varint of at most 5 bytes: at most 35 bits, so its value fits 64 bits either way. */
static inline int read_varint(const uint8_t *buf, int64_t limit, int64_t *pos, int64_t *out)
{
    int64_t p = *pos;
    uint64_t value = 0;
    for (int i = 0; i < 5; i++) {
        if (p + i >= limit)
            return VARINT_PAST_END;
        uint8_t b = buf[p + i];
        value |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = zigzag64(value);
            *pos = p + i + 1;
            return VARINT_OK;
        }
    }
    return VARINT_TOO_LONG;
}

/* A zigzag varlong of at most 10 bytes: up to 70 bits, kept whole as the reference keeps them. */
static inline int read_varlong(const uint8_t *buf, int64_t limit, int64_t *pos, i128 *out)
{
    int64_t p = *pos;
    u128 value = 0;
    for (int i = 0; i < 10; i++) {
        if (p + i >= limit)
            return VARINT_PAST_END;
        uint8_t b = buf[p + i];
        value |= (u128)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            i128 half = (i128)(value >> 1);
            *out = (value & 1) ? -half - 1 : half;
            *pos = p + i + 1;
            return VARINT_OK;
        }
    }
    return VARINT_TOO_LONG;
}

#define FAIL(code) do { s->error = (code); goto done; } while (0)
#define FAIL2(code, x, y) do { s->error = (code); s->a = (x); s->b = (y); goto done; } while (0)
/* The reference indexes the buffer: past its end is an IndexError, "invalid record structure". */
#define NEED(p) do { if ((p) >= limit) FAIL(ERR_STRUCTURE); } while (0)
#define VARINT(p, out) do { \
        int r_ = read_varint(buf, limit, &(p), &(out)); \
        if (r_ == VARINT_PAST_END) FAIL(ERR_STRUCTURE); \
        if (r_ == VARINT_TOO_LONG) FAIL2(ERR_VARINT_TOO_LONG, 5, 0); \
    } while (0)

/* The loop of record_scan.scan_records, step for step. Touches no Python object. */
static void scan(scan_state *s)
{
    const uint8_t *buf = s->buf;
    const int64_t limit = s->limit, end = s->end, count = s->count;
    int64_t pos = s->pos, index = s->index, first_keyless = -1;
    i128 min_ts = s->min_ts, max_ts = s->max_ts;
    int consecutive = 1;
    uint8_t b, b2;

    while (index < count) {
        if (pos >= end) {
            if (s->partial)
                break;
            FAIL(ERR_PREMATURE_EOF);
        }
        const int64_t start = pos;
        int64_t size;
        NEED(pos);
        b = buf[pos];
        if (b < 0x80) {
            size = zigzag64(b);
            pos += 1;
        } else {
            int r;
            if (pos + 1 >= limit) {
                r = VARINT_PAST_END;
            } else if ((b2 = buf[pos + 1]) < 0x80) {
                size = zigzag64((uint64_t)(b & 0x7F) | ((uint64_t)b2 << 7));
                pos += 2;
                r = VARINT_OK;
            } else {
                r = read_varint(buf, limit, &pos, &size);
            }
            if (r == VARINT_PAST_END) {
                if (s->partial) {
                    pos = start;
                    break;
                }
                FAIL(ERR_STRUCTURE);
            }
            if (r == VARINT_TOO_LONG)
                FAIL2(ERR_VARINT_TOO_LONG, 5, 0);
        }
        const int64_t body = pos;
        const int64_t record_end = pos + size;
        if (size < 0 || record_end > end) {
            if (size > s->max_record_size)
                FAIL2(ERR_RECORD_TOO_BIG, size, 0);
            if (s->partial && size >= 0) {
                pos = start;
                break;
            }
            FAIL2(ERR_SIZE_OVERRUN, size, end - pos);
        }
        /* attributes (not read), then the timestamp delta */
        i128 ts;
        NEED(pos + 1);
        b = buf[pos + 1];
        if (b < 0x80) {
            ts = zigzag64(b);
            pos += 2;
        } else {
            NEED(pos + 2);
            if (buf[pos + 2] < 0x80) {
                ts = zigzag64((uint64_t)(b & 0x7F) | ((uint64_t)buf[pos + 2] << 7));
                pos += 3;
            } else {
                int64_t p = pos + 1;
                int r = read_varlong(buf, limit, &p, &ts);
                if (r == VARINT_PAST_END)
                    FAIL(ERR_STRUCTURE);
                if (r == VARINT_TOO_LONG)
                    FAIL2(ERR_VARINT_TOO_LONG, 10, 0);
                pos = p;
            }
        }
        /* offset delta: only whether it equals the record's index matters */
        NEED(pos);
        b = buf[pos];
        if (b < 0x80) {
            if (!(index >= 0 && index < 64 && b == 2 * index))
                consecutive = 0;
            pos += 1;
        } else {
            NEED(pos + 1);
            b2 = buf[pos + 1];
            if (b2 < 0x80) {
                if (zigzag64((uint64_t)(b & 0x7F) | ((uint64_t)b2 << 7)) != index)
                    consecutive = 0;
                pos += 2;
            } else {
                int64_t delta;
                VARINT(pos, delta);
                if (delta != index)
                    consecutive = 0;
            }
        }
        /* key: skipped by its length; a negative length is a null key */
        NEED(pos);
        b = buf[pos];
        if (b == 1) {
            pos += 1;
            if (first_keyless < 0)
                first_keyless = index;
        } else {
            int64_t n;
            if (b < 0x80) {
                n = zigzag64(b);
                pos += 1;
            } else {
                VARINT(pos, n);
            }
            if (n >= 0)
                pos += n;
            else if (first_keyless < 0)
                first_keyless = index;
        }
        /* value */
        NEED(pos);
        b = buf[pos];
        if (b < 0x80) {
            if (!(b & 1))
                pos += b >> 1;
            pos += 1;
        } else {
            NEED(pos + 1);
            b2 = buf[pos + 1];
            if (b2 < 0x80) {
                uint64_t n = (uint64_t)(b & 0x7F) | ((uint64_t)b2 << 7);
                pos += (n & 1) ? 2 : 2 + (int64_t)(n >> 1);
            } else {
                int64_t n;
                VARINT(pos, n);
                if (n > 0)
                    pos += n;
            }
        }
        /* headers */
        NEED(pos);
        if (buf[pos] == 0) {
            pos += 1;
        } else {
            int64_t headers;
            VARINT(pos, headers);
            if (headers < 0)
                FAIL2(ERR_HEADER_COUNT_NEGATIVE, headers, 0);
            if (headers > end - pos)
                FAIL2(ERR_HEADER_COUNT_TOO_BIG, headers, 0);
            for (int64_t h = 0; h < headers; h++) {
                int64_t key_size, value_size;
                VARINT(pos, key_size);
                if (key_size < 0)
                    FAIL2(ERR_HEADER_KEY_NEGATIVE, key_size, 0);
                pos += key_size;
                VARINT(pos, value_size);
                if (value_size > 0)
                    pos += value_size;
            }
        }
        if (pos != record_end)
            FAIL2(ERR_SIZE_MISMATCH, size, pos - body);
        if (ts < min_ts)
            min_ts = ts;
        if (ts > max_ts)
            max_ts = ts;
        index += 1;
    }
done:
    s->pos = pos;
    s->index = index;
    s->min_ts = min_ts;
    s->max_ts = max_ts;
    s->first_keyless = first_keyless;
    s->consecutive = consecutive;
}

static PyObject *long_from_i128(i128 v)
{
    if (v >= INT64_MIN && v <= INT64_MAX)
        return PyLong_FromLongLong((long long)v);
    /* (hi << 64) | lo, in Python's integers: exact for negative hi as well */
    PyObject *hi = PyLong_FromLongLong((long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)(u128)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *shifted = NULL, *result = NULL;
    if (hi && lo && shift && (shifted = PyNumber_Lshift(hi, shift)))
        result = PyNumber_Or(shifted, lo);
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    Py_XDECREF(shifted);
    return result;
}

static void raise_error(const scan_state *s, PyObject *max_record_size)
{
    long long a = (long long)s->a, b = (long long)s->b;
    switch (s->error) {
    case ERR_STRUCTURE:
        PyErr_SetString(InvalidRecordError, "Found invalid record structure");
        break;
    case ERR_PREMATURE_EOF:
        PyErr_SetString(InvalidRecordError, "Incorrect declared batch size, premature EOF reached");
        break;
    case ERR_VARINT_TOO_LONG:
        PyErr_Format(InvalidRecordError, "varint is too long: more than %lld bytes", a);
        break;
    case ERR_RECORD_TOO_BIG:
        PyErr_Format(InvalidRecordError, "record of %lld bytes exceeds the bound of %S", a, max_record_size);
        break;
    case ERR_SIZE_OVERRUN:
        PyErr_Format(InvalidRecordError,
                     "Invalid record size: expected %lld bytes in record payload, but instead the buffer "
                     "has only %lld remaining bytes.", a, b);
        break;
    case ERR_HEADER_COUNT_NEGATIVE:
        PyErr_Format(InvalidRecordError, "Found invalid number of record headers %lld", a);
        break;
    case ERR_HEADER_COUNT_TOO_BIG:
        PyErr_Format(InvalidRecordError,
                     "Found invalid number of record headers. %lld is larger than the remaining size of the buffer",
                     a);
        break;
    case ERR_HEADER_KEY_NEGATIVE:
        PyErr_Format(InvalidRecordError, "Invalid negative header key size %lld", a);
        break;
    case ERR_SIZE_MISMATCH:
        PyErr_Format(InvalidRecordError,
                     "Invalid record size: expected to read %lld bytes in record payload, but instead read %lld",
                     a, b);
        break;
    default:
        PyErr_SetString(PyExc_SystemError, "record scan failed without a reason");
    }
}

static PyObject *scan_records(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buf", "pos", "end", "first_index", "count", "partial", "max_record_size",
                             "release_gil", NULL};
    PyObject *buf_obj, *max_obj = NULL;
    Py_ssize_t pos, end, first_index, count;
    int partial = 0, release_gil = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Onnnn|$pOp:scan_records", kwlist, &buf_obj, &pos, &end,
                                     &first_index, &count, &partial, &max_obj, &release_gil))
        return NULL;
    if (InvalidRecordError == NULL || RecordScan == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._record_scan is used before configure()");
        return NULL;
    }
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "pos must not be negative");
        return NULL;
    }
    PyObject *max_record_size;
    if (max_obj == NULL) {
        max_record_size = PyLong_FromLongLong(1LL << 31);
    } else {
        max_record_size = PyNumber_Index(max_obj);
    }
    if (max_record_size == NULL)
        return NULL;
    int overflow;
    long long max_size = PyLong_AsLongLongAndOverflow(max_record_size, &overflow);
    if (overflow > 0)
        max_size = LLONG_MAX;  /* larger than any size a 5-byte varint can declare */
    else if (overflow < 0)
        max_size = LLONG_MIN;
    else if (max_size == -1 && PyErr_Occurred()) {
        Py_DECREF(max_record_size);
        return NULL;
    }

    Py_buffer view;
    if (PyObject_GetBuffer(buf_obj, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(max_record_size);
        return NULL;
    }
    scan_state s = {
        .buf = (const uint8_t *)view.buf, .limit = view.len, .end = end, .count = count,
        .max_record_size = max_size, .partial = partial, .pos = pos, .index = first_index,
        .min_ts = (i128)1 << 63, .max_ts = -((i128)1 << 63), .first_keyless = -1, .consecutive = 1,
        .error = SCAN_OK,
    };
    const int64_t stop = end < view.len ? end : view.len;
    if (release_gil && stop > pos && stop - pos >= RELEASE_GIL_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        scan(&s);
        Py_END_ALLOW_THREADS
    } else {
        scan(&s);
    }
    PyBuffer_Release(&view);

    if (s.error != SCAN_OK) {
        raise_error(&s, max_record_size);
        Py_DECREF(max_record_size);
        return NULL;
    }
    Py_DECREF(max_record_size);
    PyObject *items[6] = {
        PyLong_FromLongLong(s.pos), PyLong_FromLongLong(s.index), long_from_i128(s.min_ts),
        long_from_i128(s.max_ts), PyLong_FromLongLong(s.first_keyless), PyBool_FromLong(s.consecutive),
    };
    PyObject *result = NULL;
    if (items[0] && items[1] && items[2] && items[3] && items[4] && items[5])
        result = PyObject_Vectorcall(RecordScan, items, 6, NULL);
    for (int i = 0; i < 6; i++)
        Py_XDECREF(items[i]);
    return result;
}

/* Big-endian reads from a buffer already known to hold the bytes. */
static inline int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int16_t be16(const uint8_t *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* v2 batch header: where LogValidator's fields sit. */
#define B_LENGTH 8
#define B_MAGIC 16
#define B_CRC 17
#define B_ATTRIBUTES 21
#define B_LAST_DELTA 23
#define B_BASE_TS 27
#define B_PRODUCER_ID 43
#define B_BASE_SEQUENCE 53
#define B_COUNT 57
#define B_RECORDS 61

/*
 * check_plain_batch(buf, max_message_bytes, now_ms, before_max_ms, after_max_ms, create_time, compacted)
 *
 * The common produce, accepted in one call: exactly one uncompressed v2 batch filling ``buf``, every
 * rule of broker.log_validator.validate_produce_records passed. Returns (records_count, max_timestamp)
 * as that function's ValidatedBatch would hold them, or None for anything else, valid or not: the
 * Python validator then decides, with Kafka's error for whatever is wrong. So this function only ever
 * says yes to what the reference accepts, and tests/broker/test_plain_batch_check.py holds it to that.
 */
static PyObject *check_plain_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "check_plain_batch takes 7 arguments");
        return NULL;
    }
    if (Crc32c == NULL || RecordScan == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._record_scan.check_plain_batch is used before configure()");
        return NULL;
    }
    /* The limits as 64-bit integers; one beyond that (no Kafka config is) is the validator's to use. */
    long long limits[4];
    for (int i = 0; i < 4; i++) {
        int overflow;
        limits[i] = PyLong_AsLongLongAndOverflow(args[1 + i], &overflow);
        if (limits[i] == -1 && PyErr_Occurred())
            return NULL;
        if (overflow)
            Py_RETURN_NONE;
    }
    const long long max_message_bytes = limits[0], now_ms = limits[1], before_max_ms = limits[2],
                    after_max_ms = limits[3];
    int create_time = PyObject_IsTrue(args[5]);
    int compacted = PyObject_IsTrue(args[6]);
    if (create_time < 0 || compacted < 0)
        return NULL;

    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    const int64_t n = view.len;
    PyObject *result = NULL;
    /* Framing (one batch, nothing after it), the client's baseOffset of 0, the size limit. */
    if (n < B_RECORDS || buf[B_MAGIC] != 2 || (int64_t)be32(buf + B_LENGTH) + 12 != n || be64(buf) != 0
        || n > max_message_bytes)
        goto decline;
    const int16_t attributes = be16(buf + B_ATTRIBUTES);
    const int32_t last_delta = be32(buf + B_LAST_DELTA), count = be32(buf + B_COUNT);
    const int64_t producer_id = be64(buf + B_PRODUCER_ID);
    /* Uncompressed, CreateTime (a producer's LogAppendTime bit is the validator's to judge), not a
     * control batch, offsets 0..count-1, a sequence for an idempotent producer. */
    if ((attributes & 0x07) != 0 || (attributes & 0x08) != 0 || (attributes & 0x20) != 0 || last_delta < 0
        || count <= 0
        || (int64_t)last_delta + 1 != count || (producer_id >= 0 && be32(buf + B_BASE_SEQUENCE) < 0))
        goto decline;

    PyObject *section = PyMemoryView_FromMemory((char *)(buf + B_ATTRIBUTES), n - B_ATTRIBUTES, PyBUF_READ);
    if (section == NULL)
        goto done;
    PyObject *crc = PyObject_CallOneArg(Crc32c, section);
    Py_DECREF(section);
    if (crc == NULL)
        goto done;
    unsigned long computed = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (computed == (unsigned long)-1 && PyErr_Occurred())
        goto done;
    if (computed != (uint32_t)be32(buf + B_CRC))
        goto decline;

    scan_state s = {
        .buf = buf, .limit = n, .end = n, .count = count, .max_record_size = 1LL << 31, .partial = 0,
        .pos = B_RECORDS, .index = 0, .min_ts = (i128)1 << 63, .max_ts = -((i128)1 << 63),
        .first_keyless = -1, .consecutive = 1, .error = SCAN_OK,
    };
    scan(&s);
    if (s.error != SCAN_OK || s.pos != n)
        goto decline;
    if (compacted && s.first_keyless >= 0)
        goto decline;
    /* Timestamps from aggregates, as the validator reads them: a record with NO_TIMESTAMP passes in
     * Kafka, and one out of bounds here is declined so that the validator walks the records. */
    const i128 base_ts = be64(buf + B_BASE_TS);
    const i128 min_record_ts = base_ts + s.min_ts, max_record_ts = base_ts + s.max_ts;
    if (create_time
        && (min_record_ts < (i128)now_ms - before_max_ms || max_record_ts > (i128)now_ms + after_max_ms))
        goto decline;
    PyObject *items[2] = {PyLong_FromLong(count), long_from_i128(max_record_ts > -1 ? max_record_ts : -1)};
    if (items[0] && items[1])
        result = PyTuple_Pack(2, items[0], items[1]);
    Py_XDECREF(items[0]);
    Py_XDECREF(items[1]);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *error_type, *result_type, *crc32c = NULL;
    if (!PyArg_ParseTuple(args, "OO|O:configure", &error_type, &result_type, &crc32c))
        return NULL;
    if (!PyType_Check(error_type) || !PyType_IsSubtype((PyTypeObject *)error_type,
                                                        (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "configure() needs an exception type");
        return NULL;
    }
    if (!PyCallable_Check(result_type)) {
        PyErr_SetString(PyExc_TypeError, "configure() needs a callable result type");
        return NULL;
    }
    Py_INCREF(error_type);
    Py_INCREF(result_type);
    Py_XSETREF(InvalidRecordError, error_type);
    Py_XSETREF(RecordScan, result_type);
    if (crc32c != NULL) {
        if (!PyCallable_Check(crc32c)) {
            PyErr_SetString(PyExc_TypeError, "configure() needs a callable CRC-32C");
            return NULL;
        }
        Py_INCREF(crc32c);
        Py_XSETREF(Crc32c, crc32c);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan_records", (PyCFunction)(void (*)(void))scan_records, METH_VARARGS | METH_KEYWORDS,
     "scan_records(buf, pos, end, first_index, count, *, partial=False, max_record_size=2**31, "
     "release_gil=False)\n--\n\nprotocol.record_scan.scan_records, compiled."},
    {"check_plain_batch", (PyCFunction)(void (*)(void))check_plain_batch, METH_FASTCALL,
     "check_plain_batch(buf, max_message_bytes, now_ms, before_max_ms, after_max_ms, create_time, "
     "compacted)\n--\n\nOne uncompressed v2 batch that passes every produce check: (records_count, "
     "max_timestamp); None otherwise."},
    {"configure", configure, METH_VARARGS,
     "configure(error_type, result_type, crc32c=None)\n--\n\nThe exception to raise, the type to return "
     "and the CRC-32C function."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._record_scan",
    "The records of a v2 batch checked in C: see protocol.record_scan.", -1, methods,
};

PyMODINIT_FUNC PyInit__record_scan(void)
{
    return PyModule_Create(&module);
}
