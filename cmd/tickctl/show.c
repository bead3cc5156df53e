/* show.c -- see show.h. */
#include "show.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

#define TASK_COLS 5

void show_time(int64_t ms, char *out, size_t outlen)
{
    struct tm tm;
    char day[24];
    time_t s = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    if (!gmtime_r(&s, &tm) || !strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(out, outlen, "%" PRId64, ms);
        return;
    }
    snprintf(out, outlen, "%s.%03dZ", day, (int)(ms - (int64_t)s * 1000));
}

/* The code point of the character at p (UTF-8 that util_text_clean let
 * through, n bytes) when a terminal would act on it rather than show it: a
 * C1 control (U+0080-U+009F; U+009B alone opens an escape sequence on some
 * terminals) or a bidi control (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069), which reorders what follows it on the line; else 0. */
static unsigned show_unsafe(const unsigned char *p, size_t n)
{
    unsigned cp = n == 2 ? (p[0] & 0x1fu) << 6 | (p[1] & 0x3fu)
                : n == 3 ? (p[0] & 0x0fu) << 12 | (p[1] & 0x3fu) << 6 | (p[2] & 0x3fu) : 0;
    if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
        (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
        return cp;
    return 0;
}

/* show_clean, and with json each unsafe character as its \uXXXX escape
 * rather than '?': inside a JSON string the same text, printable. */
static char *show_filter(const char *s, size_t len, int one_line, int json)
{
    char *c = xstrndup(s, len), *out = xmalloc(len * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i++)
        if (c[i] == '\0') c[i] = '?';
    util_text_clean(c, len);
    for (size_t i = 0; i < len;) {
        unsigned char b = (unsigned char)c[i];
        /* after util_text_clean, a byte >= 0x80 starts a sequence it took for
         * UTF-8; a continuation byte or 0xf5-0xff never start one */
        size_t n = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
        unsigned cp = n > 1 && i + n <= len ? show_unsafe((const unsigned char *)c + i, n) : 0;
        if ((b >= 0x80 && b < 0xc2) || b >= 0xf5 || i + n > len) {
            out[o++] = '?';
            n = 1;
        } else if (json && (cp || s[i] == 0x7f)) {
            /* DEL is valid raw in a JSON string, and still a control */
            o += (size_t)sprintf(out + o, "\\u%04x", cp ? cp : 0x7fu);
        } else if (cp) {
            out[o++] = '?';
        } else if (one_line && (b == '\t' || b == '\n' || b == '\r')) {
            out[o++] = ' ';
        } else if (b == '\r' && (i + 1 == len || c[i + 1] != '\n')) {
            out[o++] = '?';
        } else {
            memcpy(out + o, c + i, n);
            o += n;
        }
        i += n;
    }
    out[o] = '\0';
    free(c);
    return out;
}

char *show_clean(const char *s, size_t len, int one_line)
{
    return show_filter(s, len, one_line, 0);
}

char *show_json_clean(const char *s, size_t len)
{
    return show_filter(s, len, 0, 1);
}

static const char *str_of(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* a number member, or -1 when absent */
static int64_t num_of(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

/* when the task is next due: its next attempt while it waits, else the
 * execute_at asked for */
static int64_t task_due(const cJSON *t)
{
    int64_t next = num_of(t, "next_attempt_at");
    return next >= 0 ? next : num_of(t, "execute_at");
}

void show_tasks(FILE *f, const cJSON *tasks)
{
    static const char *head[TASK_COLS] = {"ID", "STATUS", "DUE", "ATTEMPTS", "URL"};
    int n = cJSON_GetArraySize(tasks), r = 0;
    size_t w[TASK_COLS];
    char **cell = xcalloc((size_t)(n + 1) * TASK_COLS, sizeof(char *));
    const cJSON *t;
    if (n == 0) {
        free(cell);
        fprintf(stderr, "no tasks\n");
        return;
    }
    for (int c = 0; c < TASK_COLS; c++) cell[c] = xstrdup(head[c]);
    cJSON_ArrayForEach(t, tasks) {
        char due[40] = "-", att[48];
        const char *id = str_of(t, "id"), *st = str_of(t, "status"), *url = str_of(t, "callback_url");
        const cJSON *retry = cJSON_GetObjectItemCaseSensitive(t, "retry");
        int64_t at = task_due(t), a = num_of(t, "attempts"), max = num_of(retry, "max_attempts");
        if (at >= 0) show_time(at, due, sizeof(due));
        if (max > 0) snprintf(att, sizeof(att), "%" PRId64 "/%" PRId64, a < 0 ? 0 : a, max);
        else snprintf(att, sizeof(att), "%" PRId64, a < 0 ? 0 : a);
        char **row = cell + (size_t)(++r) * TASK_COLS;
        const char *v[TASK_COLS] = {id ? id : "?", st ? st : "?", due, att, url ? url : "?"};
        for (int c = 0; c < TASK_COLS; c++) row[c] = show_clean(v[c], strlen(v[c]), 1);
    }
    for (int c = 0; c < TASK_COLS; c++) {
        w[c] = 0;
        for (int i = 0; i <= r; i++) {
            size_t l = strlen(cell[i * TASK_COLS + c]);
            if (l > w[c]) w[c] = l;
        }
    }
    for (int i = 0; i <= r; i++) {
        for (int c = 0; c < TASK_COLS; c++) {
            const char *s = cell[i * TASK_COLS + c];
            if (c == TASK_COLS - 1) fprintf(f, "%s\n", s);
            else fprintf(f, "%-*s  ", (int)w[c], s);
            free(cell[i * TASK_COLS + c]);
        }
    }
    free(cell);
}

/* "in 4m59s" / "12s ago" for a time d_ms away */
static void show_rel(int64_t d_ms, char *out, size_t outlen)
{
    int64_t s = (d_ms < 0 ? -d_ms : d_ms) / 1000;
    char v[48];
    if (s >= 86400) snprintf(v, sizeof(v), "%" PRId64 "d%" PRId64 "h", s / 86400, s % 86400 / 3600);
    else if (s >= 3600) snprintf(v, sizeof(v), "%" PRId64 "h%" PRId64 "m", s / 3600, s % 3600 / 60);
    else if (s >= 60) snprintf(v, sizeof(v), "%" PRId64 "m%" PRId64 "s", s / 60, s % 60);
    else snprintf(v, sizeof(v), "%" PRId64 ".%" PRId64 "s", s, (d_ms < 0 ? -d_ms : d_ms) % 1000 / 100);
    snprintf(out, outlen, d_ms >= 0 ? "in %s" : "%s ago", v);
}

static void field(FILE *f, const char *name, const char *value)
{
    char *v = show_clean(value, strlen(value), 1);
    fprintf(f, "%-14s %s\n", name, v);
    free(v);
}

/* a, sep and b as one value */
static void field_join(FILE *f, const char *name, const char *a, const char *sep, const char *b)
{
    char *v = xmalloc(strlen(a) + strlen(sep) + strlen(b) + 1);
    sprintf(v, "%s%s%s", a, sep, b);
    field(f, name, v);
    free(v);
}

static void field_time(FILE *f, const char *name, int64_t ms, int64_t now_ms)
{
    char t[40], rel[64], v[112];
    if (ms < 0) return;
    show_time(ms, t, sizeof(t));
    show_rel(ms - now_ms, rel, sizeof(rel));
    snprintf(v, sizeof(v), "%s (%s)", t, rel);
    field(f, name, v);
}

void show_task(FILE *f, const cJSON *t, int64_t now_ms)
{
    char v[256];
    const char *s;
    const cJSON *retry = cJSON_GetObjectItemCaseSensitive(t, "retry"), *e;
    field(f, "id", (s = str_of(t, "id")) ? s : "?");
    field(f, "status", (s = str_of(t, "status")) ? s : "?");
    if ((s = str_of(t, "key"))) field(f, "key", s);
    if ((s = str_of(t, "schedule_id"))) field(f, "schedule", s);
    const char *m = str_of(t, "method"), *u = str_of(t, "callback_url");
    field_join(f, "callback", m ? m : "POST", " ", u ? u : "?");
    field_time(f, "execute_at", num_of(t, "execute_at"), now_ms);
    field_time(f, "next_attempt", num_of(t, "next_attempt_at"), now_ms);
    field_time(f, "expires_at", num_of(t, "expires_at"), now_ms);
    if ((s = str_of(t, "traceparent"))) field(f, "trace", s);
    int64_t max = num_of(retry, "max_attempts"), bo = num_of(retry, "backoff_ms");
    snprintf(v, sizeof(v), "%" PRId64 " of %" PRId64 " (backoff %" PRId64 " ms, timeout %" PRId64
             " ms)", num_of(t, "attempts") < 0 ? 0 : num_of(t, "attempts"), max < 0 ? 5 : max,
             bo < 0 ? 1000 : bo, num_of(t, "timeout_ms") < 0 ? 10000 : num_of(t, "timeout_ms"));
    field(f, "attempts", v);
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(t, "header")) {
        if (cJSON_IsString(e)) field_join(f, "header", e->string, ": ", e->valuestring);
    }
    e = cJSON_GetObjectItemCaseSensitive(t, "req");
    if (e) {
        char *b = cJSON_IsString(e) ? xstrdup(e->valuestring) : cJSON_PrintUnformatted(e);
        field(f, "body", b ? b : "?");
        free(b);
    }
    if (num_of(t, "last_status_code") >= 0) {
        snprintf(v, sizeof(v), "%" PRId64, num_of(t, "last_status_code"));
        field(f, "last_status", v);
    }
    if ((s = str_of(t, "last_error"))) field(f, "last_error", s);
    field_time(f, "finished_at", num_of(t, "finished_at"), now_ms);
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(t, "on_failure");
    if ((s = str_of(of, "callback_url"))) field(f, "on_failure", s);
    const cJSON *hist = cJSON_GetObjectItemCaseSensitive(t, "attempt_history");
    if (cJSON_GetArraySize(hist) > 0) fprintf(f, "attempt_history:\n");
    cJSON_ArrayForEach(e, hist) {
        char at[40] = "?", code[24] = "-";
        const char *err = str_of(e, "error");
        if (num_of(e, "at") >= 0) show_time(num_of(e, "at"), at, sizeof(at));
        if (num_of(e, "status_code") >= 0)
            snprintf(code, sizeof(code), "%" PRId64, num_of(e, "status_code"));
        snprintf(v, sizeof(v), "  %s  %-3s  %5" PRId64 " ms  %s", at, code,
                 num_of(e, "took_ms") < 0 ? 0 : num_of(e, "took_ms"), err ? err : "");
        char *line = show_clean(v, strlen(v), 1);
        fprintf(f, "%s\n", line);
        free(line);
    }
}

static void show_members(FILE *f, const cJSON *obj, const char *prefix)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, obj) {
        char name[256];
        snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", e->string ? e->string : "?");
        if (cJSON_IsObject(e)) {
            show_members(f, e, name);
            continue;
        }
        char *v = cJSON_IsString(e) ? xstrdup(e->valuestring) : cJSON_PrintUnformatted(e);
        char *n = show_clean(name, strlen(name), 1), *c = show_clean(v, strlen(v), 1);
        fprintf(f, "%-24s %s\n", n, c);
        free(n);
        free(c);
        free(v);
    }
}

void show_object(FILE *f, const cJSON *obj)
{
    show_members(f, obj, "");
}
