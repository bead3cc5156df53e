/* task_spec.c -- see task_spec.h. */
#include "model/task_spec.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/util.h"

/* Nesting a stored value may have: what cJSON accepts when a task is added. */
#define SPEC_DEPTH_MAX CJSON_NESTING_LIMIT

static size_t spec_ws(const char *p, size_t i, size_t n)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
    return i;
}

/* The end (index past it) of the string whose opening quote is p[i], within
 * n, or 0 when there is none: its first quote after an even run of
 * backslashes (each pair an escaped backslash; an odd run's last one escapes
 * the quote), found by memchr rather than a byte at a time (a body's strings
 * are most of a spec's bytes, read at every callback). */
static size_t spec_string_end(const char *p, size_t i, size_t n)
{
    size_t from = i + 1;
    for (size_t at = from; at < n;) {
        const char *q = memchr(p + at, '"', n - at);
        if (!q) return 0;
        size_t k = (size_t)(q - p), b = k;
        while (b > from && p[b - 1] == '\\') b--;
        if ((k - b) % 2 == 0) return k + 1;
        at = k + 1;
    }
    return 0;
}

/* The end (index past it) of the JSON value starting at p[i], within n, or
 * 0 when there is none. Strings end at their closing quote; containers by
 * counting brackets outside strings (the text was JSON when it was stored;
 * a text damaged since is only required not to be read past its end). */
static size_t spec_skip(const char *p, size_t i, size_t n)
{
    if (i >= n) return 0;
    if (p[i] == '"') return spec_string_end(p, i, n);
    if (p[i] == '{' || p[i] == '[') {
        int depth = 0;
        for (; i < n; i++) {
            char c = p[i];
            if (c == '"') {
                size_t e = spec_skip(p, i, n);
                if (!e) return 0;
                i = e - 1;
            } else if (c == '{' || c == '[') {
                if (++depth > SPEC_DEPTH_MAX) return 0;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) return i + 1;
            }
        }
        return 0;
    }
    size_t s = i;
    while (i < n && !strchr(",}] \t\r\n", p[i])) i++;
    return i > s ? i : 0;
}

typedef void spec_member_fn(task_spec *s, const char *name, size_t nlen, task_span v);

/* Calls fn for each member of the object text p[0..n). 0, or -1 when it is
 * not an object. */
static int spec_members(task_spec *s, const char *p, size_t n, spec_member_fn *fn)
{
    size_t i = spec_ws(p, 0, n);
    if (i >= n || p[i] != '{') return -1;
    i = spec_ws(p, i + 1, n);
    if (i < n && p[i] == '}') return 0;
    while (i < n) {
        size_t ke = p[i] == '"' ? spec_skip(p, i, n) : 0;
        if (!ke) return -1;
        size_t c = spec_ws(p, ke, n);
        if (c >= n || p[c] != ':') return -1;
        size_t vs = spec_ws(p, c + 1, n), ve = spec_skip(p, vs, n);
        if (!ve) return -1;
        fn(s, p + i + 1, ke - i - 2, (task_span){p + vs, ve - vs});
        i = spec_ws(p, ve, n);
        if (i < n && p[i] == '}') return 0;
        if (i >= n || p[i] != ',') return -1;
        i = spec_ws(p, i + 1, n);
    }
    return -1;
}

static int spec_is(const char *name, size_t nlen, const char *want)
{
    return strlen(want) == nlen && memcmp(name, want, nlen) == 0;
}

/* A JSON number span as an integer (0 when it is none). */
static int64_t spec_int(task_span v)
{
    char buf[32];
    if (!v.n || v.n >= sizeof(buf)) return 0;
    memcpy(buf, v.p, v.n);
    buf[v.n] = '\0';
    char *end;
    double d = strtod(buf, &end);
    return *end || !(d > -9.2e18 && d < 9.2e18) ? 0 : (int64_t)d;
}

/* The string a span holds, unescaped, into out (room for v.n - 1 bytes: an
 * escape is never shorter than what it stands for): its length, or -1 when
 * the span holds no string. */
static long span_unescape(task_span v, char *out)
{
    if (v.n < 2 || v.p[0] != '"' || v.p[v.n - 1] != '"') return -1;
    if (!memchr(v.p, '\\', v.n)) {
        memcpy(out, v.p + 1, v.n - 2);
        out[v.n - 2] = '\0';
        return (long)(v.n - 2);
    }
    cJSON *o = cJSON_ParseWithLength(v.p, v.n);
    long n = -1;
    if (cJSON_IsString(o)) {
        n = (long)strlen(o->valuestring);
        memcpy(out, o->valuestring, (size_t)n + 1);
    }
    cJSON_Delete(o);
    return n;
}

char *task_span_string(task_span v)
{
    if (v.n < 2) return NULL;
    char *s = xmalloc(v.n - 1);
    if (span_unescape(v, s) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* The spec's room for its callback_url, after its text (task_spec_read). */
static char *spec_url_room(task_spec *s)
{
    return (char *)(s + 1) + s->len + 1;
}

void task_span_word(task_span v, char *out, size_t outlen)
{
    out[0] = '\0';
    if (v.n >= 2 && v.n - 2 < outlen && v.p[0] == '"' && !memchr(v.p, '\\', v.n)) {
        memcpy(out, v.p + 1, v.n - 2);
        out[v.n - 2] = '\0';
    }
}

static void spec_retry_member(task_spec *s, const char *name, size_t nlen, task_span v)
{
    if (spec_is(name, nlen, "max_attempts") && !s->attempts_v.n) {
        s->attempts_v = v;
        s->max_attempts = (int)spec_int(v);
    } else if (spec_is(name, nlen, "backoff_ms") && !s->backoff_v.n) {
        s->backoff_v = v;
        s->backoff_ms = spec_int(v);
    }
}

/* The members either form holds beside its fixed parts; a spec ('{') also
 * holds those parts as members. A member given twice counts the first time,
 * as cJSON reads it (what the API shows). */
static void spec_member(task_spec *s, const char *name, size_t nlen, task_span v)
{
    task_span *span = spec_is(name, nlen, "header")        ? &s->header
                      : spec_is(name, nlen, "req")         ? &s->req
                      : spec_is(name, nlen, "on_failure")  ? &s->on_failure
                      : spec_is(name, nlen, "traceparent") ? &s->traceparent
                      : spec_is(name, nlen, "tracestate")  ? &s->tracestate
                      : spec_is(name, nlen, "expires_at")  ? &s->expires_at
                      : spec_is(name, nlen, "callback_url") ? &s->callback_url
                      : spec_is(name, nlen, "method")      ? &s->method_v
                      : spec_is(name, nlen, "queue")       ? &s->queue_v
                      : spec_is(name, nlen, "timeout_ms")  ? &s->timeout_v
                      : spec_is(name, nlen, "retry")       ? &s->retry
                                                           : NULL;
    if (span && !span->n) *span = v;
}

/* The parts a spec ('{') holds as members, once every member is known. */
static void spec_fixed(task_spec *s)
{
    if (span_unescape(s->callback_url, spec_url_room(s)) >= 0) s->url = spec_url_room(s);
    task_span_word(s->method_v, s->method, sizeof(s->method));
    task_span_word(s->queue_v, s->queue, sizeof(s->queue));
    if (s->timeout_v.n) s->timeout_ms = spec_int(s->timeout_v);
    if (s->retry.n) spec_members(s, s->retry.p, s->retry.n, spec_retry_member);
}

static int64_t spec_digits(const char *p, size_t n)
{
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) v = v * 10 + (p[i] - '0');
    return v;
}

task_spec *task_spec_read(const char *text, size_t len)
{
    /* one allocation: the spec, its text, and room for its callback_url
     * (no longer than the text) */
    task_spec *s = xmalloc(sizeof(*s) + 2 * (len + 1));
    memset(s, 0, sizeof(*s));
    s->text = (char *)(s + 1);
    memcpy(s->text, text, len);
    s->text[len] = '\0';
    s->len = len;
    s->timeout_ms = TASK_DEFAULT_TIMEOUT_MS;
    s->backoff_ms = TASK_DEFAULT_BACKOFF_MS;
    const char *t = s->text;
    if (len && t[0] == '{') {
        /* a spec: every part a member; no retry member, one attempt */
        s->max_attempts = 1;
        if (spec_members(s, t, len, spec_member) != 0) s->bad = "stored task is not valid JSON";
        else spec_fixed(s);
        if (!s->bad && (!s->url || !s->method[0])) s->bad = "stored task lacks callback_url or method";
    } else {
        const char *part[TASK_REC_PARTS];
        size_t plen[TASK_REC_PARTS];
        long long a, bo;
        if (task_rec_split(t, len, part, plen) != 0 ||
            task_rec_retry(part[4], plen[4], &a, &bo) != 0 ||
            spec_members(s, part[5], plen[5], spec_member) != 0 ||
            span_unescape((task_span){part[0], plen[0]}, spec_url_room(s)) < 0) {
            s->bad = "stored task is not valid JSON";
        } else {
            s->url = spec_url_room(s);
            memcpy(s->method, plen[1] ? part[1] : "POST", plen[1] ? plen[1] : 4);
            memcpy(s->queue, part[3], plen[3]);
            s->timeout_ms = spec_digits(part[2], plen[2]);
            s->max_attempts = (int)a;
            s->backoff_ms = bo;
        }
    }
    if (s->expires_at.n) s->expires_ms = spec_int(s->expires_at);
    if (s->bad) {
        s->max_attempts = 1;
        if (!s->url) {
            s->url = spec_url_room(s);
            s->url[0] = '\0';
        }
    }
    return s;
}

void task_spec_free(task_spec *s)
{
    free(s);
}

char *task_spec_json(const task_spec *s, const char *id)
{
    if (s->bad) return NULL;
    return task_rec_spec(s->text, s->len, id);
}

const char *task_spec_body(const task_spec *s, size_t *len, int *json, char **buf)
{
    *json = 0;
    *buf = NULL;
    *len = 0;
    if (s->req.n && s->req.p[0] == '"') {
        if (s->req.n >= 2 && !memchr(s->req.p, '\\', s->req.n)) {
            /* no escape: the text between the quotes, as it is */
            *len = s->req.n - 2;
            return s->req.p + 1;
        }
        if ((*buf = task_span_string(s->req)) != NULL) {
            *len = strlen(*buf);
            return *buf;
        }
    } else if (s->req.n) {
        *json = 1;
        *len = s->req.n;
        return s->req.p;
    }
    return "";
}
