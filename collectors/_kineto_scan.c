/* Kineto trace events -> Arrow columns, without a Python object per event.
 *
 * The compiled counterpart of collectors.kineto_typed's msgspec reader (tier 0), for the pieces of whole events that
 * collectors.kineto_events.split_events hands on (a JSON array of events, "[" ... "]"). A Scanner parses each piece
 * into growing column buffers of the four tables (GPU ops, CUDA API calls, CPU ops, annotations) and counts the
 * events and their categories. It takes a piece only when it is sure of giving exactly what tier 0 gives for it:
 * anything it does not handle (a pid written as text, a key with an escape, an integer beyond 64 bits, a timestamp
 * beyond float64's ns resolution, a missing name / ts / dur, invalid JSON, ...) makes feed() return False with the
 * piece rolled back, and tier 0 decodes that piece (collectors.kineto_typed.typed_stream). So it can only be
 * faster, never different: tests/collectors/test_kineto_scan.py holds the two to the same tables.
 *
 * The rules are tier 0's (msgspec structs declared in kineto_typed.py):
 *  - every event is an object whose "ph" is one of the Trace Event Format's phases, with "cat" text or null;
 *  - a complete event ("ph": "X") has name: text or null, pid / tid: integer, text or null, ts / dur: number or
 *    null, args: object or null, whose declared keys hold integers (lists of them for grid and block), or text
 *    for "Collective name" (and "dtype" where the piece has a collective kernel); other keys and values are
 *    skipped, but must be valid JSON;
 *  - the collective's other arguments are read only in a piece where a GPU op has a "Collective name".
 * Columns leave through the Arrow C data interface (flush()), which polars imports without a copy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- buffers */
typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t c = b->cap ? b->cap : 1024;
    while (c < b->len + extra) c *= 2;
    char *q = realloc(b->p, c);
    if (!q) return -1;
    b->p = q;
    b->cap = c;
    return 0;
}

static void buf_free(Buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---------------------------------------------------------------------------------------------- columns */
enum { T_I64, T_I32, T_F64, T_STR };

typedef struct {
    int type;
    Buf data;  /* values; for T_STR the UTF-8 bytes of the strings longer than 12 bytes */
    Buf views; /* T_STR: Arrow string views, 16 bytes a row (length, then the string itself when it has at most
                * 12 bytes, else its first 4 bytes, buffer 0 and its offset in data) */
    Buf valid; /* one byte per row */
    size_t nulls;
    size_t start_data; /* T_STR: data.len when the piece being read began (what a rollback returns to) */
} Col;

enum { G_GPU, G_API, G_CPU, G_ANN, N_GROUPS };

/* the columns of each group, in tier 0's order (kineto_typed._group_columns) */
enum {
    C_KIND, C_NAME, C_PID, C_TID, C_TS, C_DUR, C_DEVICE, C_STREAM, C_CORR, C_EXT, C_EXT_LC, C_GX, C_GY, C_GZ, C_BX,
    C_BY, C_BZ, C_REGS, C_SMEM, C_BYTES, C_COLL, C_IN, C_OUT, C_DTYPE, C_GSIZE, N_COLS
};
static const char *COL_NAMES[N_COLS] = {
    "kind", "name", "pid", "tid", "ts", "dur", "device", "stream", "correlation", "external_id", "external_id_lc",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread", "shared_memory_bytes",
    "bytes", "collective", "comm_in_nelems", "comm_out_nelems", "comm_dtype", "comm_group_size"};
static const int COL_TYPES[N_COLS] = {
    T_STR, T_STR, T_I64, T_I64, T_F64, T_F64, T_I64, T_I64, T_I64, T_I64, T_I64, T_I32, T_I32, T_I32, T_I32,
    T_I32, T_I32, T_I64, T_I64, T_I64, T_STR, T_I64, T_I64, T_STR, T_I64};
static const int GPU_COLS[] = {C_KIND, C_NAME, C_PID, C_TID, C_TS, C_DUR, C_DEVICE, C_STREAM, C_CORR, C_EXT,
                               C_EXT_LC, C_GX, C_GY, C_GZ, C_BX, C_BY, C_BZ, C_REGS, C_SMEM, C_BYTES, C_COLL, C_IN,
                               C_OUT, C_DTYPE, C_GSIZE, -1};
static const int API_COLS[] = {C_NAME, C_PID, C_TID, C_TS, C_DUR, C_CORR, C_EXT, C_EXT_LC, -1};
static const int CPU_COLS[] = {C_NAME, C_PID, C_TID, C_TS, C_DUR, C_EXT, C_EXT_LC, -1};
static const int ANN_COLS[] = {C_NAME, C_PID, C_TID, C_TS, C_DUR, -1};
static const int *GROUP_COLS[N_GROUPS] = {GPU_COLS, API_COLS, CPU_COLS, ANN_COLS};
static const char *GROUP_NAMES[N_GROUPS] = {"gpu", "api", "cpu", "ann"};

typedef struct {
    size_t n;
    Col cols[N_COLS]; /* only the group's own are used */
} Group;

/* ---------------------------------------------------------------------------------------------- categories */
#define MAX_CATS 64
typedef struct {
    char *text; /* NULL: no category (missing or null) */
    size_t len;
    int group;  /* G_* or -1 */
    int kind;   /* GPU ops: 0 kernel, 1 memcpy, 2 memset */
} Cat;

static const char *KIND_TEXT[3] = {"kernel", "memcpy", "memset"};

static void cat_group(const char *s, size_t n, int *group, int *kind) {
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(s, lit, n) == 0)
    *kind = 0;
    *group = -1;
    if (IS("kernel") || IS("Kernel")) *group = G_GPU;
    else if (IS("gpu_memcpy") || IS("Memcpy")) *group = G_GPU, *kind = 1;
    else if (IS("gpu_memset") || IS("Memset")) *group = G_GPU, *kind = 2;
    else if (IS("cuda_runtime") || IS("cuda_driver") || IS("Runtime")) *group = G_API;
    else if (IS("cpu_op") || IS("Operator")) *group = G_CPU;
    else if (IS("user_annotation")) *group = G_ANN;
#undef IS
}

/* ---------------------------------------------------------------------------------------------- the scanner */
typedef struct {
    PyObject_HEAD
    Group groups[N_GROUPS];
    Cat cats[MAX_CATS];
    long long cat_counts[MAX_CATS];
    int n_cats;
    long long n_events;
    /* the piece being read: what to roll back to */
    size_t start_rows[N_GROUPS];
    long long start_counts[MAX_CATS];
    int start_n_cats;
    long long start_events;
    int piece_has_coll, piece_big_ts, piece_frac_ts;
} Scanner;

/* why a piece was refused (for tests and findings) */
static const char *refusal = "";

/* ---------------------------------------------------------------------------------------------- JSON */
typedef struct {
    const unsigned char *p, *end;
    int depth;
} Cur;

#define REFUSE(why)          \
    do {                     \
        refusal = (why);     \
        return -1;           \
    } while (0)

/* bytes that need no look inside a string: printable ASCII but the quote and the backslash */
static unsigned char PLAIN[256];
static unsigned char SPACE[256];

static void init_tables(void) {
    for (int i = 0x20; i < 0x80; i++) PLAIN[i] = i != '"' && i != '\\';
    SPACE[' '] = SPACE['\n'] = SPACE['\r'] = SPACE['\t'] = 1;
}

static inline void ws(Cur *c) {
    while (c->p < c->end && SPACE[*c->p]) c->p++;
}

/* A string's text (c->p at its opening quote): *s, *n the raw bytes between the quotes, *esc whether it has
 * escapes. Validates escapes and control characters; utf8: also that the bytes are UTF-8. */
static int str_span(Cur *c, const unsigned char **s, size_t *n, int *esc, int utf8) {
    const unsigned char *p = c->p + 1, *end = c->end;
    *esc = 0;
    *s = p;
    for (;;) {
        /* fast scan over plain ASCII, eight bytes at a time: a word with no quote, backslash, control character or
         * byte >= 0x80 (SWAR: a byte's high bit set in `hit` marks one) */
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
            uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
            uint64_t hit = ((q - ones) & ~q) | ((b - ones) & ~b) | (w - ones * 0x20) | w;
            if (hit & highs) break;
            p += 8;
        }
        while (p < end && PLAIN[*p]) p++;
        if (p >= end) REFUSE("a string runs past the piece");
        unsigned char ch = *p;
        if (ch == '"') break;
        if (ch < 0x20) REFUSE("a control character in a string");
        if (ch == '\\') {
            *esc = 1;
            if (p + 1 >= end) REFUSE("a string runs past the piece");
            unsigned char e = p[1];
            if (e == 'u') {
                if (p + 6 > end) REFUSE("a string runs past the piece");
                for (int i = 2; i < 6; i++)
                    if (!isxdigit(p[i])) REFUSE("a bad \\u escape");
                p += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                p += 2;
            } else {
                REFUSE("a bad escape");
            }
            continue;
        }
        /* a byte >= 0x80 */
        if (!utf8) {
            p++;
            continue;
        }
        int len;
        uint32_t cp;
        if (ch >= 0xC2 && ch <= 0xDF) len = 2, cp = ch & 0x1F;
        else if (ch >= 0xE0 && ch <= 0xEF) len = 3, cp = ch & 0x0F;
        else if (ch >= 0xF0 && ch <= 0xF4) len = 4, cp = ch & 0x07;
        else REFUSE("text that is not UTF-8");
        if (p + len > end) REFUSE("text that is not UTF-8");
        for (int i = 1; i < len; i++) {
            if ((p[i] & 0xC0) != 0x80) REFUSE("text that is not UTF-8");
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            REFUSE("text that is not UTF-8");
        p += len;
    }
    *n = (size_t)(p - *s);
    c->p = p + 1;
    return 0;
}

static int hexval(unsigned char h) {
    return h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10;
}

/* The text of a string with escapes, as UTF-8, appended to b. */
static int unescape(const unsigned char *s, size_t n, Buf *b) {
    if (buf_reserve(b, n + 4)) return -2;
    const unsigned char *end = s + n;
    char *o = b->p + b->len;
    while (s < end) {
        if (*s != '\\') {
            *o++ = (char)*s++;
            continue;
        }
        unsigned char e = s[1];
        s += 2;
        switch (e) {
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                uint32_t cp = (hexval(s[0]) << 12) | (hexval(s[1]) << 8) | (hexval(s[2]) << 4) | hexval(s[3]);
                s += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (end - s < 6 || s[0] != '\\' || s[1] != 'u') REFUSE("a lone surrogate");
                    for (int i = 2; i < 6; i++)
                        if (!isxdigit(s[i])) REFUSE("a bad \\u escape");
                    uint32_t lo = (hexval(s[2]) << 12) | (hexval(s[3]) << 8) | (hexval(s[4]) << 4) | hexval(s[5]);
                    if (lo < 0xDC00 || lo > 0xDFFF) REFUSE("a lone surrogate");
                    s += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    REFUSE("a lone surrogate");
                }
                if (cp < 0x80) *o++ = (char)cp;
                else if (cp < 0x800) *o++ = (char)(0xC0 | (cp >> 6)), *o++ = (char)(0x80 | (cp & 0x3F));
                else if (cp < 0x10000)
                    *o++ = (char)(0xE0 | (cp >> 12)), *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)),
                    *o++ = (char)(0x80 | (cp & 0x3F));
                else
                    *o++ = (char)(0xF0 | (cp >> 18)), *o++ = (char)(0x80 | ((cp >> 12) & 0x3F)),
                    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)), *o++ = (char)(0x80 | (cp & 0x3F));
                break;
            }
            default: *o++ = (char)e; /* " \ / */
        }
    }
    b->len = (size_t)(o - b->p);
    return 0;
}

/* A number's token (JSON's grammar): *is_int when it has no fraction and no exponent. */
static int num_span(Cur *c, const unsigned char **s, size_t *n, int *is_int) {
    const unsigned char *p = c->p, *end = c->end;
    *s = p;
    *is_int = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) REFUSE("a bad number");
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (p < end && *p >= '0' && *p <= '9') p++;
    else REFUSE("a bad value");
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') REFUSE("a bad number");
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') REFUSE("a bad number");
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    *n = (size_t)(p - *s);
    c->p = p;
    return 0;
}

/* An integer token -> int64; refuses beyond 18 digits (msgspec gives Python ints there, which the tables refuse). */
static int tok_int(const unsigned char *s, size_t n, int64_t *v) {
    int neg = 0;
    if (*s == '-') neg = 1, s++, n--;
    if (n > 18) REFUSE("an integer beyond 64 bits");
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) x = x * 10 + (s[i] - '0');
    *v = neg ? -x : x;
    return 0;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int tok_float(const unsigned char *s, size_t n, double *v) {
    /* Clinger's fast path: digits d.ddd with at most 2**53 as an integer m and k <= 22 decimals are m / 10**k,
     * both exact in float64, so the one division is correctly rounded (as strtod and msgspec round) */
    {
        const unsigned char *p = s, *e = s + n;
        int neg = 0, k = 0, seen_dot = 0;
        uint64_t m = 0;
        size_t nd = 0;
        if (*p == '-') neg = 1, p++;
        for (; p < e; p++) {
            if (*p >= '0' && *p <= '9') {
                if (++nd > 19) break;
                m = m * 10 + (uint64_t)(*p - '0');
                k += seen_dot;
            } else if (*p == '.') {
                seen_dot = 1;
            } else {
                break;
            }
        }
        if (p == e && m <= (UINT64_C(1) << 53) && k <= 22) {
            double x = (double)m / POW10[k];
            *v = neg ? -x : x;
            return 0;
        }
    }
    char tmp[64];
    if (n >= sizeof tmp) REFUSE("a number of more than 63 characters");
    memcpy(tmp, s, n);
    tmp[n] = 0;
    *v = strtod(tmp, NULL);
    if (!isfinite(*v)) REFUSE("a number out of float64's range");
    return 0;
}

static int lit(Cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) REFUSE("a bad value");
    c->p += n;
    return 0;
}

/* Any JSON value, checked and skipped. */
static int skip_value(Cur *c) {
    ws(c);
    if (c->p >= c->end) REFUSE("a value runs past the piece");
    const unsigned char *s;
    size_t n;
    int f;
    switch (*c->p) {
        case '"': return str_span(c, &s, &n, &f, 0);
        case 't': return lit(c, "true", 4);
        case 'f': return lit(c, "false", 5);
        case 'n': return lit(c, "null", 4);
        case '{': case '[': {
            unsigned char close = *c->p == '{' ? '}' : ']';
            int obj = close == '}';
            if (++c->depth > 64) REFUSE("values nested more than 64 deep");
            c->p++;
            ws(c);
            if (c->p < c->end && *c->p == close) {
                c->p++;
                c->depth--;
                return 0;
            }
            for (;;) {
                if (obj) {
                    ws(c);
                    if (c->p >= c->end || *c->p != '"') REFUSE("a bad object");
                    if (str_span(c, &s, &n, &f, 0)) return -1;
                    ws(c);
                    if (c->p >= c->end || *c->p != ':') REFUSE("a bad object");
                    c->p++;
                }
                if (skip_value(c)) return -1;
                ws(c);
                if (c->p >= c->end) REFUSE("a value runs past the piece");
                if (*c->p == ',') {
                    c->p++;
                    continue;
                }
                if (*c->p == close) {
                    c->p++;
                    c->depth--;
                    return 0;
                }
                REFUSE(obj ? "a bad object" : "a bad array");
            }
        }
        default: return num_span(c, &s, &n, &f);
    }
}

/* ---------------------------------------------------------------------------------------------- one event */
typedef struct {
    int has;
    int64_t v;
} OptI;

typedef struct {
    int has;
    const unsigned char *s;
    size_t n;
    int esc;
} OptS;

enum { A_EXT, A_DEVICE, A_STREAM, A_CORR, A_REGS, A_SMEM, A_BYTES, A_EXT_LC, A_IN, A_OUT, A_GSIZE, N_AINT };
enum { B_DTYPE = 1 << 12, B_GRID = 1 << 13, B_BLOCK = 1 << 14, B_COLL = 1 << 15 };

typedef struct {
    int ph_x;    /* -1: no "ph" yet, 0: another phase, 1: complete */
    OptS cat, name, coll, dtype;
    OptI pid, tid;
    int has_ts, has_dur;
    double ts, dur;
    OptI a[N_AINT];
    int grid_n, block_n; /* -1: none */
    int64_t grid[3], block[3];
    unsigned seen, seen_args;
    int id_text; /* pid or tid written as text that tier 0 may read otherwise */
} Ev;

enum { K_PH = 1, K_CAT = 2, K_NAME = 4, K_PID = 8, K_TID = 16, K_TS = 32, K_DUR = 64, K_ARGS = 128 };

static const char *PHASES = "XBEiICbnestfPNODMVvRc()"; /* "X" and kineto_typed._PHASES */

static int is_null(Cur *c) {
    return c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0;
}

/* an optional integer (null allowed) */
static int opt_int(Cur *c, OptI *o) {
    ws(c);
    if (is_null(c)) {
        c->p += 4;
        o->has = 0;
        return 0;
    }
    const unsigned char *s;
    size_t n;
    int is_int;
    if (c->p >= c->end || (*c->p != '-' && (*c->p < '0' || *c->p > '9'))) REFUSE("an integer field holds another type");
    if (num_span(c, &s, &n, &is_int)) return -1;
    if (!is_int) REFUSE("an integer field holds a fraction or an exponent");
    if (tok_int(s, n, &o->v)) return -1;
    o->has = 1;
    return 0;
}

static int opt_float(Cur *c, int *has, double *v) {
    ws(c);
    if (is_null(c)) {
        c->p += 4;
        *has = 0;
        return 0;
    }
    const unsigned char *s;
    size_t n;
    int is_int;
    if (c->p >= c->end || (*c->p != '-' && (*c->p < '0' || *c->p > '9'))) REFUSE("a number field holds another type");
    if (num_span(c, &s, &n, &is_int)) return -1;
    if (is_int && n > 15) { /* an epoch timestamp in whole µs: exact up to 2**53 */
        int64_t x;
        if (tok_int(s, n, &x)) return -1;
        if (x > (INT64_C(1) << 53) || x < -(INT64_C(1) << 53)) REFUSE("an integer beyond 2**53 in a float field");
        *v = (double)x;
    } else if (tok_float(s, n, v)) {
        return -1;
    }
    *has = 1;
    return 0;
}

static int opt_str(Cur *c, OptS *o) {
    ws(c);
    if (is_null(c)) {
        c->p += 4;
        o->has = 0;
        return 0;
    }
    if (c->p >= c->end || *c->p != '"') REFUSE("a text field holds another type");
    if (str_span(c, &o->s, &o->n, &o->esc, 1)) return -1;
    o->has = 1;
    return 0;
}

/* [x, y, z ...] integers: the first three kept (int32), the count in *n; null: *n = -1 */
static int dims(Cur *c, int *n, int64_t *v) {
    ws(c);
    if (is_null(c)) {
        c->p += 4;
        *n = -1;
        return 0;
    }
    if (c->p >= c->end || *c->p != '[') REFUSE("grid or block is not a list");
    c->p++;
    *n = 0;
    ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 0;
    }
    for (;;) {
        OptI x;
        if (opt_int(c, &x)) return -1;
        if (!x.has) REFUSE("grid or block holds a null");
        if (x.v < INT32_MIN || x.v > INT32_MAX) REFUSE("grid or block beyond 32 bits");
        if (*n < 3) v[*n] = x.v;
        (*n)++;
        ws(c);
        if (c->p >= c->end) REFUSE("a list runs past the piece");
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == ']') {
            c->p++;
            return 0;
        }
        REFUSE("a bad array");
    }
}

#define KEY_IS(lit) (kn == sizeof(lit) - 1 && memcmp(k, lit, kn) == 0)

static int parse_args(Cur *c, Ev *e) {
    ws(c);
    if (is_null(c)) {
        c->p += 4;
        return 0;
    }
    if (c->p >= c->end || *c->p != '{') REFUSE("args is not an object");
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        const unsigned char *k;
        size_t kn;
        int esc;
        ws(c);
        if (c->p >= c->end || *c->p != '"') REFUSE("a bad object");
        if (str_span(c, &k, &kn, &esc, 0)) return -1;
        if (esc) REFUSE("a key with an escape");
        ws(c);
        if (c->p >= c->end || *c->p != ':') REFUSE("a bad object");
        c->p++;
        int slot = -1, bit = 0, r = 0;
        if (KEY_IS("External id")) slot = A_EXT;
        else if (KEY_IS("device")) slot = A_DEVICE;
        else if (KEY_IS("stream")) slot = A_STREAM;
        else if (KEY_IS("correlation")) slot = A_CORR;
        else if (KEY_IS("registers per thread")) slot = A_REGS;
        else if (KEY_IS("shared memory")) slot = A_SMEM;
        else if (KEY_IS("grid")) bit = B_GRID;
        else if (KEY_IS("block")) bit = B_BLOCK;
        else if (KEY_IS("bytes")) slot = A_BYTES;
        else if (KEY_IS("external id")) slot = A_EXT_LC;
        else if (KEY_IS("Collective name")) bit = B_COLL;
        else if (KEY_IS("In msg nelems")) slot = A_IN;
        else if (KEY_IS("Out msg nelems")) slot = A_OUT;
        else if (KEY_IS("dtype")) bit = B_DTYPE;
        else if (KEY_IS("Group size")) slot = A_GSIZE;
        if (slot >= 0) bit = 1 << slot;
        if (bit) {
            if (e->seen_args & bit) REFUSE("an argument given twice");
            e->seen_args |= bit;
        }
        if (slot >= 0) r = opt_int(c, &e->a[slot]);
        else if (bit == B_DTYPE) r = opt_str(c, &e->dtype);
        else if (bit == B_GRID) r = dims(c, &e->grid_n, e->grid);
        else if (bit == B_BLOCK) r = dims(c, &e->block_n, e->block);
        else if (bit == B_COLL) r = opt_str(c, &e->coll);
        else r = skip_value(c);
        if (r) return -1;
        ws(c);
        if (c->p >= c->end) REFUSE("an object runs past the piece");
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            return 0;
        }
        REFUSE("a bad object");
    }
}

/* a pid / tid written as text -> *o as polars' strict=False cast to Int64 gives it, or *unsure */
static void text_id(const OptS *t, OptI *o, int *unsure) {
    o->has = 0;
    size_t i = 0, digits = 0;
    int other = 0;
    for (size_t j = 0; j < t->n; j++) {
        unsigned char ch = t->s[j];
        if (ch >= '0' && ch <= '9') digits++;
        else if (ch != '+' && ch != '-') other = 1;
    }
    if (t->esc) {
        *unsure = 1;
        return;
    }
    if (other) return; /* a letter, space, dot ...: not an integer, null */
    if (t->n && t->s[0] == '-') i = 1;
    if (digits == t->n - i && digits >= 1 && digits <= 18) {
        int64_t x = 0;
        for (; i < t->n; i++) x = x * 10 + (t->s[i] - '0');
        o->v = t->s[0] == '-' ? -x : x;
        o->has = 1;
        return;
    }
    *unsure = 1; /* "+5", "", more digits than int64 holds ... */
}

/* One event (c->p at its "{") into *e. Fields of a complete event that do not meet tier 0's types refuse the
 * piece; a key after "ph" said it is another phase is only skipped. */
static int parse_event(Cur *c, Ev *e) {
    memset(e, 0, sizeof *e);
    e->ph_x = -1;
    e->grid_n = e->block_n = -1;
    if (c->p >= c->end || *c->p != '{') REFUSE("an event is not an object");
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') REFUSE("an event without \"ph\"");
    for (;;) {
        const unsigned char *k;
        size_t kn;
        int esc, r = 0, bit = 0;
        ws(c);
        if (c->p >= c->end || *c->p != '"') REFUSE("a bad object");
        if (str_span(c, &k, &kn, &esc, 0)) return -1;
        if (esc) REFUSE("a key with an escape");
        ws(c);
        if (c->p >= c->end || *c->p != ':') REFUSE("a bad object");
        c->p++;
        if (KEY_IS("ph")) bit = K_PH;
        else if (KEY_IS("cat")) bit = K_CAT;
        else if (e->ph_x != 0) {
            if (KEY_IS("name")) bit = K_NAME;
            else if (KEY_IS("pid")) bit = K_PID;
            else if (KEY_IS("tid")) bit = K_TID;
            else if (KEY_IS("ts")) bit = K_TS;
            else if (KEY_IS("dur")) bit = K_DUR;
            else if (KEY_IS("args")) bit = K_ARGS;
        }
        if (bit & e->seen) REFUSE("a key given twice");
        e->seen |= bit;
        switch (bit) {
            case K_PH: {
                OptS ph;
                ws(c);
                if (c->p >= c->end || *c->p != '"') REFUSE("\"ph\" is not text");
                if (str_span(c, &ph.s, &ph.n, &ph.esc, 1)) return -1;
                if (ph.esc || ph.n != 1 || !strchr(PHASES, ph.s[0]) || !ph.s[0]) REFUSE("an unknown \"ph\"");
                e->ph_x = ph.s[0] == 'X';
                break;
            }
            case K_CAT: r = opt_str(c, &e->cat); if (!r && e->cat.has && e->cat.esc) REFUSE("a category with an escape"); break;
            case K_NAME: r = opt_str(c, &e->name); break;
            case K_PID: case K_TID: {
                OptI *o = bit == K_PID ? &e->pid : &e->tid;
                ws(c);
                if (c->p < c->end && *c->p == '"') {
                    /* text ("Spans", "stream 7"): tier 0 casts it as polars does (kineto_typed._ident): digits to
                     * their number, text that cannot be an integer to null; anything in between is left to it */
                    OptS t;
                    r = opt_str(c, &t);
                    if (!r) text_id(&t, o, &e->id_text);
                } else {
                    r = opt_int(c, o);
                }
                break;
            }
            case K_TS: r = opt_float(c, &e->has_ts, &e->ts); break;
            case K_DUR: r = opt_float(c, &e->has_dur, &e->dur); break;
            case K_ARGS: r = parse_args(c, e); break;
            default: r = skip_value(c);
        }
        if (r) return -1;
        ws(c);
        if (c->p >= c->end) REFUSE("an event runs past the piece");
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            break;
        }
        REFUSE("a bad object");
    }
    if (e->ph_x < 0) REFUSE("an event without \"ph\"");
    return 0;
}

/* ---------------------------------------------------------------------------------------------- rows */
static int put_valid(Col *col, int ok) {
    if (buf_reserve(&col->valid, 1)) return -2;
    col->valid.p[col->valid.len++] = (char)(ok != 0);
    if (!ok) col->nulls++;
    return 0;
}

static int put_i64(Col *col, int has, int64_t v) {
    if (buf_reserve(&col->data, 8)) return -2;
    if (!has) v = 0;
    memcpy(col->data.p + col->data.len, &v, 8);
    col->data.len += 8;
    return put_valid(col, has);
}

static int put_i32(Col *col, int has, int64_t v) {
    int32_t x = has ? (int32_t)v : 0;
    if (buf_reserve(&col->data, 4)) return -2;
    memcpy(col->data.p + col->data.len, &x, 4);
    col->data.len += 4;
    return put_valid(col, has);
}

static int put_f64(Col *col, double v) {
    if (buf_reserve(&col->data, 8)) return -2;
    memcpy(col->data.p + col->data.len, &v, 8);
    col->data.len += 8;
    return put_valid(col, 1);
}

/* A string as an Arrow view (Utf8View): no offsets to keep beside it, and short strings (the kinds, most API
 * names' prefixes aside) take no data bytes at all. A column whose long strings pass 2 GiB (a view's offset is a
 * 32-bit integer) is refused: the piece goes to tier 0. */
static int put_str(Col *col, int has, const unsigned char *s, size_t n, int esc) {
    unsigned char v[16] = {0};
    if (buf_reserve(&col->views, 16)) return -2;
    if (has) {
        size_t start = col->data.len;
        if (esc) { /* unescaped into data first; a short result moves into the view */
            int r = unescape(s, n, &col->data);
            if (r) return r;
            n = col->data.len - start;
            s = (const unsigned char *)col->data.p + start;
        }
        if (n > 0x7fffffffu || start > 0x7fffffffu - n) {
            col->data.len = start;
            REFUSE("a column's strings beyond 2 GiB");
        }
        int32_t len = (int32_t)n;
        memcpy(v, &len, 4);
        if (n <= 12) {
            memcpy(v + 4, s, n);
            col->data.len = start; /* an unescaped short string leaves data as it was */
        } else {
            if (!esc) {
                if (buf_reserve(&col->data, n)) return -2;
                memcpy(col->data.p + start, s, n);
                col->data.len = start + n;
                s = (const unsigned char *)col->data.p + start;
            }
            int32_t off = (int32_t)start;
            memcpy(v + 4, s, 4); /* prefix; buffer index 0 stays 0 */
            memcpy(v + 12, &off, 4);
        }
    }
    memcpy(col->views.p + col->views.len, v, 16);
    col->views.len += 16;
    return put_valid(col, has);
}

static int add_row(Scanner *sc, const Ev *e, const Cat *cat) {
    Group *g = &sc->groups[cat->group];
    if (!e->name.has) REFUSE("an event without a name");
    if (!e->has_ts || !e->has_dur) REFUSE("an event without ts or dur");
    if (e->id_text) REFUSE("a pid or tid written as text that may be an integer");
    /* tier 0 reads a piece's timestamps as text when one is beyond float64's ns resolution (2**43 µs) and one has
     * a fraction (kineto_events.needs_text): such a piece is left to it */
    if (fabs(e->ts) >= 8796093022208.0) sc->piece_big_ts = 1;
    if (e->ts != floor(e->ts)) sc->piece_frac_ts = 1;
    int r = 0;
    for (const int *ci = GROUP_COLS[cat->group]; *ci >= 0 && !r; ci++) {
        Col *col = &g->cols[*ci];
        switch (*ci) {
            case C_KIND: {
                const char *t = KIND_TEXT[cat->kind];
                r = put_str(col, 1, (const unsigned char *)t, strlen(t), 0);
                break;
            }
            case C_NAME: r = put_str(col, 1, e->name.s, e->name.n, e->name.esc); break;
            case C_PID: r = put_i64(col, e->pid.has, e->pid.v); break;
            case C_TID: r = put_i64(col, e->tid.has, e->tid.v); break;
            case C_TS: r = put_f64(col, e->ts); break;
            case C_DUR: r = put_f64(col, e->dur); break;
            case C_DEVICE: r = put_i64(col, e->a[A_DEVICE].has, e->a[A_DEVICE].v); break;
            case C_STREAM: r = put_i64(col, e->a[A_STREAM].has, e->a[A_STREAM].v); break;
            case C_CORR: r = put_i64(col, e->a[A_CORR].has, e->a[A_CORR].v); break;
            case C_EXT: r = put_i64(col, e->a[A_EXT].has, e->a[A_EXT].v); break;
            case C_EXT_LC: r = put_i64(col, e->a[A_EXT_LC].has, e->a[A_EXT_LC].v); break;
            case C_GX: case C_GY: case C_GZ: {
                int i = *ci - C_GX;
                r = put_i32(col, e->grid_n > i, e->grid[i]);
                break;
            }
            case C_BX: case C_BY: case C_BZ: {
                int i = *ci - C_BX;
                r = put_i32(col, e->block_n > i, e->block[i]);
                break;
            }
            case C_REGS: r = put_i64(col, e->a[A_REGS].has, e->a[A_REGS].v); break;
            case C_SMEM: r = put_i64(col, e->a[A_SMEM].has, e->a[A_SMEM].v); break;
            case C_BYTES: r = put_i64(col, e->a[A_BYTES].has, e->a[A_BYTES].v); break;
            case C_COLL: r = put_str(col, e->coll.has, e->coll.s, e->coll.n, e->coll.esc); break;
            case C_IN: r = put_i64(col, e->a[A_IN].has, e->a[A_IN].v); break;
            case C_OUT: r = put_i64(col, e->a[A_OUT].has, e->a[A_OUT].v); break;
            case C_DTYPE: r = put_str(col, e->dtype.has, e->dtype.s, e->dtype.n, e->dtype.esc); break;
            case C_GSIZE: r = put_i64(col, e->a[A_GSIZE].has, e->a[A_GSIZE].v); break;
        }
    }
    if (r) return r;
    g->n++;
    return 0;
}

/* the category's entry (added when new); NULL when there are more than MAX_CATS */
static Cat *find_cat(Scanner *sc, const OptS *s, int *idx) {
    for (int i = 0; i < sc->n_cats; i++) {
        Cat *t = &sc->cats[i];
        if (s->has ? (t->text && t->len == s->n && memcmp(t->text, s->s, s->n) == 0) : !t->text) {
            *idx = i;
            return t;
        }
    }
    if (sc->n_cats == MAX_CATS) return NULL;
    Cat *t = &sc->cats[sc->n_cats];
    t->text = NULL;
    t->len = 0;
    t->group = -1;
    t->kind = 0;
    if (s->has) {
        t->text = malloc(s->n ? s->n : 1);
        if (!t->text) return NULL;
        memcpy(t->text, s->s, s->n);
        t->len = s->n;
        cat_group(t->text, t->len, &t->group, &t->kind);
    }
    sc->cat_counts[sc->n_cats] = 0;
    *idx = sc->n_cats++;
    return t;
}

/* ---------------------------------------------------------------------------------------------- rollback */
static void truncate_col(Col *col, int type, size_t n) {
    if (col->valid.len <= n) return;
    for (size_t i = n; i < col->valid.len; i++) col->nulls -= col->valid.p[i] == 0;
    col->valid.len = n;
    switch (type) {
        case T_I64: case T_F64: col->data.len = n * 8; break;
        case T_I32: col->data.len = n * 4; break;
        case T_STR: /* n is the row the piece began at (rollback) */
            col->data.len = col->start_data;
            col->views.len = n * 16;
            break;
    }
}

static void rollback(Scanner *sc) {
    for (int g = 0; g < N_GROUPS; g++) {
        for (const int *ci = GROUP_COLS[g]; *ci >= 0; ci++)
            truncate_col(&sc->groups[g].cols[*ci], COL_TYPES[*ci], sc->start_rows[g]);
        sc->groups[g].n = sc->start_rows[g];
    }
    for (int i = sc->start_n_cats; i < sc->n_cats; i++) free(sc->cats[i].text);
    sc->n_cats = sc->start_n_cats;
    memcpy(sc->cat_counts, sc->start_counts, sizeof sc->cat_counts);
    sc->n_events = sc->start_events;
}

/* where the piece has no GPU op with a collective name, tier 0 does not read the collective's other arguments */
static void drop_comm(Scanner *sc) {
    Group *g = &sc->groups[G_GPU];
    static const int comm[] = {C_IN, C_OUT, C_DTYPE, C_GSIZE};
    for (int j = 0; j < 4; j++) {
        Col *col = &g->cols[comm[j]];
        for (size_t i = sc->start_rows[G_GPU]; i < g->n; i++) {
            if (col->valid.p[i]) {
                col->valid.p[i] = 0;
                col->nulls++;
            }
        }
    }
}

static int scan_piece(Scanner *sc, const unsigned char *p, size_t n) {
    Cur c = {p, p + n, 0};
    Ev e;
    ws(&c);
    if (c.p >= c.end || *c.p != '[') REFUSE("a piece is not an array");
    c.p++;
    ws(&c);
    if (c.p < c.end && *c.p == ']') {
        c.p++;
    } else {
        for (;;) {
            ws(&c);
            if (parse_event(&c, &e)) return -1;
            int idx;
            Cat *cat = find_cat(sc, &e.cat, &idx);
            if (!cat) REFUSE("more than 64 categories");
            sc->cat_counts[idx]++;
            sc->n_events++;
            if (e.ph_x == 1) {
                if (cat->group >= 0) {
                    int r = add_row(sc, &e, cat);
                    if (r) return r;
                    if (cat->group == G_GPU && e.coll.has) sc->piece_has_coll = 1;
                }
            }
            ws(&c);
            if (c.p >= c.end) REFUSE("the array runs past the piece");
            if (*c.p == ',') {
                c.p++;
                continue;
            }
            if (*c.p == ']') {
                c.p++;
                break;
            }
            REFUSE("a bad array");
        }
    }
    ws(&c);
    if (c.p != c.end) REFUSE("text after the array");
    return 0;
}

/* ---------------------------------------------------------------------------------------------- Python API */
static PyObject *Scanner_feed(Scanner *sc, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    for (int g = 0; g < N_GROUPS; g++) {
        sc->start_rows[g] = sc->groups[g].n;
        for (const int *ci = GROUP_COLS[g]; *ci >= 0; ci++) sc->groups[g].cols[*ci].start_data = sc->groups[g].cols[*ci].data.len;
    }
    memcpy(sc->start_counts, sc->cat_counts, sizeof sc->cat_counts);
    sc->start_n_cats = sc->n_cats;
    sc->start_events = sc->n_events;
    sc->piece_has_coll = sc->piece_big_ts = sc->piece_frac_ts = 0;
    refusal = "";
    int r = scan_piece(sc, view.buf, (size_t)view.len);
    if (!r && sc->piece_big_ts && sc->piece_frac_ts) {
        refusal = "timestamps beyond float64's ns resolution, with fractions";
        r = -1;
    }
    PyBuffer_Release(&view);
    if (r == -2) {
        rollback(sc);
        return PyErr_NoMemory();
    }
    if (r) {
        rollback(sc);
        Py_RETURN_FALSE;
    }
    if (!sc->piece_has_coll) drop_comm(sc);
    Py_RETURN_TRUE;
}

static PyObject *Scanner_refusal(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyUnicode_FromString(refusal);
}

/* --- Arrow C data interface */
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

#define ARROW_FLAG_NULLABLE 2

static void release_schema(struct ArrowSchema *s) {
    free((void *)s->name);
    s->release = NULL;
}

typedef struct {
    void *bufs[4];
    const void *ptrs[4];
} ArrayPrivate;

static void release_array(struct ArrowArray *a) {
    ArrayPrivate *pd = a->private_data;
    for (int i = 0; i < 4; i++) free(pd->bufs[i]);
    free(pd);
    a->release = NULL;
}

static void capsule_schema_free(PyObject *cap) {
    struct ArrowSchema *s = PyCapsule_GetPointer(cap, "arrow_schema");
    if (s) {
        if (s->release) s->release(s);
        free(s);
    }
}

static void capsule_array_free(PyObject *cap) {
    struct ArrowArray *a = PyCapsule_GetPointer(cap, "arrow_array");
    if (a) {
        if (a->release) a->release(a);
        free(a);
    }
}

/* A column's buffers handed to a (schema, array) capsule pair; the column is left empty. */
static PyObject *export_col(Col *col, int type, const char *name, size_t n) {
    static const char *formats[] = {"l", "i", "g", "vu"};
    struct ArrowSchema *s = calloc(1, sizeof *s);
    struct ArrowArray *a = calloc(1, sizeof *a);
    ArrayPrivate *pd = calloc(1, sizeof *pd);
    char *nm = strdup(name);
    uint8_t *bits = NULL;
    if (col->nulls) {
        bits = calloc((n + 7) / 8 + 1, 1);
        if (bits)
            for (size_t i = 0; i < n; i++)
                if (col->valid.p[i]) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    if (!s || !a || !pd || !nm || (col->nulls && !bits)) {
        free(s), free(a), free(pd), free(nm), free(bits);
        return PyErr_NoMemory();
    }
    s->format = formats[type];
    s->name = nm;
    s->flags = ARROW_FLAG_NULLABLE;
    s->release = release_schema;
    a->length = (int64_t)n;
    a->null_count = (int64_t)col->nulls;
    pd->bufs[0] = bits;
    if (type == T_STR) { /* validity, views, one data buffer, and the data buffers' sizes */
        int64_t *sizes = malloc(sizeof *sizes);
        if (!sizes || (!col->views.p && buf_reserve(&col->views, 16)) || (!col->data.p && buf_reserve(&col->data, 1))) {
            free(sizes), free(s), free(a), free(pd), free(nm), free(bits);
            return PyErr_NoMemory();
        }
        *sizes = (int64_t)col->data.len;
        pd->bufs[1] = col->views.p;
        pd->bufs[2] = col->data.p;
        pd->bufs[3] = sizes;
        a->n_buffers = 4;
    } else {
        if (!col->data.p) buf_reserve(&col->data, 8);
        pd->bufs[1] = col->data.p;
        a->n_buffers = 2;
    }
    for (int i = 0; i < 4; i++) pd->ptrs[i] = pd->bufs[i];
    a->buffers = pd->ptrs;
    a->private_data = pd;
    a->release = release_array;
    /* the buffers now belong to the array */
    col->data = (Buf){0};
    col->views = (Buf){0};
    buf_free(&col->valid);
    col->nulls = 0;
    PyObject *cs = PyCapsule_New(s, "arrow_schema", capsule_schema_free);
    if (!cs) {
        release_schema(s), free(s), release_array(a), free(a);
        return NULL;
    }
    PyObject *ca = PyCapsule_New(a, "arrow_array", capsule_array_free);
    if (!ca) {
        Py_DECREF(cs);
        release_array(a), free(a);
        return NULL;
    }
    return Py_BuildValue("(s(NN))", name, cs, ca);
}

/* {group: [(column name, (schema capsule, array capsule)), ...]} of the groups with rows; the scanner is left
 * empty of rows (its counts stay until take_counts). */
static PyObject *Scanner_flush(Scanner *sc, PyObject *unused) {
    (void)unused;
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int g = 0; g < N_GROUPS; g++) {
        Group *gr = &sc->groups[g];
        if (!gr->n) continue;
        PyObject *cols = PyList_New(0);
        if (!cols || PyDict_SetItemString(out, GROUP_NAMES[g], cols)) {
            Py_XDECREF(cols);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(cols);
        for (const int *ci = GROUP_COLS[g]; *ci >= 0; ci++) {
            PyObject *t = export_col(&gr->cols[*ci], COL_TYPES[*ci], COL_NAMES[*ci], gr->n);
            if (!t || PyList_Append(cols, t)) {
                Py_XDECREF(t);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(t);
        }
        gr->n = 0;
    }
    return out;
}

/* (number of events, {category or None: count}) since the last call */
static PyObject *Scanner_take_counts(Scanner *sc, PyObject *unused) {
    (void)unused;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int i = 0; i < sc->n_cats; i++) {
        if (!sc->cat_counts[i]) continue;
        Cat *t = &sc->cats[i];
        PyObject *k = t->text ? PyUnicode_DecodeUTF8(t->text, (Py_ssize_t)t->len, "strict") : Py_NewRef(Py_None);
        PyObject *v = PyLong_FromLongLong(sc->cat_counts[i]);
        if (!k || !v || PyDict_SetItem(d, k, v)) {
            Py_XDECREF(k), Py_XDECREF(v), Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(k), Py_DECREF(v);
        sc->cat_counts[i] = 0;
    }
    PyObject *r = Py_BuildValue("(LN)", sc->n_events, d);
    sc->n_events = 0;
    return r;
}

static void Scanner_dealloc(Scanner *sc) {
    for (int g = 0; g < N_GROUPS; g++)
        for (int c = 0; c < N_COLS; c++) {
            buf_free(&sc->groups[g].cols[c].data);
            buf_free(&sc->groups[g].cols[c].views);
            buf_free(&sc->groups[g].cols[c].valid);
        }
    for (int i = 0; i < sc->n_cats; i++) free(sc->cats[i].text);
    Py_TYPE(sc)->tp_free((PyObject *)sc);
}

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_O,
     "feed(piece) -> bool: a JSON array of events read into the columns (True), or refused and rolled back (False)"},
    {"flush", (PyCFunction)Scanner_flush, METH_NOARGS,
     "flush() -> {group: [(name, (schema capsule, array capsule))]}: the columns so far, handed over"},
    {"take_counts", (PyCFunction)Scanner_take_counts, METH_NOARGS,
     "take_counts() -> (events, {category: count}) since the last call"},
    {"refusal", (PyCFunction)Scanner_refusal, METH_NOARGS, "why the last piece was refused"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "collectors._kineto_scan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
    .tp_doc = "Kineto events -> Arrow columns of the four tables (see the module's source)",
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_kineto_scan",
                                       "Kineto trace events -> Arrow columns (collectors.kineto_typed's fast path)",
                                       -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kineto_scan(void) {
    init_tables();
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
