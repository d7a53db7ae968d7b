/* Folding of whole variable tokens in blocks of log lines (see engine/fold.py for the rules).
 *
 * A token is a maximal run of ASCII letters, digits and bytes >= 0x80; everything else separates
 * tokens. A token is variable (folded into "<*>") when it starts with a digit (numbers, 0x hex,
 * hashes, numbers with units), is all hex and long, or carries many digit runs (random names);
 * hex tokens joined to a variable token by ':' or '-' (UUIDs, IPv6) are variable too. Short
 * numbers glued to an identifier ("mlx5_0", "cuda:0") are kept. Identifiers with digits inside
 * ("c10d", "EXT4", "bf16") are kept. Paths (two or more "/parts") fold whole. A line holding
 * control bytes is "binary": its key is "\0".
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t keep_underscore; /* digits kept after "word_" */
    Py_ssize_t keep_colon;      /* digits kept after "word:" */
    Py_ssize_t hex_min;         /* shortest all-hex token (with a digit) that is variable */
    Py_ssize_t random_runs;     /* digit runs that make a token variable */
} Rules;

typedef struct {
    Py_ssize_t a, b;
} Span;

enum { SEP = 0, DIGIT = 1, HEXL = 2, LETTER = 3, CTRL = 4 };
static unsigned char CLS[256];

static void init_classes(void) {
    for (int c = 0; c < 256; c++) {
        unsigned char k = SEP;
        if (c >= '0' && c <= '9') k = DIGIT;
        else if ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) k = HEXL;
        else if ((c >= 'g' && c <= 'z') || (c >= 'G' && c <= 'Z') || c >= 0x80) k = LETTER;
        else if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != 0x1b && c != '\f' && c != '\v') || c == 0x7f)
            k = CTRL;
        CLS[c] = k;
    }
}

static int is_alnum(unsigned char c) { return CLS[c] == DIGIT || CLS[c] == HEXL || CLS[c] == LETTER; }

static int is_path_char(unsigned char c) {
    return is_alnum(c) || c == '_' || c == '.' || c == '@' || c == ',' || c == '+' || c == '=' || c == '-';
}

/* The end of the path that starts at s[i] ('/' or '.'), or -1: two or more "/component" steps,
 * each after up to two dots, not glued to a word before it (masking.yaml's `path`, folded whole:
 * its parts are often random, e.g. /tmp/tmpw_edidfe/). `line` is where the line starts. */
static Py_ssize_t path_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, Py_ssize_t line) {
    if (i > line) {
        unsigned char b = s[i - 1];
        if (is_alnum(b) || b == '_' || b == '<' || b == '>') return -1;
    }
    Py_ssize_t p = i, steps = 0;
    for (;;) {
        Py_ssize_t q = p;
        while (q < n && q - p < 2 && s[q] == '.') q++;
        if (q >= n || s[q] != '/') break;
        q++;
        while (q < n && is_path_char(s[q])) q++;
        steps++;
        p = q;
    }
    return steps >= 2 ? p : -1;
}

/* What the previous tokens of a line leave for the next one. */
typedef struct {
    Py_ssize_t prev_b;  /* end of the previous token (-1: none, or a path came between) */
    Py_ssize_t chain;   /* start of a chain of kept hex groups joined by ':'/'-' (-1: none) */
    int prev_folded, prev_group, chain_len, chain_digit;
} State;

typedef struct {
    Py_ssize_t b; /* end */
    int var;      /* folds */
    int cont;     /* continues the chain (which then folds with it) */
    int group, digits;
} Tok;

static const State FRESH = {-1, -1, 0, 0, 0, 0};

/* The token that starts at s[a] (a letter or digit) of the line starting at s[line]. */
static inline Tok next_token(const unsigned char *s, Py_ssize_t a, Py_ssize_t n, Py_ssize_t line,
                             const State *st, const Rules *r) {
    Tok t;
    Py_ssize_t i = a;
    int others = 0, runs = 0, in_run = 0;
    t.digits = 0;
    while (i < n) { /* branch-free counting: token bytes mix digits and letters unpredictably */
        unsigned char d = CLS[s[i]];
        if ((unsigned)(d - 1) > 2u) break; /* not DIGIT, HEXL or LETTER */
        int dig = d == DIGIT;
        t.digits += dig;
        runs += dig & !in_run;
        in_run = dig;
        others += d == LETTER;
        i++;
    }
    Py_ssize_t len = i - a;
    t.b = i;
    /* a UUID or IPv6 group: all hex, with a digit or of a group's length (<= 4, or >= hex_min) */
    t.group = others == 0 && (t.digits > 0 || len <= 4 || len >= r->hex_min);
    t.var = 0;
    if (CLS[s[a]] == DIGIT) {
        t.var = 1;
        if (t.digits == len && a - line >= 2 && is_alnum(s[a - 2])) {
            int next_ok = i >= n || !(s[i] == '.' || s[i] == ':' || s[i] == ',');
            if (s[a - 1] == '_' && len <= r->keep_underscore) t.var = 0;
            else if (s[a - 1] == ':' && len <= r->keep_colon && next_ok) t.var = 0;
        }
    } else if ((t.digits > 0 && others == 0 && len >= r->hex_min) || runs >= r->random_runs) {
        t.var = 1;
    }
    /* hex joined by ':' / '-' (one or two of them) to a variable token: UUID groups, IPv6 */
    int joined = 0;
    if (st->prev_b >= 0 && a - st->prev_b <= 2) {
        joined = 1;
        for (Py_ssize_t j = st->prev_b; j < a; j++)
            if (s[j] != ':' && s[j] != '-') joined = 0;
    }
    t.cont = joined && st->prev_group && !st->prev_folded && st->chain >= 0;
    if (!t.var && t.group && ((joined && st->prev_folded) ||
                              (t.cont && st->chain_len >= 2 && (st->chain_digit || t.digits))))
        t.var = 1; /* a group joined to a variable token, or the third of a chain with a digit */
    return t;
}

/* The state after token t, which started at a. */
static inline void advance(State *st, const Tok *t, Py_ssize_t a) {
    if (t->var || !t->group) {
        st->chain = -1;
    } else if (t->cont) {
        st->chain_len++;
        st->chain_digit |= t->digits > 0;
    } else {
        st->chain = a; st->chain_len = 1; st->chain_digit = t->digits > 0;
    }
    st->prev_b = t->b; st->prev_folded = t->var; st->prev_group = t->group;
}

/* The folded spans of line s[0:n] into out (room for n / 2 + 1); -1 if the line is binary. With
 * limit >= 0 it may stop once it holds more than limit spans: the first limit - 1 are final then
 * (a later token only ever adds its predecessor, which comes after them). */
static Py_ssize_t line_spans(const unsigned char *s, Py_ssize_t n, const Rules *r, Span *out,
                             Py_ssize_t limit) {
    Py_ssize_t k = 0, i = 0;
    State st = FRESH;
    while (i < n) {
        unsigned char c = CLS[s[i]];
        if (c == CTRL) return -1;
        if (c == SEP) {
            Py_ssize_t e = (s[i] == '/' || s[i] == '.') ? path_end(s, i, n, 0) : -1;
            if (e > 0) {
                out[k++] = (Span){i, e};
                if (limit >= 0 && k > limit) return k;
                i = e;
                st.prev_b = -1;
            } else {
                i++;
            }
            continue;
        }
        Py_ssize_t a = i;
        Tok t = next_token(s, a, n, 0, &st, r);
        if (t.var && t.cont) { /* the chain folds too */
            for (Py_ssize_t j = st.chain; j < a;) {
                Py_ssize_t e = j;
                while (e < a && is_alnum(s[e])) e++;
                if (e > j) out[k++] = (Span){j, e};
                j = e > j ? e : j + 1;
            }
        }
        if (t.var) out[k++] = (Span){a, t.b};
        if (limit >= 0 && k > limit) return k;
        advance(&st, &t, a);
        i = t.b;
    }
    return k;
}

static int parse_rules(PyObject *args, Py_buffer *buf, Rules *r) {
    r->keep_underscore = 2; r->keep_colon = 1; r->hex_min = 8; r->random_runs = 3;
    return PyArg_ParseTuple(args, "y*|nnnn", buf, &r->keep_underscore, &r->keep_colon, &r->hex_min,
                            &r->random_runs);
}

static const char PLACEHOLDER[] = "<*>";

/* fold(data, keep_underscore, keep_colon, hex_min, random_runs[, width]) -> bytes: every line
 * folded; with width > 0, (bytes, values): values holds width int64 per line, the value of the
 * line's first `width` variable tokens where they are all digits (at most 18), else -1.
 * One pass over the block with the rules of line_spans. */
static PyObject *fold(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Rules r = {2, 1, 8, 3};
    Py_ssize_t width = 0;
    if (!PyArg_ParseTuple(args, "y*|nnnnn", &buf, &r.keep_underscore, &r.keep_colon, &r.hex_min,
                          &r.random_runs, &width))
        return NULL;
    const unsigned char *s = buf.buf;
    const Py_ssize_t n = buf.len;
    /* a folded line is at most twice its length ("0 " -> "<*> ") */
    PyObject *res = PyBytes_FromStringAndSize(NULL, n * 2 + 16), *vres = NULL;
    if (res == NULL) { PyBuffer_Release(&buf); return NULL; }
    int64_t *vals = NULL;
    if (width > 0) {
        Py_ssize_t lines = 1;
        for (const unsigned char *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))) != NULL; p++) lines++;
        vres = PyBytes_FromStringAndSize(NULL, lines * width * 8);
        if (vres == NULL) { Py_DECREF(res); PyBuffer_Release(&buf); return NULL; }
        vals = (int64_t *)PyBytes_AS_STRING(vres);
        memset(vals, 0xff, (size_t)(lines * width * 8)); /* -1 */
    }
    char *out = PyBytes_AS_STRING(res);
    /* Output is written lazily: bytes that stay as they are are copied in one memcpy when the next
     * fold comes (or at the end), from `done` on; `line_out` is where the current line starts in
     * the output once anything of it was written (line_out < 0: not yet). */
    Py_ssize_t o = 0, i = 0, line = 0, line_out = 0, row = 0, k = 0, done = 0; /* k: variable tokens */
    State st = FRESH;
    Py_BEGIN_ALLOW_THREADS
#define FLUSH_TO(x) do { Py_ssize_t x_ = (x); \
        if (line_out < 0) line_out = o + (line - done); \
        memcpy(out + o, s + done, (size_t)(x_ - done)); o += x_ - done; done = x_; } while (0)
    while (i < n) {
        unsigned char ch = s[i], c = CLS[ch];
        if (c == SEP) {
            if (ch == '/' || ch == '.') {
                Py_ssize_t e = path_end(s, i, n, line);
                if (e > 0) {
                    FLUSH_TO(i);
                    memcpy(out + o, PLACEHOLDER, 3);
                    o += 3;
                    done = i = e;
                    st.prev_b = -1;
                    k++;
                    continue;
                }
            } else if (ch == '\n') {
                line = i + 1; line_out = -1; st = FRESH; row++; k = 0;
            }
            i++;
            continue;
        }
        if (c == CTRL) { /* a binary line: its key is "\0" */
            const unsigned char *nl = memchr(s + i, '\n', (size_t)(n - i));
            if (line_out < 0) FLUSH_TO(line);
            o = line_out;
            out[o++] = '\0';
            done = i = nl ? (Py_ssize_t)(nl - s) : n;
            line_out = o;
            if (vals) memset(vals + row * width, 0xff, (size_t)(width * 8));
            continue;
        }
        Py_ssize_t a = i;
        Tok t = next_token(s, a, n, line, &st, &r);
        if (t.var) {
            if (t.cont) { /* the chain folds too (nothing of it was written yet) */
                FLUSH_TO(st.chain);
                for (Py_ssize_t j = st.chain; j < a;) {
                    if (is_alnum(s[j])) {
                        while (j < a && is_alnum(s[j])) j++;
                        memcpy(out + o, PLACEHOLDER, 3);
                        o += 3;
                        k++;
                    } else {
                        out[o++] = (char)s[j++];
                    }
                }
                done = a;
            } else {
                FLUSH_TO(a);
            }
            memcpy(out + o, PLACEHOLDER, 3);
            o += 3;
            done = t.b;
            if (vals && k < width && t.digits == t.b - a && t.b - a <= 18) {
                int64_t v = 0;
                for (Py_ssize_t j = a; j < t.b; j++) v = v * 10 + (s[j] - '0');
                vals[row * width + k] = v;
            }
            k++;
        }
        advance(&st, &t, a);
        i = t.b;
    }
    FLUSH_TO(n);
#undef FLUSH_TO
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (_PyBytes_Resize(&res, o) < 0) { Py_XDECREF(vres); return NULL; }
    if (vres == NULL) return res;
    PyObject *pair = PyTuple_Pack(2, res, vres);
    Py_DECREF(res);
    Py_DECREF(vres);
    return pair;
}

/* spans(line, ...) -> list of (start, end) of the folded tokens, or None for a binary line. */
static PyObject *spans_of(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Rules r;
    if (!parse_rules(args, &buf, &r)) return NULL;
    Span *sp = PyMem_Malloc(sizeof(Span) * (size_t)(buf.len / 2 + 2));
    if (sp == NULL) { PyBuffer_Release(&buf); return PyErr_NoMemory(); }
    Py_ssize_t k = line_spans(buf.buf, buf.len, &r, sp, -1);
    PyBuffer_Release(&buf);
    if (k < 0) { PyMem_Free(sp); Py_RETURN_NONE; }
    PyObject *list = PyList_New(k);
    for (Py_ssize_t j = 0; list && j < k; j++)
        PyList_SET_ITEM(list, j, Py_BuildValue("(nn)", sp[j].a, sp[j].b));
    PyMem_Free(sp);
    return list;
}

/* numbers(data, starts, ends, index, ...) -> int64 bytes: the value of folded token index[i] of
 * line data[starts[i]:ends[i]] (arrays of int64), -1 where it is not all digits (or too long). */
static PyObject *numbers(PyObject *self, PyObject *args) {
    Py_buffer buf, bs, be, bi;
    Rules r = {2, 1, 8, 3};
    if (!PyArg_ParseTuple(args, "y*y*y*y*|nnnn", &buf, &bs, &be, &bi, &r.keep_underscore, &r.keep_colon,
                          &r.hex_min, &r.random_runs))
        return NULL;
    Py_ssize_t m = bs.len / 8;
    const int64_t *st = bs.buf, *en = be.buf, *ix = bi.buf;
    PyObject *res = PyBytes_FromStringAndSize(NULL, m * 8);
    Span *sp = NULL;
    Py_ssize_t cap = 0;
    if (res != NULL && (be.len / 8 < m || bi.len / 8 < m)) {
        PyErr_SetString(PyExc_ValueError, "starts, ends and index differ in length");
        Py_CLEAR(res);
    }
    if (res != NULL) {
        int64_t *val = (int64_t *)PyBytes_AS_STRING(res);
        const unsigned char *s = buf.buf;
        for (Py_ssize_t i = 0; i < m; i++) {
            val[i] = -1;
            int64_t a = st[i], b = en[i];
            if (a < 0 || b > buf.len || a > b) continue;
            Py_ssize_t len = (Py_ssize_t)(b - a);
            if (len / 2 + 2 > cap) {
                cap = len / 2 + 2 > 1024 ? len / 2 + 2 : 1024;
                PyMem_Free(sp);
                sp = PyMem_Malloc(sizeof(Span) * (size_t)cap);
                if (sp == NULL) { Py_CLEAR(res); PyErr_NoMemory(); break; }
            }
            if (ix[i] < 0) continue;
            Py_ssize_t k = line_spans(s + a, len, &r, sp, ix[i] + 1);
            if (k < 0 || ix[i] >= k) continue;
            Span t = sp[ix[i]];
            if (t.b - t.a > 18) continue;
            int64_t v = 0;
            Py_ssize_t j;
            for (j = t.a; j < t.b && CLS[s[a + j]] == DIGIT; j++) v = v * 10 + (s[a + j] - '0');
            if (j == t.b) val[i] = v;
        }
    }
    PyMem_Free(sp);
    PyBuffer_Release(&buf); PyBuffer_Release(&bs); PyBuffer_Release(&be); PyBuffer_Release(&bi);
    return res;
}

/* keys(folded, table, room) -> (ids, fresh_lines, fresh_keys): the id of every line of `folded`
 * (lines joined by "\n") in dict `table` (bytes -> int), as int64 bytes. A line new to the table
 * is added with the next id (len(table)) while fewer than `room` were added, and its line index
 * and key are listed; further new lines get -1 (the caller groups them coarsely). */
static PyObject *keys(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *table;
    Py_ssize_t room;
    if (!PyArg_ParseTuple(args, "y*O!n", &buf, &PyDict_Type, &table, &room)) return NULL;
    const char *s = buf.buf;
    const Py_ssize_t n = buf.len;
    Py_ssize_t lines = 1;
    for (const char *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))) != NULL; p++) lines++;
    PyObject *ids = PyBytes_FromStringAndSize(NULL, lines * 8);
    PyObject *fresh_lines = PyList_New(0), *fresh_keys = PyList_New(0);
    PyObject *result = NULL;
    if (ids == NULL || fresh_lines == NULL || fresh_keys == NULL) goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(ids);
    Py_ssize_t added = 0, a = 0;
    for (Py_ssize_t row = 0; row < lines; row++) {
        const char *nl = memchr(s + a, '\n', (size_t)(n - a));
        Py_ssize_t b = nl ? (Py_ssize_t)(nl - s) : n;
        PyObject *key = PyBytes_FromStringAndSize(s + a, b - a);
        if (key == NULL) goto done;
        PyObject *id = PyDict_GetItemWithError(table, key); /* borrowed */
        if (id != NULL) {
            out[row] = PyLong_AsLongLong(id);
        } else if (PyErr_Occurred()) {
            Py_DECREF(key);
            goto done;
        } else if (added < room) {
            PyObject *next = PyLong_FromSsize_t(PyDict_GET_SIZE(table)), *at = PyLong_FromSsize_t(row);
            int bad = next == NULL || at == NULL || PyDict_SetItem(table, key, next) < 0 ||
                      PyList_Append(fresh_lines, at) < 0 || PyList_Append(fresh_keys, key) < 0;
            out[row] = next ? PyLong_AsLongLong(next) : -1;
            Py_XDECREF(next);
            Py_XDECREF(at);
            if (bad) { Py_DECREF(key); goto done; }
            added++;
        } else {
            out[row] = -1;
        }
        Py_DECREF(key);
        a = b + 1;
    }
    result = PyTuple_Pack(3, ids, fresh_lines, fresh_keys);
done:
    Py_XDECREF(ids);
    Py_XDECREF(fresh_lines);
    Py_XDECREF(fresh_keys);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef METHODS[] = {
    {"keys", keys, METH_VARARGS, "Ids of the lines of a folded block in a dict of keys (new ones added)."},
    {"fold", fold, METH_VARARGS, "Every line of a block with its variable tokens folded into <*>."},
    {"spans", spans_of, METH_VARARGS, "(start, end) of the variable tokens of one line; None if binary."},
    {"numbers", numbers, METH_VARARGS, "Values of the index-th variable token of several lines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_fold", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__fold(void) {
    init_classes();
    return PyModule_Create(&MODULE);
}
