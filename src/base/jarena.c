/* jarena.c -- cJSON's values of a request body from a block of the thread's
 * (jarena.h). */
#include "base/jarena.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A task's body is a few hundred bytes of values; a bigger one (a batch)
 * fills the block and goes on with malloc. */
#define JARENA_BYTES (32 * 1024)
#define JARENA_ALIGN 16

typedef struct jarena {
    char *block;                /* malloc'd on this thread's first parse */
    size_t used;                /* bytes handed out since the block was whole */
    size_t live;                /* values handed out and not yet freed */
    int parsing;                /* inside jarena_parse: allocate from the block */
} jarena;

static _Thread_local jarena ja;
static pthread_once_t ja_once = PTHREAD_ONCE_INIT;

static int ja_owns(const void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)ja.block;
    return ja.block && a >= b && a < b + JARENA_BYTES;
}

static void *ja_malloc(size_t n)
{
    if (ja.parsing && n > 0 && n <= JARENA_BYTES - ja.used) {
        void *p = ja.block + ja.used;
        size_t step = (n + JARENA_ALIGN - 1) & ~(size_t)(JARENA_ALIGN - 1);
        ja.used = step <= JARENA_BYTES - ja.used ? ja.used + step : JARENA_BYTES;
        ja.live++;
        return p;
    }
    return malloc(n);
}

static void ja_free(void *p)
{
    if (!ja_owns(p)) {
        free(p);
        return;
    }
    if (--ja.live == 0) ja.used = 0;
}

static void ja_install(void)
{
    cJSON_Hooks h = {ja_malloc, ja_free};
    cJSON_InitHooks(&h);
}

void jarena_init(void)
{
    pthread_once(&ja_once, ja_install);
}

/* ---- the common body, read here -----------------------------------------
 *
 * cJSON reads every value through strncmp (null, false, true are tried
 * first), every number through a copy and strtod, and was a fifth of what a
 * POST cost. The bodies the API gets are objects of strings and integers,
 * with a few objects inside: those are read here, in one pass, into the
 * tree cJSON_ParseWithLengthOpts would make of them, node for node (the same
 * types, names, values, links and end). Anything else is left to cJSON
 * whole (JQ_LEAVE), so every error is cJSON's: a number with a fraction, an
 * exponent, more than 15 digits or a sign cJSON reads otherwise, a \u
 * escape or any escape cJSON refuses, a NUL in a string, a byte order mark,
 * nesting deeper than JQ_DEPTH, a text that is not JSON. What a text holds
 * past its value is the caller's to judge, as with cJSON. Whitespace is what
 * cJSON skips: any byte up to 32. (fuzz_json checks each tree against
 * cJSON's.) */
#define JQ_DEPTH 64

enum { JQ_OK = 0, JQ_LEAVE = -1 };

typedef struct jq {
    const unsigned char *p, *end;
    int depth;
} jq;

/* 1 when s[0..n) holds a byte of 0x80 or more: eight a step, the last
 * eight read whole (over bytes already read) */
static int jq_high(const unsigned char *s, size_t n)
{
    uint64_t any = 0, w;
    size_t i = 0;
    if (n < 8) {
        for (; i < n; i++) any |= s[i];
    } else {
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, s + i, 8);
            any |= w;
        }
        memcpy(&w, s + n - 8, 8);
        any |= w;
    }
    return (any & UINT64_C(0x8080808080808080)) != 0;
}

static void jq_ws(jq *q)
{
    while (q->p < q->end && *q->p <= 32) q->p++;
}

static cJSON *jq_node(void)
{
    cJSON *c = ja_malloc(sizeof(*c));
    if (c) memset(c, 0, sizeof(*c));
    return c;
}

/* The string at q->p ('"'), unescaped into *out */
static int jq_string(jq *q, char **out)
{
    const unsigned char *s = q->p + 1, *e = memchr(s, '"', (size_t)(q->end - s));
    size_t escapes = 0;
    if (!e) return JQ_LEAVE;
    const unsigned char *bs = memchr(s, '\\', (size_t)(e - s));
    if (bs) {
        /* an escape before that quote: from it, a byte at a time (the byte
         * after a backslash is taken whole), each byte once */
        for (e = bs; e < q->end && *e != '"'; e++) {
            if (*e != '\\') continue;
            if (e + 1 >= q->end) return JQ_LEAVE;
            escapes++;
            e++;
        }
        if (e >= q->end) return JQ_LEAVE;
    }
    if (memchr(s, '\0', (size_t)(e - s))) return JQ_LEAVE;
    char *o = ja_malloc((size_t)(e - s) - escapes + 1), *w = o;
    if (!o) return JQ_LEAVE;
    for (const unsigned char *r = s; r < e;) {
        const unsigned char *esc = escapes ? memchr(r, '\\', (size_t)(e - r)) : NULL;
        size_t run = (size_t)((esc ? esc : e) - r);
        memcpy(w, r, run);
        w += run;
        r += run;
        if (!esc) break;
        char c;
        switch (esc[1]) {
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case '"': case '\\': case '/': c = (char)esc[1]; break;
        default: ja_free(o); return JQ_LEAVE;   /* \u, or one cJSON refuses */
        }
        *w++ = c;
        r = esc + 2;
    }
    *w = '\0';
    *out = o;
    q->p = e + 1;
    return JQ_OK;
}

/* An integer of at most 15 digits (a double holds it exactly, as strtod
 * gives it); cJSON's valueint, saturated as cJSON does */
static int jq_number(jq *q, cJSON *it)
{
    const unsigned char *p = q->p;
    int neg = *p == '-';
    p += neg;
    const unsigned char *d = p;
    uint64_t v = 0;
    while (p < q->end && *p >= '0' && *p <= '9' && p - d < 15) v = v * 10 + (uint64_t)(*p++ - '0');
    if (p == d) return JQ_LEAVE;
    /* what cJSON copies on with the number: read there */
    if (p < q->end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' ||
                       *p == '+' || *p == '-'))
        return JQ_LEAVE;
    double x = neg ? -(double)v : (double)v;
    it->type = cJSON_Number;
    it->valuedouble = x;
    it->valueint = x >= INT_MAX ? INT_MAX : x <= (double)INT_MIN ? INT_MIN : (int)x;
    q->p = p;
    return JQ_OK;
}

static int jq_value(jq *q, cJSON *it);

/* An object or an array at q->p: its members (names read for an object) */
static int jq_container(jq *q, cJSON *it, int object)
{
    if (++q->depth > JQ_DEPTH) return JQ_LEAVE;
    const unsigned char close = object ? '}' : ']';
    cJSON *cur = NULL;
    q->p++;
    jq_ws(q);
    if (q->p >= q->end) return JQ_LEAVE;
    if (*q->p != close) {
        for (;;) {
            cJSON *n = jq_node();
            if (!n) return JQ_LEAVE;
            /* linked first, so that a leave frees it with the rest */
            if (cur) {
                cur->next = n;
                n->prev = cur;
            } else {
                it->child = n;
            }
            cur = n;
            if (object) {
                if (q->p >= q->end || *q->p != '"' || jq_string(q, &n->string) != JQ_OK)
                    return JQ_LEAVE;
                jq_ws(q);
                if (q->p >= q->end || *q->p != ':') return JQ_LEAVE;
                q->p++;
                jq_ws(q);
            }
            if (jq_value(q, n) != JQ_OK) return JQ_LEAVE;
            jq_ws(q);
            if (q->p >= q->end) return JQ_LEAVE;
            if (*q->p != ',') break;
            q->p++;
            jq_ws(q);
        }
        if (*q->p != close) return JQ_LEAVE;
        it->child->prev = cur;   /* as cJSON's lists: the first's prev is the last */
    }
    it->type = object ? cJSON_Object : cJSON_Array;
    q->p++;
    q->depth--;
    return JQ_OK;
}

static int jq_value(jq *q, cJSON *it)
{
    size_t left = (size_t)(q->end - q->p);
    if (!left) return JQ_LEAVE;
    switch (*q->p) {
    case '"':
        if (jq_string(q, &it->valuestring) != JQ_OK) return JQ_LEAVE;
        it->type = cJSON_String;
        return JQ_OK;
    case '{':
        return jq_container(q, it, 1);
    case '[':
        return jq_container(q, it, 0);
    case 'n':
        if (left < 4 || memcmp(q->p, "null", 4) != 0) return JQ_LEAVE;
        it->type = cJSON_NULL;
        q->p += 4;
        return JQ_OK;
    case 'f':
        if (left < 5 || memcmp(q->p, "false", 5) != 0) return JQ_LEAVE;
        it->type = cJSON_False;
        q->p += 5;
        return JQ_OK;
    case 't':
        if (left < 4 || memcmp(q->p, "true", 4) != 0) return JQ_LEAVE;
        it->type = cJSON_True;
        it->valueint = 1;
        q->p += 4;
        return JQ_OK;
    default:
        if (*q->p == '-' || (*q->p >= '0' && *q->p <= '9')) return jq_number(q, it);
        return JQ_LEAVE;
    }
}

static cJSON *jq_parse(const char *data, size_t len, const char **end, int *plain)
{
    jq q = {(const unsigned char *)data, (const unsigned char *)data + len, 0};
    /* (a byte order mark: cJSON skips it) */
    if (!len || q.p[0] == 0xEF) return NULL;
    jq_ws(&q);
    cJSON *root = jq_node();
    if (!root) return NULL;
    if (jq_value(&q, root) != JQ_OK) {
        cJSON_Delete(root);
        return NULL;
    }
    if (end) *end = (const char *)q.p;
    /* (outside its strings a text read here is ASCII: one pass over it
     * all costs less than one a string) */
    if (plain) *plain = !jq_high((const unsigned char *)data, (size_t)(q.p - (const unsigned char *)data));
    return root;
}

cJSON *jarena_parse_quick(const char *data, size_t len, const char **end)
{
    return jq_parse(data, len, end, NULL);
}

cJSON *jarena_parse(const char *data, size_t len, const char **end, int *plain)
{
    int quick_plain = 0;
    jarena_init();
    if (!ja.block) ja.block = malloc(JARENA_BYTES);
    /* the block holds another tree still: this one is malloc'd */
    ja.parsing = ja.block && ja.live == 0;
    /* (quick_plain is set only when the one pass reads the text) */
    cJSON *j = jq_parse(data, len, end, &quick_plain);
    if (!j) j = cJSON_ParseWithLengthOpts(data, len, end, 0);
    ja.parsing = 0;
    if (plain) *plain = quick_plain;
    return j;
}

size_t jarena_used(void)
{
    return ja.used;
}
