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

/* The same members (a spec's names are unique; the values are compared as
 * text, so a req holding a name twice is compared as it is), in any order. */
static int fuzz_same_members(const cJSON *a, const cJSON *b)
{
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return 0;
    for (const cJSON *m = a->child; m; m = m->next) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, m->string);
        if (!o) return 0;
        char *x = cJSON_PrintUnformatted(m), *y = cJSON_PrintUnformatted(o);
        int same = x && y && strcmp(x, y) == 0;
        free(x);
        free(y);
        if (!same) return 0;
    }
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
    cJSON *j = jarena_parse(s, size, NULL);
    if (!j) return 0;
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
    if (!task_key_valid(t.key) || t.due_ms < NOW_MS || !t.spec) abort();
    cJSON *again = cJSON_Parse(t.spec);
    if (!again || task_json_check(t.spec, strlen(t.spec), err, sizeof(err)) != 0) abort();
    task_input t2;
    if (task_input_parse(again, NOW_MS, &t2, err, sizeof(err)) != 0) {
        fprintf(stderr, "stored spec refused: %s\n%s\n", err, t.spec);
        abort();
    }
    if (strcmp(t.spec, t2.spec) != 0 || strcmp(t.key, t2.key) != 0 ||
        t.execute_at_ms != t2.execute_at_ms) {
        fprintf(stderr, "spec changed:\n%s\n%s\n", t.spec, t2.spec);
        abort();
    }
    char slice[TASK_SLICE_MAX], id[TASK_ID_MAX];
    task_slice_name(t.due_ms, 7, slice);
    task_id_make(slice, t.execute_at_ms, t.key, id, sizeof(id));
    char *back = task_rec_spec(t.rec, strlen(t.rec), id);
    cJSON *b = back ? cJSON_Parse(back) : NULL;
    if (!b || !fuzz_same_members(again, b)) {
        fprintf(stderr, "record gives another spec:\n%s\n%s\n", t.spec, back ? back : "(none)");
        abort();
    }
    fuzz_spec_read(&t, again);
    cJSON_Delete(b);
    free(back);
    task_input_free(&t2);
    task_input_free(&t);
    cJSON_Delete(again);
    cJSON_Delete(j);
    return 0;
}
