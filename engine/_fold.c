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
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

/* Token t = s[a:t.b] (a letter or digit first), holding `digits` digits in `runs` runs and
 * `others` letters that are no hex digits: whether it folds, and what it does to a chain. */
static inline Tok decide(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, int digits, int others,
                         int runs, Py_ssize_t n, Py_ssize_t line, const State *st, const Rules *r) {
    Tok t;
    Py_ssize_t len = b - a;
    t.b = b;
    t.digits = digits;
    /* a UUID or IPv6 group: all hex, with a digit or of a group's length (<= 4, or >= hex_min) */
    t.group = others == 0 && (digits > 0 || len <= 4 || len >= r->hex_min);
    t.var = 0;
    if (CLS[s[a]] == DIGIT) {
        t.var = 1;
        if (digits == len && a - line >= 2 && is_alnum(s[a - 2])) {
            int next_ok = b >= n || !(s[b] == '.' || s[b] == ':' || s[b] == ',');
            if (s[a - 1] == '_' && len <= r->keep_underscore) t.var = 0;
            else if (s[a - 1] == ':' && len <= r->keep_colon && next_ok) t.var = 0;
        }
    } else if ((digits > 0 && others == 0 && len >= r->hex_min) || runs >= r->random_runs) {
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
                              (t.cont && st->chain_len >= 2 && (st->chain_digit || digits))))
        t.var = 1; /* a group joined to a variable token, or the third of a chain with a digit */
    return t;
}

/* The token that starts at s[a] (a letter or digit) of the line starting at s[line]. */
static inline Tok next_token(const unsigned char *s, Py_ssize_t a, Py_ssize_t n, Py_ssize_t line,
                             const State *st, const Rules *r) {
    Py_ssize_t i = a;
    int digits = 0, others = 0, runs = 0, in_run = 0;
    while (i < n) { /* branch-free counting: token bytes mix digits and letters unpredictably */
        unsigned char d = CLS[s[i]];
        if ((unsigned)(d - 1) > 2u) break; /* not DIGIT, HEXL or LETTER */
        int dig = d == DIGIT;
        digits += dig;
        runs += dig & !in_run;
        in_run = dig;
        others += d == LETTER;
        i++;
    }
    return decide(s, a, i, digits, others, runs, n, line, st, r);
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

/* ------------------------------------------------------------------ the block scanner (fold)
 *
 * fold() visits only the bytes that can change a line's key, found 64 bytes at a time as bit
 * masks (SSE2 compares where available, a table otherwise):
 *   - the start of a token that begins with a digit or a hex letter (it may fold or start a chain),
 *   - the start of every run of digits (a token of letters that holds digits may be random),
 *   - '/' and '.' (a path may start there), line ends and control bytes.
 * Everything else (words of letters, spaces, punctuation) is copied as it is, in one memcpy per run
 * between folds. This skips nothing that line_spans() would fold: a token of letters without digits
 * never folds, and never joins the next token to a chain (joining needs only ':' / '-' between two
 * tokens), so the state the next visited token sees is the same. */


typedef struct {
    uint64_t alnum, digit, hexl;
    uint64_t pathc; /* '/', '.' */
    uint64_t brk;   /* line ends and control bytes (not tab, CR, FF, VT, ESC) */
} Masks;

#if defined(__SSE2__)
#include <emmintrin.h>

static inline uint64_t movemask4(__m128i a, __m128i b, __m128i c, __m128i d) {
    return (uint64_t)(uint16_t)_mm_movemask_epi8(a) | (uint64_t)(uint16_t)_mm_movemask_epi8(b) << 16 |
           (uint64_t)(uint16_t)_mm_movemask_epi8(c) << 32 | (uint64_t)(uint16_t)_mm_movemask_epi8(d) << 48;
}

/* byte <= limit, unsigned */
static inline __m128i le_u8(__m128i v, unsigned char limit) {
    return _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8((char)limit)), v);
}

static inline void masks64(const unsigned char *s, Masks *m) {
    __m128i dg[4], hx[4], al[4], pc[4], bk[4];
    for (int q = 0; q < 4; q++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + 16 * q));
        __m128i low = _mm_or_si128(v, _mm_set1_epi8(0x20));
        __m128i d = le_u8(_mm_sub_epi8(v, _mm_set1_epi8('0')), 9);
        __m128i h = le_u8(_mm_sub_epi8(low, _mm_set1_epi8('a')), 5);
        __m128i l = _mm_or_si128(le_u8(_mm_sub_epi8(low, _mm_set1_epi8('g')), 'z' - 'g'),
                                 _mm_cmplt_epi8(v, _mm_setzero_si128())); /* >= 0x80 */
        __m128i x = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('/')), _mm_cmpeq_epi8(v, _mm_set1_epi8('.')));
        __m128i ctl = _mm_andnot_si128(_mm_or_si128(le_u8(_mm_sub_epi8(v, _mm_set1_epi8(9)), 4),
                                                    _mm_cmpeq_epi8(v, _mm_set1_epi8(0x1b))),
                                       le_u8(v, 0x1f)); /* 9..13 and ESC are text */
        bk[q] = _mm_or_si128(_mm_or_si128(ctl, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f))),
                             _mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
        dg[q] = d; hx[q] = h; pc[q] = x;
        al[q] = _mm_or_si128(_mm_or_si128(d, h), l);
    }
    m->digit = movemask4(dg[0], dg[1], dg[2], dg[3]);
    m->hexl = movemask4(hx[0], hx[1], hx[2], hx[3]);
    m->alnum = movemask4(al[0], al[1], al[2], al[3]);
    m->pathc = movemask4(pc[0], pc[1], pc[2], pc[3]);
    m->brk = movemask4(bk[0], bk[1], bk[2], bk[3]);
}
#else
static unsigned char MASKBITS[256]; /* 1 alnum, 2 digit, 4 hex letter, 8 '/' '.', 16 line end, control */

static inline void masks64(const unsigned char *s, Masks *m) {
    uint64_t a = 0, d = 0, h = 0, x = 0, k = 0;
    for (int j = 0; j < 64; j++) {
        uint64_t b = MASKBITS[s[j]];
        a |= (b & 1) << j; d |= ((b >> 1) & 1) << j; h |= ((b >> 2) & 1) << j; x |= ((b >> 3) & 1) << j;
        k |= ((b >> 4) & 1) << j;
    }
    m->alnum = a; m->digit = d; m->hexl = h; m->pathc = x; m->brk = k;
}
#endif

static void init_maskbits(void) {
#if !defined(__SSE2__)
    for (int c = 0; c < 256; c++) {
        unsigned char k = CLS[c], b = 0;
        if (k == DIGIT || k == HEXL || k == LETTER) b |= 1;
        if (k == DIGIT) b |= 2;
        if (k == HEXL) b |= 4;
        if (c == '/' || c == '.') b |= 8;
        if (k == CTRL || c == '\n') b |= 16;
        MASKBITS[c] = b;
    }
#endif
}

#define SEG_WORDS 64 /* 64-byte words whose masks are kept at a time (4 KiB of the block) */

/* The masks of a segment of the block: index 0 is the word before the segment, 1..words its
 * words, words + 1 the word after it (spaces beyond the block). `runs`: first digits of digit runs;
 * `letters`: letters that are no hex digits. */
typedef struct {
    uint64_t alnum[SEG_WORDS + 2], digit[SEG_WORDS + 2], letters[SEG_WORDS + 2], runs[SEG_WORDS + 2],
        events[SEG_WORDS + 2];
    uint64_t in_word; /* the last byte of the previous word is in a token that starts with a letter */
    Py_ssize_t start; /* the block offset of word 1 */
    Py_ssize_t words;
} Segment;

static void load_segment(Segment *g, const unsigned char *s, Py_ssize_t n, Py_ssize_t start) {
    if (start == 0) {
        g->alnum[0] = g->digit[0] = g->letters[0] = g->runs[0] = g->events[0] = g->in_word = 0;
    } else { /* the last word of the previous segment */
        Py_ssize_t w = g->words;
        g->alnum[0] = g->alnum[w]; g->digit[0] = g->digit[w]; g->letters[0] = g->letters[w];
        g->runs[0] = g->runs[w]; g->events[0] = g->events[w];
    }
    Py_ssize_t left = (n - start + 63) / 64;
    g->start = start;
    g->words = left < SEG_WORDS ? left : SEG_WORDS;
    for (Py_ssize_t w = 1; w <= g->words + 1; w++) {
        Py_ssize_t off = start + (w - 1) * 64;
        Masks m;
        if (off + 64 <= n) {
            masks64(s + off, &m);
        } else if (off < n) { /* the tail, padded with spaces (plain separators) */
            unsigned char pad[64];
            memset(pad, ' ', 64);
            memcpy(pad, s + off, (size_t)(n - off));
            masks64(pad, &m);
        } else {
            m.alnum = m.digit = m.hexl = m.pathc = m.brk = 0;
        }
        g->alnum[w] = m.alnum;
        g->digit[w] = m.digit;
        g->letters[w] = m.alnum & ~m.digit & ~m.hexl;
        g->runs[w] = m.digit & ~((m.digit << 1) | (g->digit[w - 1] >> 63));
        /* what fold() visits: tokens that start with a digit or a hex letter, runs of digits in
         * tokens that start with another letter (the bits of those tokens: the carry of adding
         * their first bits runs through them), '/' and '.' not glued to a word, line ends */
        uint64_t al = m.alnum, after = (al << 1) | (g->alnum[w - 1] >> 63), starts = al & ~after;
        uint64_t in_word = al & ~(al + (starts & g->letters[w]) + (g->in_word & 1));
        if (w <= g->words) g->in_word = in_word >> 63;
        g->events[w] = (starts & ~g->letters[w]) | (g->runs[w] & in_word) | (m.pathc & ~after) | m.brk;
    }
}

/* At least 57 bits of a segment's mask from block offset q on (q >= start - 64, q < start +
 * words * 64): one unaligned load (the masks are little-endian bit strings), one shift. */
static inline uint64_t bits_at(const uint64_t *mask, const Segment *g, Py_ssize_t q) {
    Py_ssize_t rel = q - g->start + 64;
    uint64_t v;
    memcpy(&v, (const unsigned char *)mask + (rel >> 3), 8);
    return v >> (rel & 7);
}

/* The token at s[a] from the masks (no loop over its bytes); next_token() when it is 57 bytes or
 * longer, or starts before the segment's first word. */
static inline Tok token_at(const Segment *g, const unsigned char *s, Py_ssize_t a, Py_ssize_t n,
                           Py_ssize_t line, const State *st, const Rules *r) {
    if (a >= g->start - 64) {
        uint64_t al = bits_at(g->alnum, g, a) | ((uint64_t)0x7f << 57);
        if (~al) {
            int len = __builtin_ctzll(~al);
            uint64_t tm = (((uint64_t)1) << len) - 1;
            uint64_t dg = bits_at(g->digit, g, a) & tm;
            int runs = 0; /* counted up to random_runs, and only where decide() asks */
            if (CLS[s[a]] != DIGIT) {
                uint64_t rn = bits_at(g->runs, g, a) & tm;
                while (rn && runs < r->random_runs) { rn &= rn - 1; runs++; }
            }
            /* decide() asks only whether there are digits, and whether they are all of it */
            return decide(s, a, a + len, dg == 0 ? 0 : dg == tm ? len : 1,
                          (bits_at(g->letters, g, a) & tm) != 0, runs, n, line, st, r);
        }
    }
    return next_token(s, a, n, line, st, r);
}

/* dst[0:len] = src[0:len]; short runs with one 16-byte move (dst has room for it; src is read
 * past len only inside the block). */
static inline void copy_run(char *dst, const unsigned char *src, Py_ssize_t len, const unsigned char *end) {
    if (len <= 16 && end - src >= 16) memcpy(dst, src, 16);
    else memcpy(dst, src, (size_t)len);
}

/* fold(data, keep_underscore, keep_colon, hex_min, random_runs[, width]) -> bytes: every line
 * folded; with width > 0, (bytes, values): values holds width int64 per line, the value of the
 * line's first `width` variable tokens where they are all digits (at most 18), else -1.
 * One pass over the block with the rules of line_spans, visiting only the bytes that matter. */
static PyObject *fold(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Rules r = {2, 1, 8, 3};
    Py_ssize_t width = 0;
    if (!PyArg_ParseTuple(args, "y*|nnnnn", &buf, &r.keep_underscore, &r.keep_colon, &r.hex_min,
                          &r.random_runs, &width))
        return NULL;
    const unsigned char *s = buf.buf;
    const Py_ssize_t n = buf.len;
    /* a folded line is at most twice its length ("0 " -> "<*> "), plus room for copy_run */
    PyObject *res = PyBytes_FromStringAndSize(NULL, n * 2 + 64), *vres = NULL;
    if (res == NULL) { PyBuffer_Release(&buf); return NULL; }
    Segment *g = PyMem_RawMalloc(sizeof(Segment));
    if (g == NULL) { Py_DECREF(res); PyBuffer_Release(&buf); return PyErr_NoMemory(); }
    int64_t *vals = NULL;
    if (width > 0) {
        Py_ssize_t lines = 1;
        for (const unsigned char *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))) != NULL; p++) lines++;
        vres = PyBytes_FromStringAndSize(NULL, lines * width * 8);
        if (vres == NULL) { PyMem_RawFree(g); Py_DECREF(res); PyBuffer_Release(&buf); return NULL; }
        vals = (int64_t *)PyBytes_AS_STRING(vres);
        memset(vals, 0xff, (size_t)(lines * width * 8)); /* -1 */
    }
    char *out = PyBytes_AS_STRING(res);
    const unsigned char *end = s + n;
    /* Output is written lazily: bytes that stay as they are are copied in one move when the next
     * fold comes (or at the end), from `done` on; `line_out` is where the current line starts in
     * the output once anything of it was written (line_out < 0: not yet). `i`: the bytes before it
     * were dealt with (a token, a path, a binary line's rest), visits before it are skipped. */
    Py_ssize_t o = 0, i = 0, line = 0, line_out = 0, row = 0, k = 0, done = 0; /* k: variable tokens */
    State st = FRESH;
    Py_BEGIN_ALLOW_THREADS
#define FLUSH_TO(x) do { Py_ssize_t x_ = (x); \
        if (line_out < 0) line_out = o + (line - done); \
        copy_run(out + o, s + done, x_ - done, end); o += x_ - done; done = x_; } while (0)
    for (Py_ssize_t seg = 0; seg < n; seg += SEG_WORDS * 64) {
        load_segment(g, s, n, seg);
        for (Py_ssize_t w = 1; w <= g->words; w++) {
            uint64_t ev = g->events[w];
            Py_ssize_t base = seg + (w - 1) * 64;
            while (ev) {
                Py_ssize_t p = base + __builtin_ctzll(ev);
                ev &= ev - 1;
                if (p < i) continue;
                unsigned char ch = s[p], c = CLS[ch];
                if (c == SEP) {
                    if (ch == '/' || ch == '.') {
                        Py_ssize_t e = path_end(s, p, n, line);
                        if (e > 0) {
                            FLUSH_TO(p);
                            memcpy(out + o, PLACEHOLDER, 3);
                            o += 3;
                            done = i = e;
                            st.prev_b = -1;
                            k++;
                            continue;
                        }
                    } else if (ch == '\n') {
                        line = p + 1; line_out = -1; st = FRESH; row++; k = 0;
                    }
                    i = p + 1;
                    continue;
                }
                if (c == CTRL) { /* a binary line: its key is "\0" */
                    const unsigned char *nl = memchr(s + p, '\n', (size_t)(n - p));
                    if (line_out < 0) FLUSH_TO(line);
                    o = line_out;
                    out[o++] = '\0';
                    done = i = nl ? (Py_ssize_t)(nl - s) : n;
                    line_out = o;
                    if (vals) memset(vals + row * width, 0xff, (size_t)(width * 8));
                    continue;
                }
                Py_ssize_t a = p; /* the token holding p starts at a (a run of digits inside a word) */
                while (a > i && (unsigned)(CLS[s[a - 1]] - 1) <= 2u) a--;
                Tok t = token_at(g, s, a, n, line, &st, &r);
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
        }
    }
    FLUSH_TO(n);
#undef FLUSH_TO
    Py_END_ALLOW_THREADS
    PyMem_RawFree(g);
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

/* A hash of s[0:n], 8 bytes at a time. */
static inline uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    uint64_t v = 0;
    memcpy(&v, s, (size_t)n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

typedef struct {
    uint64_t hash;
    Py_ssize_t at, len; /* the line's first appearance in the block */
    int64_t id;
    Py_ssize_t count;   /* its lines in the block */
    int done;           /* its id was looked up */
} Distinct;             /* the distinct lines of a block, in the order they first come */

typedef struct {
    uint32_t tag;       /* the hash's high half */
    int32_t at;         /* index of its Distinct; -1: a free slot */
} Slot;

/* ------------------------------------------------------------------ the free-text regime
 *
 * See engine/freetext.py. Per file, the distinct lines looked up (and the first repeat in a block of
 * one that was new) are counted in windows; a window mostly new, in a file of min_keys pre-keys or
 * more, starts the regime; one mostly repeats ends it. In the regime a new pre-key that holds no
 * needle gets the free key FREE + its frequent leading words. The state lives in a bytearray the
 * caller keeps per file (FREE_STATE_SIZE bytes, zeroed). */
#define PREFIX_BITS 12
#define RECENT_BITS 14
#define KNOWN_BITS 20
typedef struct {
    int64_t on, events, fresh, free_keys;
    uint32_t cur[1 << PREFIX_BITS], prev[1 << PREFIX_BITS]; /* leading-word counts: this window, the last */
    uint64_t recent[1 << RECENT_BITS]; /* hashes (| 1) of pre-keys given a free key; 0: empty */
    uint64_t known[1 << (KNOWN_BITS - 6)]; /* bit (hash >> 40): a pre-key with it was added to the table */
} FreeState;

#define MAX_NEEDLES 1024
typedef struct {
    const unsigned char *b; /* its bytes, the marks before its first character left out */
    Py_ssize_t len;
    int bounded, list;      /* a word boundary before its first character; 0: alarm, 1: marker */
} Needle;

typedef struct {
    Py_ssize_t window, min_keys, enter, leave, literal_min, literal_words, max_free_keys; /* counts */
    PyObject *getter;         /* called once needles are needed: (alarm, marker) tuples of bytes, or None */
    PyObject *got, *alarm, *marker; /* what it gave (a reference held for the call) */
    int ready, keep_all;      /* keep_all: no needles (the getter gave None): no line is grouped */
    unsigned char one[256];      /* 1: a one-byte alarm needle, 2: a one-byte marker one, 4: a two-byte one starts */
    unsigned char pair[8192];    /* bit (c0 << 8 | c1): some two-character needle starts with them */
    unsigned char tri[8192];     /* bit trigram(c0, c1, c2): some longer needle starts with them */
    Needle needles[MAX_NEEDLES]; /* by their first character (see start) */
    int start[257];              /* needles[start[c]:start[c + 1]] start with c */
} FreeRules;

/* In a needle (engine/freetext.py): BOUNDARY, a word boundary, and SKIP, any white space or none. */
enum { BOUNDARY = 0, SKIP = 1 };

/* A needle's characters: its bytes but the marks. */
static Py_ssize_t needle_real(const unsigned char *b, Py_ssize_t len, unsigned char *first2) {
    Py_ssize_t real = 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if (b[i] != BOUNDARY && b[i] != SKIP) {
            if (real < 2) first2[real] = b[i];
            real++;
        }
    return real;
}

static inline unsigned trigram(const unsigned char *c) {
    return (((uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16) * 0x9E3779B1u) >> 16;
}

/* The first three characters of a needle of three or more (f holds its first two), in `f3`. */
static const unsigned char *needle_third(const unsigned char *b, Py_ssize_t len, const unsigned char *f) {
    static unsigned char f3[3];
    f3[0] = f[0];
    f3[1] = f[1];
    for (Py_ssize_t i = 0, real = 0; i < len; i++)
        if (b[i] != BOUNDARY && b[i] != SKIP && ++real == 3) f3[2] = b[i];
    return f3;
}

/* The needles, asked for (once per call) the first time a line may be grouped; -1 on error. */
static int free_rules_ready(FreeRules *fr) {
    if (fr->ready) return 0;
    fr->got = PyObject_CallNoArgs(fr->getter);
    if (fr->got == NULL) return -1;
    fr->ready = 1;
    if (fr->got == Py_None) {
        fr->keep_all = 1;
        return 0;
    }
    if (!PyArg_ParseTuple(fr->got, "O!O!", &PyTuple_Type, &fr->alarm, &PyTuple_Type, &fr->marker)) return -1;
    if (PyTuple_GET_SIZE(fr->alarm) + PyTuple_GET_SIZE(fr->marker) > MAX_NEEDLES) {
        PyErr_SetString(PyExc_ValueError, "keys: too many needles");
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        PyObject *list = k ? fr->marker : fr->alarm;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(list); i++)
            if (!PyBytes_Check(PyTuple_GET_ITEM(list, i))) {
                PyErr_SetString(PyExc_TypeError, "keys: needles must be bytes");
                return -1;
            }
    }
    memset(fr->one, 0, sizeof fr->one);
    memset(fr->pair, 0, sizeof fr->pair);
    memset(fr->tri, 0, sizeof fr->tri);
    memset(fr->start, 0, sizeof fr->start);
    PyObject *lists[2] = {fr->alarm, fr->marker};
    int count[256] = {0}, total = 0;
    for (int pass = 0; pass < 2; pass++) { /* count by first character, then place */
        int at[256];
        for (int c = 0; c < 256; c++) at[c] = fr->start[c];
        for (int k = 0; k < 2; k++) {
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(lists[k]); i++) {
                PyObject *nd = PyTuple_GET_ITEM(lists[k], i);
                const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(nd);
                Py_ssize_t len = PyBytes_GET_SIZE(nd);
                unsigned char f[2];
                Py_ssize_t real = needle_real(b, len, f);
                if (real == 1) {
                    fr->one[f[0]] |= (unsigned char)(1 << k);
                    continue;
                }
                if (real < 2) continue;
                if (pass == 0) {
                    if (total < MAX_NEEDLES) { count[f[0]]++; total++; }
                    if (real == 2) {
                        fr->one[f[0]] |= 4;
                        fr->pair[((unsigned)f[0] << 5) | (f[1] >> 3)] |= (unsigned char)(1 << (f[1] & 7));
                    } else {
                        unsigned t = trigram(needle_third(b, len, f));
                        fr->tri[t >> 3] |= (unsigned char)(1 << (t & 7));
                    }
                    continue;
                }
                if (at[f[0]] >= fr->start[f[0] + 1]) continue; /* past MAX_NEEDLES (see keys) */
                int lead = 0, bounded = 0; /* marks before the first character: a boundary there? */
                for (; b[lead] == BOUNDARY || b[lead] == SKIP; lead++) bounded |= b[lead] == BOUNDARY;
                fr->needles[at[f[0]]++] = (Needle){b + lead, len - lead, bounded, k};
            }
        }
        if (pass == 0)
            for (int c = 0; c < 256; c++) fr->start[c + 1] = fr->start[c] + count[c];
    }
    return 0;
}

static inline int word_byte(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* A word boundary at s[q] (as `\b` in a bytes regex: between a word byte and another or an end). */
static inline int boundary_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t q) {
    return (q > 0 && word_byte(s[q - 1])) != (q < n && word_byte(s[q]));
}

static inline int space_byte(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Whether needle nd (marks included) matches s[0:n] with its first character at s[i]. */
static int needle_at(const unsigned char *nd, Py_ssize_t len, const unsigned char *s, Py_ssize_t n, Py_ssize_t i) {
    Py_ssize_t q = i;
    for (Py_ssize_t j = 0; j < len; j++) {
        if (nd[j] == BOUNDARY) {
            if (!boundary_at(s, n, q)) return 0;
        } else if (nd[j] == SKIP) {
            while (q < n && space_byte(s[q])) q++;
        } else {
            if (q >= n || s[q] != nd[j]) return 0;
            q++;
        }
    }
    return 1;
}

/* A pre-key that keeps its own path in the regime: an alarm needle, a glog level letter
 * ("[E1206 ", "W0101 ") at its start, or a marker needle on a line with a number (a digit or
 * "<*>"). One pass: at each byte, a table says whether a needle of one or two characters starts
 * there, and a bitmap of trigrams whether a longer one may. */
static int keeps_path(const FreeRules *fr, const unsigned char *s, Py_ssize_t n) {
    if (fr->keep_all) return 1;
    Py_ssize_t g = n > 0 && s[0] == '[';
    if (n - g >= 6 && (s[g] == 'E' || s[g] == 'W' || s[g] == 'F') && s[g + 5] == ' ') {
        int digits = 1;
        for (Py_ssize_t j = g + 1; j < g + 5; j++) digits &= s[j] >= '0' && s[j] <= '9';
        if (digits) return 1;
    }
    int number = 0, marker = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        number |= (c >= '0' && c <= '9') || c == '<';
        unsigned char kind = fr->one[c];
        if (kind & 1) return 1;
        marker |= kind & 2;
        int maybe = 0;
        if ((kind & 4) && i + 1 < n) maybe = fr->pair[((unsigned)c << 5) | (s[i + 1] >> 3)] & (1 << (s[i + 1] & 7));
        if (!maybe && i + 2 < n) {
            unsigned t = trigram(s + i);
            maybe = fr->tri[t >> 3] & (1 << (t & 7));
        }
        if (!maybe) continue;
        for (int j = fr->start[c]; j < fr->start[c + 1]; j++) {
            const Needle *nd = &fr->needles[j];
            if (nd->list == 1 && marker) continue;
            if (nd->bounded && !boundary_at(s, n, i)) continue;
            if (!needle_at(nd->b, nd->len, s, n, i)) continue;
            if (nd->list == 0) return 1;
            marker = 1;
        }
    }
    if (!marker || !number) return 0;
    for (Py_ssize_t j = 0; j < n; j++) /* '<' counted as a number above: is it "<*>"? */
        if ((s[j] >= '0' && s[j] <= '9') || (s[j] == '<' && j + 2 < n && s[j + 1] == '*' && s[j + 2] == '>'))
            return 1;
    return 0;
}

/* The ends of the first `most` words of s[0:n] (runs of bytes other than space and tab; leading
 * blanks belong to the first); returns how many there are. */
static int word_ends(const unsigned char *s, Py_ssize_t n, Py_ssize_t *ends, int most) {
    int k = 0;
    Py_ssize_t i = 0;
    while (k < most) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i >= n) break;
        while (i < n && s[i] != ' ' && s[i] != '\t') i++;
        ends[k++] = i;
    }
    return k;
}

#define MAX_LITERAL_WORDS 8

static inline size_t prefix_slot(const unsigned char *s, Py_ssize_t end, int k) {
    return (size_t)(hash_bytes((const char *)s, end) + (uint64_t)k) & ((1u << PREFIX_BITS) - 1);
}

/* The leading words of s[0:n] (at most literal_words): their ends and their prefix-table slots. */
typedef struct {
    int words;
    Py_ssize_t ends[MAX_LITERAL_WORDS];
    size_t slots[MAX_LITERAL_WORDS];
} Prefixes;

static void prefixes_of(const FreeRules *fr, const unsigned char *s, Py_ssize_t n, Prefixes *p) {
    p->words = word_ends(s, n, p->ends, (int)fr->literal_words);
    for (int k = 0; k < p->words; k++) p->slots[k] = prefix_slot(s, p->ends[k], k + 1);
}

/* The end of the literal part of a free key: its leading words while each prefix started at least
 * literal_min of the last window's new lines (0: none). */
static Py_ssize_t literal_end(const FreeState *st, const FreeRules *fr, const Prefixes *p) {
    Py_ssize_t end = 0;
    for (int k = 0; k < p->words; k++) {
        if (st->prev[p->slots[k]] < (uint32_t)fr->literal_min) break;
        end = p->ends[k];
    }
    return end;
}

static void count_prefixes(FreeState *st, const Prefixes *p) {
    for (int k = 0; k < p->words; k++)
        if (st->cur[p->slots[k]] < UINT32_MAX) st->cur[p->slots[k]]++;
}

/* One event of the window: a distinct line looked up (`fresh`: new to the file) or the first repeat
 * in a block of a line that was new. At the window's end the regime starts or ends. */
static void free_event(FreeState *st, const FreeRules *fr, int fresh, Py_ssize_t keys) {
    st->events++;
    st->fresh += fresh;
    if (st->events < fr->window) return;
    if (!st->on && st->fresh >= fr->enter && keys >= fr->min_keys) st->on = 1;
    else if (st->on && st->fresh < fr->leave) st->on = 0;
    memcpy(st->prev, st->cur, sizeof st->cur);
    memset(st->cur, 0, sizeof st->cur);
    st->events = st->fresh = 0;
}

/* Adds `key` to `table` with the next id; lists it (row, key). Returns the id, -1 on error. */
static int64_t add_key(PyObject *table, PyObject *key, Py_ssize_t row, PyObject *fresh_lines, PyObject *fresh_keys) {
    PyObject *next = PyLong_FromSsize_t(PyDict_GET_SIZE(table)), *at = PyLong_FromSsize_t(row);
    int bad = next == NULL || at == NULL || PyDict_SetItem(table, key, next) < 0 ||
              PyList_Append(fresh_lines, at) < 0 || PyList_Append(fresh_keys, key) < 0;
    int64_t id = next && !bad ? PyLong_AsLongLong(next) : -1;
    Py_XDECREF(next);
    Py_XDECREF(at);
    return bad ? -2 : id;
}

static const char FREE[] = "\x02";

/* Free keys a call already looked up in the table: their literal part (in the block) and id. */
#define FREE_MEMO 64
typedef struct {
    const unsigned char *at;
    Py_ssize_t len;
    int64_t id; /* -1: empty */
} FreeMemo;

/* keys(folded, table, room[, state, rules]) -> (ids, fresh_lines, fresh_keys): the id of every line
 * of `folded` (lines joined by "\n") in dict `table` (bytes -> int), as int64 bytes. A line new to
 * the table is added with the next id (len(table)) while fewer than `room` were added, and its
 * line index and key are listed; further new lines get -1 (the caller groups them coarsely). The
 * lines of the block are told apart in a hash table of their own first: a bytes object and a dict
 * look-up are made once per distinct line of the block, not per line. With `state` (a bytearray of
 * FREE_STATE_SIZE bytes kept per file) and `rules` ((window, min_keys, enter, leave, literal_min,
 * literal_words, max_free_keys), alarm needles, marker needles), the free-text regime applies. */
static PyObject *keys(PyObject *self, PyObject *args) {
    Py_buffer buf, stbuf = {0};
    PyObject *table, *state = Py_None, *rules = Py_None;
    Py_ssize_t room;
    if (!PyArg_ParseTuple(args, "y*O!n|OO", &buf, &PyDict_Type, &table, &room, &state, &rules)) return NULL;
    FreeState *st = NULL;
    static FreeRules fr; /* big: not on the stack (the GIL is held throughout) */
    memset(&fr, 0, offsetof(FreeRules, one));
    if (state != Py_None) {
        if (PyObject_GetBuffer(state, &stbuf, PyBUF_WRITABLE) < 0) { PyBuffer_Release(&buf); return NULL; }
        if (stbuf.len != (Py_ssize_t)sizeof(FreeState) ||
            !PyArg_ParseTuple(rules, "(nnnnnnn)O", &fr.window, &fr.min_keys, &fr.enter, &fr.leave,
                              &fr.literal_min, &fr.literal_words, &fr.max_free_keys, &fr.getter) ||
            !PyCallable_Check(fr.getter)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "keys: bad free-text state");
            PyBuffer_Release(&stbuf); PyBuffer_Release(&buf);
            return NULL;
        }
        if (fr.window < 1) fr.window = 1;
        if (fr.literal_words > MAX_LITERAL_WORDS) fr.literal_words = MAX_LITERAL_WORDS;
        st = stbuf.buf;
    }
    const char *s = buf.buf;
    const Py_ssize_t n = buf.len;
    Py_ssize_t lines = 1;
    for (const char *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))) != NULL; p++) lines++;
    size_t cap = 1024;
    while (cap < (size_t)lines * 2) cap <<= 1;
    Slot *slots = PyMem_RawMalloc(cap * sizeof(Slot));
    Distinct *dist = PyMem_RawMalloc((size_t)lines * sizeof(Distinct));
    int32_t *where = PyMem_RawMalloc((size_t)lines * sizeof(int32_t)); /* each line's Distinct */
    PyObject *ids = PyBytes_FromStringAndSize(NULL, lines * 8);
    PyObject *fresh_lines = PyList_New(0), *fresh_keys = PyList_New(0);
    PyObject *result = NULL;
    if (slots == NULL || dist == NULL || where == NULL || lines > INT32_MAX) { PyErr_NoMemory(); goto done; }
    if (ids == NULL || fresh_lines == NULL || fresh_keys == NULL) goto done;
    for (size_t j = 0; j < cap; j++) slots[j].at = -1;
    FreeMemo memo[FREE_MEMO];
    for (int j = 0; j < FREE_MEMO; j++) memo[j].id = -1;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(ids);
    Py_ssize_t added = 0, a = 0;
    int32_t distinct = 0;
    for (Py_ssize_t row = 0; row < lines; row++) { /* the block's distinct lines, and how often each comes */
        const char *nl = memchr(s + a, '\n', (size_t)(n - a));
        Py_ssize_t b = nl ? (Py_ssize_t)(nl - s) : n, len = b - a;
        uint64_t h = hash_bytes(s + a, len);
        uint32_t tag = (uint32_t)(h >> 32);
        size_t j = (size_t)h & (cap - 1);
        int32_t k = -1;
        for (; slots[j].at >= 0; j = (j + 1) & (cap - 1)) {
            const Distinct *c = &dist[slots[j].at];
            if (slots[j].tag == tag && c->hash == h && c->len == len && memcmp(s + c->at, s + a, (size_t)len) == 0) {
                k = slots[j].at;
                break;
            }
        }
        if (k < 0) {
            k = distinct++;
            slots[j] = (Slot){tag, k};
            dist[k] = (Distinct){h, a, len, -1, 0, 0};
        }
        dist[k].count++;
        where[row] = k;
        a = b + 1;
    }
    for (Py_ssize_t row = 0; row < lines; row++) {
        Distinct *d = &dist[where[row]];
        if (d->done) { /* seen earlier in this block */
            out[row] = d->id;
            continue;
        }
        a = d->at;
        Py_ssize_t len = d->len;
        uint64_t h = d->hash;
        size_t kb = (size_t)(h >> 40) & ((1u << KNOWN_BITS) - 1);
        /* In the regime, a line whose bit is clear was never added: no bytes object, no look-up. */
        int maybe_known = st == NULL || !st->on || d->count != 1 || (st->known[kb >> 6] >> (kb & 63) & 1);
        PyObject *key = NULL, *id = NULL;
        if (maybe_known) {
            key = PyBytes_FromStringAndSize(s + a, len);
            if (key == NULL) goto done;
            id = PyDict_GetItemWithError(table, key); /* borrowed */
        }
        int64_t found = -1;
        int fresh = 0;
        if (id != NULL) {
            found = PyLong_AsLongLong(id);
        } else if (PyErr_Occurred()) {
            Py_XDECREF(key);
            goto done;
        } else {
            const unsigned char *u = (const unsigned char *)s + a;
            uint64_t mark = h | 1;
            size_t r = (size_t)h & ((1u << RECENT_BITS) - 1);
            int grouped = 0;
            Prefixes pre = {0};
            if (st != NULL) { /* new to the file: neither in the table nor given a free key, and once here */
                fresh = st->recent[r] != mark && d->count == 1;
                if (fresh || st->on) prefixes_of(&fr, u, len, &pre);
                if (fresh) count_prefixes(st, &pre);
                if (st->on && d->count == 1 && len > 0 && s[a] != '\0') { /* not the binary key */
                    if (free_rules_ready(&fr) < 0) { Py_XDECREF(key); goto done; }
                    grouped = !keeps_path(&fr, u, len);
                }
            }
            Py_ssize_t lit = grouped ? literal_end(st, &fr, &pre) : 0;
            uint64_t lh = grouped ? hash_bytes((const char *)u, lit) : 0;
            FreeMemo *fm = &memo[lh & (FREE_MEMO - 1)];
            if (grouped && fm->id >= 0 && fm->len == lit && memcmp(fm->at, u, (size_t)lit) == 0) {
                found = fm->id; /* a free key this block already looked up */
                st->recent[r] = mark;
            } else if (grouped) {
                PyObject *fk = PyBytes_FromStringAndSize(NULL, lit + 1);
                if (fk == NULL) { Py_XDECREF(key); goto done; }
                PyBytes_AS_STRING(fk)[0] = FREE[0];
                memcpy(PyBytes_AS_STRING(fk) + 1, u, (size_t)lit);
                PyObject *fid = PyDict_GetItemWithError(table, fk);
                if (fid == NULL && !PyErr_Occurred() && lit > 0 && st->free_keys >= fr.max_free_keys) {
                    Py_DECREF(fk); /* too many free keys: FREE alone */
                    fk = PyBytes_FromStringAndSize(FREE, 1);
                    if (fk == NULL) { Py_XDECREF(key); goto done; }
                    fid = PyDict_GetItemWithError(table, fk);
                }
                if (fid != NULL) {
                    found = PyLong_AsLongLong(fid);
                } else if (PyErr_Occurred()) {
                    Py_DECREF(fk); Py_XDECREF(key);
                    goto done;
                } else if (added < room) {
                    found = add_key(table, fk, row, fresh_lines, fresh_keys);
                    if (found == -2) { Py_DECREF(fk); Py_XDECREF(key); goto done; }
                    added++;
                    st->free_keys++;
                }
                Py_DECREF(fk);
                st->recent[r] = mark;
                if (found >= 0) *fm = (FreeMemo){u, lit, found};
            } else if (added < room) {
                if (key == NULL && (key = PyBytes_FromStringAndSize(s + a, len)) == NULL) goto done;
                found = add_key(table, key, row, fresh_lines, fresh_keys);
                if (found == -2) { Py_DECREF(key); goto done; }
                added++;
                if (st != NULL) st->known[kb >> 6] |= (uint64_t)1 << (kb & 63);
            }
        }
        Py_XDECREF(key);
        if (st != NULL) free_event(st, &fr, fresh, PyDict_GET_SIZE(table));
        d->id = found;
        d->done = 1;
        out[row] = found;
    }
    result = PyTuple_Pack(3, ids, fresh_lines, fresh_keys);
done:
    Py_XDECREF(fr.got);
    fr.got = NULL;
    PyMem_RawFree(slots);
    PyMem_RawFree(dist);
    PyMem_RawFree(where);
    Py_XDECREF(ids);
    Py_XDECREF(fresh_lines);
    Py_XDECREF(fresh_keys);
    if (st != NULL) PyBuffer_Release(&stbuf);
    PyBuffer_Release(&buf);
    return result;
}

/* starts(data) -> (starts, longest): where each line of `data` (lines joined by "\n") starts, as
 * int64 bytes with one entry more than there are lines (len(data) + 1), and the longest line's
 * length. */
static PyObject *starts_of(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    const char *s = buf.buf;
    const Py_ssize_t n = buf.len;
    Py_ssize_t lines = 1;
    for (const char *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))) != NULL; p++) lines++;
    PyObject *res = PyBytes_FromStringAndSize(NULL, (lines + 1) * 8);
    if (res == NULL) { PyBuffer_Release(&buf); return NULL; }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(res);
    Py_ssize_t row = 0, a = 0, longest = 0;
    out[row++] = 0;
    for (const char *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))) != NULL; p++) {
        Py_ssize_t b = p - s;
        if (b - a > longest) longest = b - a;
        a = b + 1;
        out[row++] = a;
    }
    if (n - a > longest) longest = n - a;
    out[row] = n + 1;
    PyBuffer_Release(&buf);
    PyObject *pair = Py_BuildValue("(Nn)", res, longest);
    return pair;
}

static PyMethodDef METHODS[] = {
    {"keys", keys, METH_VARARGS, "Ids of the lines of a folded block in a dict of keys (new ones added)."},
    {"starts", starts_of, METH_VARARGS, "Where each line of a block starts, and the longest line's length."},
    {"fold", fold, METH_VARARGS, "Every line of a block with its variable tokens folded into <*>."},
    {"spans", spans_of, METH_VARARGS, "(start, end) of the variable tokens of one line; None if binary."},
    {"numbers", numbers, METH_VARARGS, "Values of the index-th variable token of several lines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_fold", NULL, -1, METHODS};

/* Blocks of a few MB are allocated and freed for every block of every rank file (the read, the
 * folded keys, their values and line starts). glibc gives allocations that big fresh pages of
 * their own (mmap) and hands freed memory back at once, so every block faulted its pages in again
 * (a fifth of the parse's CPU time). Kept in the heap instead, they are reused: up to
 * MALLOC_KEEP bytes of freed memory stay mapped. Not done where MALLOC_MMAP_THRESHOLD_ or
 * MALLOC_TRIM_THRESHOLD_ is set (the user's choice wins). */
#define MALLOC_KEEP (128 << 20)

static void keep_freed_blocks(void) {
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    if (getenv("MALLOC_MMAP_THRESHOLD_") == NULL && getenv("MALLOC_TRIM_THRESHOLD_") == NULL) {
        mallopt(M_MMAP_THRESHOLD, MALLOC_KEEP / 2);
        mallopt(M_TRIM_THRESHOLD, MALLOC_KEEP);
    }
#endif
}

PyMODINIT_FUNC PyInit__fold(void) {
    init_classes();
    keep_freed_blocks();
    init_maskbits();
    PyObject *m = PyModule_Create(&MODULE);
    if (m != NULL && PyModule_AddIntConstant(m, "FREE_STATE_SIZE", (long)sizeof(FreeState)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
