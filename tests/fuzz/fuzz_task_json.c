/* fuzz_task_json.c -- the API's task JSON on arbitrary bytes, as api.c takes
 * it: a raw NUL refused, cJSON, the UTF-8 check, the scan of the text for
 * NULs and numbers cJSON does not hold, then task_input_parse. The scan also
 * runs on every input, JSON or not; so do the bounded time parsers (the text
 * as a query parameter, the JSON as a field) and the listing cursor's check.
 * Invariants checked beyond the sanitizers: an error names a field
 * ("field: reason"); an accepted task's stored spec is JSON that is accepted
 * again and stored unchanged (what is stored is what was sent); its record
 * has six parts and gives the same spec back (task_rec_spec), and read once
 * for its callback (task_spec_read) gives the URL, method and retry policy
 * the spec holds and the body cJSON prints of its req, byte for byte. The
 * input is also read as a record and as a stored task, which must never be
 * more than it holds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/jarena.h"
#include "model/task.h"
#include "model/task_spec.h"
#include "base/util.h"

#define NOW_MS INT64_C(1795323600000)

static int fuzz_count(const char *path, void *priv)
{
    if (strlen(path) >= TASK_PATH_MAX) abort();
    ++*(size_t *)priv;
    return 0;
}

/* 1 if a's member name, when given, is in b, the same */
static int fuzz_member_kept(const cJSON *a, const cJSON *b, const char *name)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, name);
    if (!x) return 1;
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, name);
    char *px = cJSON_PrintUnformatted(x), *py = y ? cJSON_PrintUnformatted(y) : NULL;
    int same = px && py && strcmp(px, py) == 0;
    free(px);
    free(py);
    return same;
}

/* 1 if the spec holds every member of the task given that it keeps as given
 * (a default queue, a delay, a ttl and an on_failure's method are written
 * in another form) */
static int fuzz_kept(const cJSON *given, const cJSON *spec)
{
    static const char *as_given[] = {"key", "callback_url", "method", "header", "req",
                                     "timeout_ms", "traceparent", "tracestate"};
    for (size_t i = 0; i < sizeof(as_given) / sizeof(*as_given); i++)
        if (!fuzz_member_kept(given, spec, as_given[i])) return 0;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(given, "queue");
    if (q && strcmp(q->valuestring, "default") != 0 && !fuzz_member_kept(given, spec, "queue"))
        return 0;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(given, "retry");
    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(spec, "retry");
    if (r && (!fuzz_member_kept(r, sr, "max_attempts") || !fuzz_member_kept(r, sr, "backoff_ms")))
        return 0;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(given, "on_failure");
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(spec, "on_failure");
    if (f && (!sf || !fuzz_member_kept(f, sf, "callback_url") || !fuzz_member_kept(f, sf, "header")))
        return 0;
    return 1;
}

/* The text (no NUL) as a query parameter's time and as a cursor. */
static void fuzz_text(const char *s, size_t size)
{
    char *t = malloc(size + 1), err[300];
    int64_t ms;
    memcpy(t, s, size);
    t[size] = '\0';
    if (task_text_time(t, "from", &ms, err, sizeof(err)) == 0 ? ms < 0 || ms > TASK_TIME_MAX_MS
                                                              : strncmp(err, "from: ", 6) != 0)
        abort();
    if (task_cursor_valid(t) && size >= TASK_SLICE_MAX + 17 + TASK_ID_MAX) abort();
    free(t);
}

/* The callback's reading of an accepted task, from its record: what the
 * spec holds, and the body as cJSON prints req. */
static void fuzz_spec_read(const task_input *t, const cJSON *spec)
{
    task_spec *ts = task_spec_read(t->rec, strlen(t->rec));
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(spec, "callback_url");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(spec, "method");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(spec, "req");
    if (ts->bad || strcmp(ts->url, url->valuestring) != 0 ||
        strcmp(ts->method, method->valuestring) != 0 || ts->max_attempts != t->max_attempts ||
        ts->timeout_ms != t->timeout_ms) {
        fprintf(stderr, "read once, another task:\n%s\n", t->rec);
        abort();
    }
    size_t len;
    int json;
    char *buf;
    const char *body = task_spec_body(ts, &len, &json, &buf);
    char *want = !req ? strdup("") : cJSON_IsString(req) ? strdup(req->valuestring)
                                                         : cJSON_PrintUnformatted(req);
    if (len != strlen(want) || memcmp(body, want, len) != 0 ||
        json != (req && !cJSON_IsString(req))) {
        fprintf(stderr, "body sent differs:\n%.*s\n%s\n", (int)len, body, want);
        abort();
    }
    free(buf);
    free(want);
    task_spec_free(ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char err[400];
    /* the last input's tree was freed whole: the block is whole again */
    if (jarena_used() != 0) abort();
    size_t seen = 0;
    size_t n = task_json_nuls(s, size, fuzz_count, &seen);
    if (n != seen) abort();
    free(task_rec_spec(s, size, "202611221000.3.1795000030000.abc"));
    task_spec *raw = task_spec_read(s, size);
    if (!raw->url || (raw->bad && raw->max_attempts != 1)) abort();
    size_t blen;
    int bjson;
    char *bbuf;
    const char *sent = task_spec_body(raw, &blen, &bjson, &bbuf);
    if (blen && sent != bbuf && (sent < raw->text || sent + blen > raw->text + raw->len))
        abort(); /* a body not copied lies within the stored text */
    free(bbuf);
    task_spec_free(raw);
    size_t both = 0;
    if (task_json_scan(s, size, fuzz_count, fuzz_count, &both) != both || both < seen) abort();
    if (memchr(s, '\0', size)) return 0;
    fuzz_text(s, size);

    /* parsed as api_body does, into the thread's block (base/jarena); the
     * parse below, while j lives, gets malloc'd values */
    const char *jend = NULL;
    int plain = 0;
    cJSON *j = jarena_parse(s, size, &jend, &plain);
    if (!j) return 0;
    /* what api_body does not check of a plain text, it need not */
    if (plain && (!util_utf8_valid(s, (size_t)(jend - s), NULL) ||
                  task_json_check(s, (size_t)(jend - s), err, sizeof(err)) != 0))
        abort();
    int64_t ms;
    if (task_json_time(j, "t", &ms, err, sizeof(err)) == 0 ? ms < 0 || ms > TASK_TIME_MAX_MS
                                                           : strncmp(err, "t: ", 3) != 0)
        abort();
    /* JSON text outside strings is ASCII: for a text that is one value (as
     * api_body takes it) the string scan finds a string that is not UTF-8
     * exactly when the text is not UTF-8 */
    const char *end = NULL;
    cJSON_Delete(cJSON_ParseWithLengthOpts(s, size, &end, 0));
    while (end && end < s + size && strchr(" \t\r\n", *end)) end++;
    int utf8_bad = task_json_check_utf8(s, size, err, sizeof(err)) != 0;
    if (end == s + size && (utf8_bad == util_utf8_valid(s, size, NULL) ||
                            (utf8_bad && !strstr(err, ": not valid UTF-8 (byte 0x"))))
        abort();
    if (utf8_bad) {
        cJSON_Delete(j);
        return 0;
    }
    /* a whole text that task_json_plain passes holds nothing to find */
    if (end == s + size && task_json_plain(s, size) && task_json_check(s, size, err, sizeof(err)) != 0)
        abort();
    if (task_json_check(s, size, err, sizeof(err)) != 0) {
        if (!strstr(err, ": contains a NUL character") && !strstr(err, ": a number")) abort();
        cJSON_Delete(j);
        return 0;
    }
    task_input t;
    if (task_input_parse(j, NOW_MS, &t, err, sizeof(err)) != 0) {
        if (!strchr(err, ':')) abort();
        cJSON_Delete(j);
        return 0;
    }
    if (!task_key_valid(t.key) || t.due_ms < NOW_MS || !t.rec) abort();
    /* the spec, read back from the record, is JSON the API takes, holds
     * what the task was given, and gives the same record again */
    char *spec = task_input_spec(&t);
    cJSON *again = cJSON_Parse(spec);
    if (!again || task_json_check(spec, strlen(spec), err, sizeof(err)) != 0) abort();
    if (!fuzz_kept(j, again)) {
        fprintf(stderr, "the spec lost what was given:\n%.*s\n%s\n", (int)size, s, spec);
        abort();
    }
    task_input t2;
    if (task_input_parse(again, NOW_MS, &t2, err, sizeof(err)) != 0) {
        fprintf(stderr, "stored spec refused: %s\n%s\n", err, spec);
        abort();
    }
    char *spec2 = task_input_spec(&t2);
    if (strcmp(t.rec, t2.rec) != 0 || strcmp(spec, spec2) != 0 || strcmp(t.key, t2.key) != 0 ||
        t.execute_at_ms != t2.execute_at_ms) {
        fprintf(stderr, "record changed:\n%s\n%s\n", t.rec, t2.rec);
        abort();
    }
    char slice[TASK_SLICE_MAX], id[TASK_ID_MAX];
    task_slice_name(t.due_ms, 7, slice);
    task_id_make(slice, t.execute_at_ms, t.key, id, sizeof(id));
    char *back = task_rec_spec(t.rec, strlen(t.rec), id);
    if (!back || strcmp(back, spec) != 0) {
        fprintf(stderr, "the record under its id gives another spec:\n%s\n%s\n", spec,
                back ? back : "(none)");
        abort();
    }
    fuzz_spec_read(&t, again);
    free(back);
    free(spec2);
    free(spec);
    task_input_free(&t2);
    task_input_free(&t);
    cJSON_Delete(again);
    cJSON_Delete(j);
    return 0;
}
