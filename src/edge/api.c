/* api.c -- see api.h. */
#include "edge/api.h"
#include "edge/api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdarg.h>
#include "edge/http_server.h"
#include "base/log.h"
#include "base/metrics.h"
#include "edge/openapi.h"
#include "edge/ui.h"
#include "model/schedule.h"
#include "base/trace.h"
#include "base/tz.h"
#include "base/util.h"

#define BATCH_MAX 1000

typedef struct api_item {
    api_req *r;
    int idx;                  /* result index */
    task_input t;
} api_item;

/* ---- replies ----------------------------------------------------------- */

api_req *api_req_new(api *a, http_req *req)
{
    api_req *r = xcalloc(1, sizeof(*r));
    r->a = a;
    r->req = req;
    a->busy++;
    return r;
}

void api_req_free(api_req *r)
{
    if (r->results) {
        for (int i = 0; i < r->n; i++) cJSON_Delete(r->results[i]);
        free(r->results);
    }
    free(r);
}

void api_send_json(http_req *req, int code, const char *reason, cJSON *body)
{
    ui_mask_for_browser(req, body);
    char *s = body ? cJSON_PrintUnformatted(body) : NULL;
    size_t n = s ? strlen(s) : 0;
    /* every answer is UTF-8 (RFC 8259): text from outside is checked or
     * cleaned where it comes in, and an answer quoting a record stored
     * before that was (by an older build) is cleaned here, its bad bytes
     * and DEL (cJSON escapes the other control bytes) becoming '?' */
    if (s && !util_utf8_valid(s, n, NULL)) util_text_clean(s, n);
    if (s) {
        s = xrealloc(s, n + 2);
        s[n++] = '\n';
        s[n] = '\0';
    }
    http_reply(req, code, reason, "application/json", s, n);
    free(s);
}

/* The message quotes what the client sent (a field's name, a value): it
 * goes out as valid UTF-8, an invalid byte shown as '?'. */
static cJSON *api_error_body(const char *code, const char *msg)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char text[600];
    size_t n = strlen(msg) < sizeof(text) ? strlen(msg) : sizeof(text) - 1;
    memcpy(text, msg, n);
    text[n] = '\0';
    util_text_clean(text, n);
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", text);
    return o;
}


void api_error(http_req *req, int status, const char *code, const char *fmt,
                      ...)
{
    static const struct { int status; const char *reason; } reasons[] = {
        {400, "Bad Request"}, {404, "Not Found"}, {405, "Method Not Allowed"},
        {409, "Conflict"}, {413, "Payload Too Large"}, {415, "Unsupported Media Type"},
        {500, "Internal Server Error"}, {503, "Service Unavailable"}};
    const char *reason = "Error";
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < sizeof(reasons) / sizeof(*reasons); i++)
        if (reasons[i].status == status) reason = reasons[i].reason;
    cJSON *body = api_error_body(code, msg);
    api_send_json(req, status, reason, body);
    cJSON_Delete(body);
}

/* Answer r (if its client is still there) and free it. */
void api_finish(api_req *r, int status, const char *reason, cJSON *body)
{
    api_send_json(r->req, status, reason, body);
    r->a->busy--;
    api_req_free(r);
}

void api_finish_error(api_req *r, int status, const char *code, const char *msg)
{
    api_error(r->req, status, code, "%s", msg);
    r->a->busy--;
    api_req_free(r);
}

/* ---- rendering --------------------------------------------------------- */

/* Render a stored task for GET: the spec plus id, status, attempts and the
 * last failure. A malloc'd JSON string, or NULL if spec or state is not JSON. */
char *api_render_task(const char *id, const char *spec, const char *state)
{
    cJSON *o = cJSON_Parse(spec), *st = cJSON_Parse(state);
    char *out = NULL;
    if (!o || !st) goto done;
    cJSON *s = cJSON_GetObjectItemCaseSensitive(st, "s");
    cJSON *a = cJSON_GetObjectItemCaseSensitive(st, "a");
    cJSON *due = cJSON_GetObjectItemCaseSensitive(st, "due");
    cJSON *code = cJSON_GetObjectItemCaseSensitive(st, "code");
    cJSON *err = cJSON_GetObjectItemCaseSensitive(st, "err");
    cJSON *fin = cJSON_GetObjectItemCaseSensitive(st, "fin");
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "status", cJSON_IsString(s) ? s->valuestring : "unknown");
    cJSON_AddNumberToObject(o, "attempts", cJSON_IsNumber(a) ? a->valuedouble : 0);
    if (cJSON_IsString(s) && (!strcmp(s->valuestring, "scheduled") ||
                              !strcmp(s->valuestring, "running")) && cJSON_IsNumber(due))
        cJSON_AddNumberToObject(o, "next_attempt_at", due->valuedouble);
    /* held back by a queue's or destination's limit (flow.h) */
    cJSON *w = cJSON_GetObjectItemCaseSensitive(st, "w");
    if (cJSON_IsString(s) && !strcmp(s->valuestring, "scheduled") && cJSON_IsString(w))
        cJSON_AddStringToObject(o, "waiting", w->valuestring);
    if (!cJSON_GetObjectItemCaseSensitive(o, "queue"))
        cJSON_AddStringToObject(o, "queue", TASK_QUEUE_DEFAULT);
    if (cJSON_IsNumber(code)) cJSON_AddNumberToObject(o, "last_status_code", code->valuedouble);
    if (cJSON_IsString(err)) cJSON_AddStringToObject(o, "last_error", err->valuestring);
    if (cJSON_IsNumber(fin)) cJSON_AddNumberToObject(o, "finished_at", fin->valuedouble);
    /* the last attempts: {t, ms, c, e, b} as stored, named for users */
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(st, "h"), *e;
    cJSON *hist = cJSON_AddArrayToObject(o, "attempt_history");
    cJSON_ArrayForEach(e, h) {
        static const char *names[][2] = {{"t", "at"}, {"ms", "took_ms"}, {"c", "status_code"},
                                          {"e", "error"}, {"b", "body"}};
        cJSON *x = cJSON_CreateObject();
        for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, names[i][0]);
            if (v) cJSON_AddItemToObject(x, names[i][1], cJSON_Duplicate(v, 1));
        }
        cJSON_AddItemToArray(hist, x);
    }
    out = cJSON_PrintUnformatted(o);
done:
    cJSON_Delete(o);
    cJSON_Delete(st);
    return out;
}

/* The status word of a state JSON ("scheduled" when it has none). */
void api_state_status(const char *state, char *out, size_t outlen)
{
    cJSON *st = state ? cJSON_Parse(state) : NULL;
    cJSON *s = st ? cJSON_GetObjectItemCaseSensitive(st, "s") : NULL;
    snprintf(out, outlen, "%s", cJSON_IsString(s) ? s->valuestring : "scheduled");
    cJSON_Delete(st);
}

static cJSON *api_created_body(const char *id, const task_input *t, const char *state)
{
    cJSON *o = cJSON_CreateObject();
    char status[32];
    api_state_status(state, status, sizeof(status));
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "key", t->key);
    cJSON_AddNumberToObject(o, "execute_at", (double)t->execute_at_ms);
    cJSON_AddStringToObject(o, "status", status);
    return o;
}

/* ---- request bodies ---------------------------------------------------- */

/* Parse the JSON body; on failure answer and return NULL. The text itself
 * is not checked for NULs and numbers (api_body does that). */
static cJSON *api_body_parse(http_req *req)
{
    const char *ct = http_header(req, "Content-Type");
    if (ct && strncasecmp(ct, "application/json", 16) != 0) {
        api_error(req, 415, "unsupported_media_type",
                  "Content-Type: must be application/json, not %.100s", ct);
        return NULL;
    }
    /* the HTTP layer already refused a body over max_body with 413 */
    size_t len;
    const char *data = http_body(req, &len);
    const char *end = NULL, *nul = memchr(data, '\0', len);
    if (nul) {
        /* JSON has no raw NUL; cJSON would end a string, or the text, there */
        api_error(req, 400, "invalid_argument", "body: a NUL byte at byte %zu",
                  (size_t)(nul - data));
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!j) {
        size_t at = end ? (size_t)(end - data) : 0;
        api_error(req, 400, "invalid_argument", "body: not valid JSON (near byte %zu)", at);
        return NULL;
    }
    for (; end < data + len; end++)
        if (!strchr(" \t\r\n", *end)) {
            cJSON_Delete(j);
            api_error(req, 400, "invalid_argument", "body: trailing data after the JSON value");
            return NULL;
        }
    /* RFC 8259 section 8.1: a JSON text is UTF-8, and cJSON takes any bytes
     * in strings; every string is text that may be stored and printed, so a
     * body with one that is not UTF-8 is refused whole, naming it */
    if (!util_utf8_valid(data, len, NULL)) {
        char err[400];
        if (task_json_check_utf8(data, len, err, sizeof(err)) == 0)
            snprintf(err, sizeof(err), "body: not valid UTF-8");
        cJSON_Delete(j);
        api_error(req, 400, "invalid_argument", "%s", err);
        return NULL;
    }
    return j;
}

cJSON *api_body(http_req *req)
{
    cJSON *j = api_body_parse(req);
    size_t len;
    const char *data = http_body(req, &len);
    char err[400];
    /* cJSON has cut a string at its NUL and read 1e-400 as 0: what it holds
     * is not what was sent */
    if (j && task_json_check(data, len, err, sizeof(err)) != 0) {
        cJSON_Delete(j);
        api_error(req, 400, "invalid_argument", "%s", err);
        return NULL;
    }
    return j;
}

/* ---- POST /v1/tasks ---------------------------------------------------- */

static void api_add_cb(store_status st, const char *id, const char *state, const char *err,
                       void *priv)
{
    api_item *it = priv;
    api_req *r = it->r;
    if (st == ST_OK) metrics.tasks_created++;
    if (st == ST_OK || st == ST_EXISTS) {
        /* the same object as api_created_body, written directly: this is
         * the hot path of ingest. Ids and keys need no JSON escaping. */
        char status[32], body[TASK_ID_MAX + TASK_KEY_MAX + 128];
        if (st == ST_OK) snprintf(status, sizeof(status), "scheduled");
        else api_state_status(state, status, sizeof(status));
        int n = snprintf(body, sizeof(body),
                         "{\"id\":\"%s\",\"key\":\"%s\",\"execute_at\":%lld,\"status\":\"%s\"}\n",
                         id, it->t.key, (long long)it->t.execute_at_ms, status);
        http_reply(r->req, st == ST_OK ? 201 : 200, st == ST_OK ? "Created" : "OK",
                   "application/json", body, (size_t)n);
        r->a->busy--;
        api_req_free(r);
    } else {
        char msg[400];
        snprintf(msg, sizeof(msg), "redis: %s; the task was not stored", err ? err : "unavailable");
        if (id) snprintf(msg, sizeof(msg), "%s", err);
        api_finish_error(r, 503, "unavailable", msg);
    }
    task_input_free(&it->t);
    free(it);
}

/* The request's own trace context (W3C: one that does not parse is
 * ignored, not refused), for each task that gives none: 1 when there is one. */
static int api_trace_context(http_req *req, char tp[TRACE_PARENT_LEN + 1], const char **ts)
{
    const char *h = http_header(req, "traceparent");
    char why[160];
    *ts = NULL;
    if (!h || http_header_count(req, "traceparent") != 1 ||
        trace_parent_parse(h, tp, why, sizeof(why)) != 0)
        return 0;
    const char *s = http_header(req, "tracestate");
    if (s && http_header_count(req, "tracestate") == 1 &&
        trace_state_check(s, why, sizeof(why)) == 0)
        *ts = s;
    return 1;
}

static void api_trace_default(const cJSON *task, task_input *t, const char *tp, const char *ts)
{
    if (!tp || cJSON_GetObjectItemCaseSensitive(task, "traceparent")) return;
    task_input_add_member(t, "traceparent", tp);
    if (ts) task_input_add_member(t, "tracestate", ts);
}

static void api_post_task(api *a, http_req *req)
{
    char err[400];
    cJSON *body = api_body(req);
    if (!body) return;
    api_item *it = xcalloc(1, sizeof(*it));
    if (task_input_parse(body, store_now_ms(a->s), &it->t, err, sizeof(err)) != 0) {
        cJSON_Delete(body);
        free(it);
        api_error(req, 400, "invalid_argument", "%s", err);
        return;
    }
    char tp[TRACE_PARENT_LEN + 1];
    const char *ts;
    int traced = api_trace_context(req, tp, &ts);
    api_trace_default(body, &it->t, traced ? tp : NULL, ts);
    cJSON_Delete(body);
    it->r = api_req_new(a, req);
    store_add(a->s, &it->t, api_add_cb, it);
}

/* ---- POST /v1/tasks/batch ---------------------------------------------- */

/* NULs and numbers not held (task_json_scan) of a batch text: a task
 * holding one gets its error (its first one's); one outside the tasks
 * refuses the whole batch (into whole[]). */
typedef struct api_batch_nul {
    int n;
    char **why;               /* per task, malloc'd */
    char whole[300];
} api_batch_nul;

static int api_batch_found(api_batch_nul *b, const char *path, const char *why)
{
    char *end;
    long i = -1;
    if (strncmp(path, "tasks[", 6) == 0) {
        i = strtol(path + 6, &end, 10);
        if (*end != ']' || end == path + 6) i = -1;
    }
    if (i < 0 || i >= b->n) {
        snprintf(b->whole, sizeof(b->whole), "%s: %s", *path ? path : "body", why);
        return 1;
    }
    if (!b->why[i]) {
        char msg[400];
        snprintf(msg, sizeof(msg), "%s: %s", path, why);
        b->why[i] = xstrdup(msg);
    }
    return 0;
}

static int api_batch_nul_cb(const char *path, void *priv)
{
    return api_batch_found(priv, path, "contains a NUL character (\\u0000)");
}

static int api_batch_num_cb(const char *path, void *priv)
{
    return api_batch_found(priv, path, TASK_NUMBER_LOST);
}

static void api_batch_done(api_req *r)
{
    cJSON *body = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(body, "results");
    for (int i = 0; i < r->n; i++) {
        cJSON_AddItemToArray(arr, r->results[i]);
        r->results[i] = NULL;
    }
    api_finish(r, 200, "OK", body);
    cJSON_Delete(body);
}

static void api_batch_add_cb(store_status st, const char *id, const char *state, const char *err,
                             void *priv)
{
    api_item *it = priv;
    api_req *r = it->r;
    if (st == ST_OK) metrics.tasks_created++;
    if (st == ST_OK || st == ST_EXISTS) {
        r->results[it->idx] = api_created_body(id, &it->t, state);
    } else if (id) {
        /* stored, but not confirmed by the replicas: err says so, and the
         * id lets the client check on it */
        r->results[it->idx] = api_error_body("unavailable", err);
        cJSON_AddStringToObject(r->results[it->idx], "id", id);
    } else {
        char msg[400];
        snprintf(msg, sizeof(msg), "redis: %s; the task was not stored", err ? err : "unavailable");
        r->results[it->idx] = api_error_body("unavailable", msg);
    }
    task_input_free(&it->t);
    free(it);
    if (--r->waiting == 0) api_batch_done(r);
}

static void api_post_batch(api *a, http_req *req)
{
    char err[400], why[300];
    cJSON *body = api_body_parse(req);
    if (!body) return;
    cJSON *tasks = cJSON_GetObjectItemCaseSensitive(body, "tasks");
    int n = cJSON_IsArray(tasks) ? cJSON_GetArraySize(tasks) : 0;
    /* NULs first: cJSON has cut the strings that hold one, so the checks
     * below would read names and values the client never sent */
    size_t len;
    const char *data = http_body(req, &len);
    api_batch_nul nuls = {n, xcalloc((size_t)(n ? n : 1), sizeof(char *)), ""};
    task_json_scan(data, len, api_batch_nul_cb, api_batch_num_cb, &nuls);
    if (nuls.whole[0]) {
        snprintf(why, sizeof(why), "%s", nuls.whole);
        goto refuse;
    }
    if (!cJSON_IsObject(body) || !cJSON_IsArray(tasks)) {
        snprintf(why, sizeof(why), "tasks: required, an array of tasks");
        goto refuse;
    }
    for (cJSON *e = body->child; e; e = e->next)
        if (e != tasks) {
            /* cJSON reads the first "tasks": a second is ambiguous */
            if (strcmp(e->string, "tasks") == 0)
                snprintf(why, sizeof(why), "tasks: given more than once");
            else
                snprintf(why, sizeof(why), "%.100s: unknown field", e->string);
            goto refuse;
        }
    if (n > BATCH_MAX) {
        snprintf(why, sizeof(why), "tasks: at most %d tasks per batch, got %d", BATCH_MAX, n);
        goto refuse;
    }
    api_req *r = api_req_new(a, req);
    r->n = n;
    r->results = xcalloc((size_t)(n ? n : 1), sizeof(cJSON *));
    int64_t now = store_now_ms(a->s);
    char tp[TRACE_PARENT_LEN + 1];
    const char *ts;
    int traced = api_trace_context(req, tp, &ts);
    api_item **items = xcalloc((size_t)(n ? n : 1), sizeof(api_item *));
    int i = 0;
    for (cJSON *e = tasks->child; e; e = e->next, i++) {
        if (nuls.why[i]) {
            r->results[i] = api_error_body("invalid_argument", nuls.why[i]);
            continue;
        }
        api_item *it = xcalloc(1, sizeof(*it));
        if (task_input_parse(e, now, &it->t, err, sizeof(err)) != 0) {
            char msg[450];
            snprintf(msg, sizeof(msg), "tasks[%d].%s", i, err);
            r->results[i] = api_error_body("invalid_argument", msg);
            free(it);
            continue;
        }
        api_trace_default(e, &it->t, traced ? tp : NULL, ts);
        it->r = r;
        it->idx = i;
        items[i] = it;
        r->waiting++;
    }
    for (int k = 0; k < n; k++) free(nuls.why[k]);
    free(nuls.why);
    cJSON_Delete(body);
    if (r->waiting == 0) {
        free(items);
        api_batch_done(r);
        return;
    }
    /* no answer comes back before add() returns, so waiting is final here */
    for (i = 0; i < n; i++)
        if (items[i]) store_add(a->s, &items[i]->t, api_batch_add_cb, items[i]);
    free(items);
    return;
refuse:
    for (int k = 0; k < n; k++) free(nuls.why[k]);
    free(nuls.why);
    cJSON_Delete(body);
    api_error(req, 400, "invalid_argument", "%s", why);
}

/* ---- GET / DELETE /v1/tasks/{id} --------------------------------------- */

typedef struct api_idreq {
    api_req *r;
    char id[TASK_ID_MAX];
} api_idreq;

static void api_get_cb(store_status st, const char *spec, const char *state, const char *err,
                       void *priv)
{
    api_idreq *q = priv;
    if (st == ST_NOTFOUND) {
        api_finish_error(q->r, 404, "not_found", "id: no such task");
    } else if (st != ST_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg), "redis: %s", err ? err : "unavailable");
        api_finish_error(q->r, 503, "unavailable", msg);
    } else {
        char *s = api_render_task(q->id, spec, state);
        cJSON *body = s ? cJSON_Parse(s) : NULL;
        free(s);
        if (body) api_finish(q->r, 200, "OK", body);
        else api_finish_error(q->r, 500, "internal", "stored task is not valid JSON");
        cJSON_Delete(body);
    }
    free(q);
}

static void api_cancel_cb(store_status st, const char *detail, void *priv)
{
    api_idreq *q = priv;
    char msg[300];
    switch (st) {
    case ST_OK:
        metrics.cancelled++;
        api_finish(q->r, 204, "No Content", NULL);
        break;
    case ST_NOTFOUND:
        api_finish_error(q->r, 404, "not_found", "id: no such task");
        break;
    case ST_CONFLICT:
        snprintf(msg, sizeof(msg), "id: the task is %s%s", detail,
                 strcmp(detail, "running") == 0 ? " (its callback is being made)" : "");
        api_finish_error(q->r, 409, "conflict", msg);
        break;
    default:
        snprintf(msg, sizeof(msg), "redis: %s", detail ? detail : "unavailable");
        api_finish_error(q->r, 503, "unavailable", msg);
    }
    free(q);
}

static void api_task_by_id(api *a, http_req *req, const char *id)
{
    const char *m = http_method(req);
    int get = strcmp(m, "GET") == 0;
    if (!get && strcmp(m, "DELETE") != 0) {
        http_add_header(req, "Allow", "GET, DELETE");
        api_error(req, 405, "method_not_allowed", "method: use GET or DELETE on a task");
        return;
    }
    if (strlen(id) >= TASK_ID_MAX || !*id) {
        api_error(req, 404, "not_found", "id: no such task");
        return;
    }
    api_idreq *q = xcalloc(1, sizeof(*q));
    snprintf(q->id, sizeof(q->id), "%s", id);
    q->r = api_req_new(a, req);
    if (get) store_get(a->s, q->id, api_get_cb, q);
    else store_cancel(a->s, q->id, api_cancel_cb, q);
}

/* ---- /v1/schedules ----------------------------------------------------- */

#define SCHED_LIST_MAX 1000

typedef struct api_sreq {
    api_req *r;
    char id[SCHED_ID_MAX];
    int status;                /* the HTTP status to answer */
    store_sch_op op;
    cJSON *body;               /* the schedule rendered, waiting for its last run */
    /* listing */
    int bucket, limit;
    cJSON *items;
    schedule_def *def;         /* POST: the definition asked for */
} api_sreq;

static api_sreq *api_sreq_new(api *a, http_req *req, const char *id)
{
    api_sreq *q = xcalloc(1, sizeof(*q));
    q->r = api_req_new(a, req);
    if (id) memcpy(q->id, id, strnlen(id, sizeof(q->id) - 1)); /* callers checked it fits */
    return q;
}

static int64_t api_num(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

/* A stored schedule for the API: the definition, id, state, run counts and
 * the next runs. NULL if what is stored does not read back. */
static cJSON *api_render_schedule(const store_schedule *sc)
{
    schedule_def d;
    char err[400];
    cJSON *st = cJSON_Parse(sc->state);
    if (!st || schedule_def_load(sc->def, &d, err, sizeof(err)) != 0) {
        cJSON_Delete(st);
        return NULL;
    }
    cJSON *o = cJSON_Parse(sc->def);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(st, "st");
    const char *state = cJSON_IsString(s) ? s->valuestring : "active";
    cJSON_AddStringToObject(o, "id", sc->id);
    cJSON_AddStringToObject(o, "state", state);
    int64_t next = api_num(st, "next", -1), runs = api_num(st, "runs", 0);
    cJSON_AddNumberToObject(o, "runs", (double)runs);
    cJSON_AddNumberToObject(o, "skipped_runs", (double)api_num(st, "skipped", 0));
    int64_t at[SCHED_NEXT_RUNS];
    int n = strcmp(state, "active") == 0 && next >= 0
                ? schedule_upcoming(&d, next, runs, SCHED_NEXT_RUNS, at) : 0;
    cJSON *arr = cJSON_AddArrayToObject(o, "next_runs");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, schedule_time_json(&d, at[i]));
    int64_t last = api_num(st, "last", -1);
    if (last >= 0) {
        cJSON *lr = cJSON_AddObjectToObject(o, "last_run");
        cJSON_AddNumberToObject(lr, "at", (double)last);
        const cJSON *lid = cJSON_GetObjectItemCaseSensitive(st, "lid");
        if (cJSON_IsString(lid)) cJSON_AddStringToObject(lr, "task_id", lid->valuestring);
        cJSON_AddNumberToObject(o, "last_run_at", (double)last);
    }
    schedule_def_free(&d);
    cJSON_Delete(st);
    return o;
}

static void api_sreq_free(api_sreq *q)
{
    cJSON_Delete(q->body);
    cJSON_Delete(q->items);
    if (q->def) schedule_def_free(q->def);
    free(q->def);
    free(q);
}

static void api_sreq_finish(api_sreq *q, cJSON *body)
{
    static const struct { int code; const char *reason; } r[] = {
        {200, "OK"}, {201, "Created"}, {204, "No Content"}};
    const char *reason = "OK";
    for (size_t i = 0; i < sizeof(r) / sizeof(*r); i++)
        if (r[i].code == q->status) reason = r[i].reason;
    api_finish(q->r, q->status, reason, body);
    api_sreq_free(q);
}

static void api_sreq_error(api_sreq *q, int status, const char *code, const char *msg)
{
    api_finish_error(q->r, status, code, msg);
    api_sreq_free(q);
}

static void api_sreq_unavailable(api_sreq *q, const char *err)
{
    char msg[300];
    snprintf(msg, sizeof(msg), "redis: %s", err ? err : "unavailable");
    api_sreq_error(q, 503, "unavailable", msg);
}

static void api_last_run_cb(store_status st, const char *spec, const char *state,
                            const char *err, void *priv)
{
    api_sreq *q = priv;
    cJSON *lr = cJSON_GetObjectItemCaseSensitive(q->body, "last_run");
    char status[32];
    (void)spec, (void)err;
    if (st == ST_OK) api_state_status(state, status, sizeof(status));
    /* its record outlived its retention: gone (not a task's status) */
    else snprintf(status, sizeof(status), st == ST_NOTFOUND ? "gone" : "unknown");
    cJSON_AddStringToObject(lr, "status", status);
    api_sreq_finish(q, q->body);
}

/* Answer with the schedule; GET also looks up its last run's task. */
static void api_sreq_answer(api_sreq *q, const store_schedule *sc, int with_last)
{
    cJSON *o = api_render_schedule(sc);
    if (!o) {
        api_sreq_error(q, 500, "internal", "stored schedule does not read back");
        return;
    }
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(o, "last_run");
    const cJSON *lid = lr ? cJSON_GetObjectItemCaseSensitive(lr, "task_id") : NULL;
    if (with_last && cJSON_IsString(lid)) {
        q->body = o;
        store_get(q->r->a->s, lid->valuestring, api_last_run_cb, q);
        return;
    }
    api_sreq_finish(q, o);
    cJSON_Delete(o);
}

static void api_ahead_cancel_cb(store_status st, const char *detail, void *priv)
{
    (void)detail, (void)priv;
    if (st == ST_OK) metrics.cancelled++;
}

/* Runs made ahead under a state that a write replaced (PUT, pause, DELETE)
 * must not fire: cancel them (one already calling back finishes). */
static void api_cancel_ahead(api *a, const char *prev)
{
    cJSON *st = prev ? cJSON_Parse(prev) : NULL;
    const cJSON *fut = st ? cJSON_GetObjectItemCaseSensitive(st, "fut") : NULL, *e;
    cJSON_ArrayForEach(e, fut)
        if (cJSON_IsString(e)) store_cancel(a->s, e->valuestring, api_ahead_cancel_cb, NULL);
    cJSON_Delete(st);
}

static void api_sch_written_cb(store_status st, const store_schedule *sc, const char *err,
                               void *priv)
{
    api_sreq *q = priv;
    char msg[300];
    switch (st) {
    case ST_OK:
        if (q->op != SCH_CREATE && q->op != SCH_RESUME) api_cancel_ahead(q->r->a, sc->prev);
        if (q->op != SCH_DELETE && q->op != SCH_PAUSE && q->r->a->on_schedule) {
            const char *key = schedule_id_key(sc->id);
            q->r->a->on_schedule(task_bucket(key ? key : "", (int)q->r->a->s->cfg->buckets),
                                 q->r->a->on_schedule_priv);
        }
        if (q->op == SCH_DELETE) {
            q->status = 204;
            api_sreq_finish(q, NULL);
            return;
        }
        api_sreq_answer(q, sc, 0);
        return;
    case ST_EXISTS:
        q->status = 200;
        api_sreq_answer(q, sc, 0);
        return;
    case ST_NOTFOUND:
        api_sreq_error(q, 404, "not_found", "id: no such schedule");
        return;
    case ST_CONFLICT:
        if (q->op == SCH_CREATE && q->def && schedule_def_same(q->def, sc->def)) {
            /* the same POST again, its default start_at later */
            q->status = 200;
            api_sreq_answer(q, sc, 0);
            return;
        }
        if (q->op == SCH_CREATE)
            snprintf(msg, sizeof(msg), "key: a schedule with this key exists with another "
                     "definition (change it with PUT /v1/schedules/%s)", sc->id);
        else
            snprintf(msg, sizeof(msg), "id: the schedule is completed");
        api_sreq_error(q, 409, "conflict", msg);
        return;
    default:
        api_sreq_unavailable(q, err);
    }
}

/* POST /v1/schedules and PUT /v1/schedules/{id}: a body to a definition. */
static void api_put_schedule(api *a, http_req *req, const char *id)
{
    char err[400], sid[SCHED_ID_MAX];
    cJSON *body = api_body(req);
    if (!body) return;
    /* PUT names the schedule in its path: a body without a key is for it
     * (rather than for a random key, refused as another schedule's) */
    if (id && cJSON_IsObject(body) && !cJSON_GetObjectItemCaseSensitive(body, "key"))
        cJSON_AddStringToObject(body, "key", schedule_id_key(id));
    schedule_def d;
    int64_t now = store_now_ms(a->s);
    if (schedule_def_parse(body, now, &d, err, sizeof(err)) != 0) {
        cJSON_Delete(body);
        api_error(req, 400, "invalid_argument", "%s", err);
        return;
    }
    cJSON_Delete(body);
    schedule_id(d.key, sid);
    if (id && strcmp(sid, id) != 0) {
        schedule_def_free(&d);
        api_error(req, 400, "invalid_argument", "key: %s is not the key of schedule %s",
                  d.key, id);
        return;
    }
    api_sreq *q = api_sreq_new(a, req, sid);
    q->op = id ? SCH_REPLACE : SCH_CREATE;
    q->status = id ? 200 : 201;
    q->def = xmalloc(sizeof(*q->def));
    *q->def = d;
    store_sch_write(a->s, q->op, sid, d.json, schedule_first(&d, now), api_sch_written_cb, q);
}

static void api_sch_get_cb(store_status st, const store_schedule *sc, const char *err,
                           void *priv)
{
    api_sreq *q = priv;
    if (st == ST_NOTFOUND) {
        api_sreq_error(q, 404, "not_found", "id: no such schedule");
    } else if (st != ST_OK) {
        api_sreq_unavailable(q, err);
    } else if (q->op == SCH_RESUME) {
        /* resume: the next run after now, by the stored definition */
        schedule_def d;
        char why[400];
        if (schedule_def_load(sc->def, &d, why, sizeof(why)) != 0) {
            api_sreq_error(q, 500, "internal", "stored schedule does not read back");
            return;
        }
        cJSON *o = cJSON_Parse(sc->state);
        int64_t runs = api_num(o, "runs", 0), next = schedule_first(&d, store_now_ms(q->r->a->s));
        cJSON_Delete(o);
        if (next >= 0 && d.times && runs >= d.times) next = -1;
        schedule_def_free(&d);
        q->status = 200;
        store_sch_write(q->r->a->s, SCH_RESUME, q->id, NULL, next, api_sch_written_cb, q);
    } else {
        q->status = 200;
        api_sreq_answer(q, sc, 1);
    }
}

static void api_schedule_by_id(api *a, http_req *req, const char *rest)
{
    const char *m = http_method(req);
    char id[SCHED_ID_MAX + 1];
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n > SCHED_ID_MAX - 1 || n == 0) {
        api_error(req, 404, "not_found", "id: no such schedule");
        return;
    }
    memcpy(id, rest, n);
    id[n] = '\0';
    if (!schedule_id_key(id)) {
        api_error(req, 404, "not_found", "id: no such schedule");
        return;
    }
    if (slash) {
        int pause = strcmp(slash, "/pause") == 0;
        if (!pause && strcmp(slash, "/resume") != 0) {
            api_error(req, 404, "not_found", "path: no such resource");
            return;
        }
        if (strcmp(m, "POST") != 0) {
            http_add_header(req, "Allow", "POST");
            api_error(req, 405, "method_not_allowed", "method: use POST");
            return;
        }
        api_sreq *q = api_sreq_new(a, req, id);
        q->status = 200;
        if (pause) {
            q->op = SCH_PAUSE;
            store_sch_write(a->s, SCH_PAUSE, id, NULL, -1, api_sch_written_cb, q);
        } else {
            q->op = SCH_RESUME;
            store_sch_get(a->s, id, api_sch_get_cb, q);
        }
        return;
    }
    if (strcmp(m, "GET") == 0) {
        api_sreq *q = api_sreq_new(a, req, id);
        q->op = SCH_CREATE; /* a read */
        store_sch_get(a->s, id, api_sch_get_cb, q);
    } else if (strcmp(m, "PUT") == 0) {
        api_put_schedule(a, req, id);
    } else if (strcmp(m, "DELETE") == 0) {
        api_sreq *q = api_sreq_new(a, req, id);
        q->op = SCH_DELETE;
        store_sch_write(a->s, SCH_DELETE, id, NULL, -1, api_sch_written_cb, q);
    } else {
        http_add_header(req, "Allow", "GET, PUT, DELETE");
        api_error(req, 405, "method_not_allowed", "method: use GET, PUT or DELETE on a schedule");
    }
}

/* GET /v1/schedules?limit=N&cursor=C: bucket by bucket, in id order. The
 * cursor is "<bucket>-<last id>". */
static void api_sch_list_cb(const store_schedule *items, int n, const char *err, void *priv)
{
    api_sreq *q = priv;
    api *a = q->r->a;
    if (err) {
        api_sreq_unavailable(q, err);
        return;
    }
    for (int i = 0; i < n; i++) {
        cJSON *o = api_render_schedule(&items[i]);
        /* a listing shows URLs redacted; GET of one schedule shows them whole */
        if (o) task_redact_urls(cJSON_GetObjectItemCaseSensitive(o, "task"));
        if (o) cJSON_AddItemToArray(q->items, o);
    }
    int have = cJSON_GetArraySize(q->items);
    if (n > 0) snprintf(q->id, sizeof(q->id), "%s", items[n - 1].id);
    if (have < q->limit && q->bucket + 1 < (int)a->s->cfg->buckets) {
        q->bucket++;
        q->id[0] = '\0';
        store_sch_list(a->s, q->bucket, "", q->limit - have, api_sch_list_cb, q);
        return;
    }
    cJSON *body = cJSON_CreateObject();
    cJSON_AddItemToObject(body, "schedules", q->items);
    q->items = NULL;
    if (have >= q->limit) {
        char cur[SCHED_ID_MAX + 16];
        snprintf(cur, sizeof(cur), "%d-%s", q->bucket, q->id);
        cJSON_AddStringToObject(body, "next_cursor", cur);
    } else {
        cJSON_AddNullToObject(body, "next_cursor");
    }
    q->status = 200;
    api_sreq_finish(q, body);
    cJSON_Delete(body);
}

int api_hex(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int api_query(const char *target, const char *name, char *out, size_t outlen)
{
    const char *q = strchr(target, '?');
    size_t nl = strlen(name);
    for (q = q ? q + 1 : NULL; q && *q; q = strchr(q, '&') ? strchr(q, '&') + 1 : NULL) {
        if (strncmp(q, name, nl) != 0 || q[nl] != '=') continue;
        const char *v = q + nl + 1, *end = v + strcspn(v, "&");
        size_t n = 0;
        while (v < end && n + 1 < outlen) {
            int hi, lo;
            if (*v == '%' && end - v >= 3 && (hi = api_hex(v[1])) >= 0 && (lo = api_hex(v[2])) >= 0) {
                out[n++] = (char)(hi * 16 + lo);
                v += 3;
            } else {
                out[n++] = *v == '+' ? ' ' : *v;
                v++;
            }
        }
        out[n] = '\0';
        return 1;
    }
    return 0;
}

int api_page_query(http_req *req, int64_t max, int64_t *limit, char *cursor, size_t cursorlen)
{
    const char *target = http_target(req), *q = strchr(target, '?');
    char v[32];
    /* every parameter must be one of ours */
    for (q = q ? q + 1 : NULL; q && *q; q = strchr(q, '&') ? strchr(q, '&') + 1 : NULL) {
        size_t n = strcspn(q, "=&");
        if (!((n == 5 && strncmp(q, "limit", 5) == 0) || (n == 6 && strncmp(q, "cursor", 6) == 0))) {
            api_error(req, 400, "invalid_argument", "%.*s: unknown parameter (limit, cursor)",
                      (int)(n > 100 ? 100 : n), q);
            return -1;
        }
    }
    if (api_query(target, "limit", v, sizeof(v))) {
        char *end;
        long long n = strtoll(v, &end, 10);
        if (!*v || *end || n < 1 || n > max) {
            api_error(req, 400, "invalid_argument", "limit: must be an integer from 1 to %lld",
                      (long long)max);
            return -1;
        }
        *limit = n;
    }
    cursor[0] = '\0';
    if (api_query(target, "cursor", cursor, cursorlen) && strlen(cursor) + 1 >= cursorlen) {
        api_error(req, 400, "invalid_argument", "cursor: malformed (pass next_cursor as given)");
        return -1;
    }
    return 0;
}

static void api_list_schedules(api *a, http_req *req)
{
    char v[SCHED_ID_MAX + 32];
    int64_t limit = 100;
    if (api_page_query(req, SCHED_LIST_MAX, &limit, v, sizeof(v)) != 0) return;
    int bucket = 0;
    const char *after = "";
    if (*v) {
        char *end;
        long b = strtol(v, &end, 10);
        if (end == v || *end != '-' || b < 0 || b >= a->s->cfg->buckets ||
            (end[1] && !schedule_id_key(end + 1))) {
            api_error(req, 400, "invalid_argument", "cursor: malformed (pass next_cursor as given)");
            return;
        }
        bucket = (int)b;
        after = end + 1;
    }
    api_sreq *s = api_sreq_new(a, req, after);
    s->bucket = bucket;
    s->limit = (int)limit;
    s->items = cJSON_CreateArray();
    store_sch_list(a->s, bucket, s->id, s->limit, api_sch_list_cb, s);
}

/* ---- GET /healthz ------------------------------------------------------ */

/* What the store found wrong with its backend, as /healthz and /v1/stats
 * give it. Returns 0 when it keeps tickd from taking tasks. */
static int api_alerts(const api *a, cJSON *obj)
{
    store_alerts al;
    store_get_alerts(a->s, &al);
    if (al.refusing) cJSON_AddStringToObject(obj, "refusing_adds", al.refusing);
    if (al.evicting) cJSON_AddNumberToObject(obj, "evicting_masters", al.evicting);
    if (al.memory_ratio > 0) cJSON_AddNumberToObject(obj, "memory_used_ratio", al.memory_ratio);
    cJSON_AddNumberToObject(obj, "data_lost", (double)al.data_lost);
    if (al.data_lost_last) {
        char at[TZ_RFC3339_MAX], why[256];
        tz_rfc3339(tz_get("UTC", why), al.data_lost_last_ms, at); /* built in */
        cJSON_AddStringToObject(obj, "data_lost_last", al.data_lost_last);
        cJSON_AddStringToObject(obj, "data_lost_last_at", at);
    }
    return al.refusing == NULL;
}

static void api_health_cb(int ok, const char *err, void *priv)
{
    api_req *r = priv;
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "redis", ok ? "ok" : (err ? err : "unavailable"));
    cJSON *st = cJSON_AddObjectToObject(body, "store");
    if (!api_alerts(r->a, st)) ok = 0;
    api_finish(r, ok ? 200 : 503, ok ? "OK" : "Service Unavailable", body);
    cJSON_Delete(body);
}

void api_set_waiting(api *a, const char *why)
{
    free(a->waiting_for);
    a->waiting_for = xstrdup(why);
}

void api_set_store(api *a, store *s)
{
    a->s = s;
    free(a->waiting_for);
    a->waiting_for = NULL;
}

/* Before the store is reached: every request is answered 503, /healthz with
 * the reason. */
static void api_route_waiting(api *a, http_req *req, const char *path)
{
    const char *why = a->waiting_for ? a->waiting_for : "starting";
    if (strcmp(path, "/healthz") == 0) {
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "redis", why);
        cJSON_AddStringToObject(body, "status", "starting");
        api_send_json(req, 503, "Service Unavailable", body);
        cJSON_Delete(body);
        return;
    }
    http_add_header(req, "Retry-After", "1");
    api_error(req, 503, "unavailable", "store: not reached yet: %.300s", why);
}

/* ---- routing ----------------------------------------------------------- */

/* What the request's token may do: nothing (no or a wrong token), read, or
 * everything. Every token is compared, each over its whole length, whatever
 * the bytes: the time taken tells neither a token's bytes nor which token
 * matched. */
enum { API_SCOPE_NONE, API_SCOPE_READ, API_SCOPE_ADMIN };

static int api_authorized(const api *a, http_req *req)
{
    const char *h = http_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return API_SCOPE_NONE;
    for (h += 7; *h == ' '; h++) {}
    size_t m = strlen(h);
    unsigned char admin = 0, read = 0;
    for (int t = 0; t < a->ntokens; t++) {
        const char *tok = a->tokens[t];
        size_t n = strlen(tok);
        unsigned char diff = n != m;
        for (size_t i = 0; i < n; i++) diff |= (unsigned char)(tok[i] ^ (i < m ? h[i] : 0));
        unsigned char hit = (unsigned char)(diff == 0);
        admin |= (unsigned char)(hit & (t < a->nadmin));
        read |= hit;
    }
    return admin ? API_SCOPE_ADMIN : read ? API_SCOPE_READ : API_SCOPE_NONE;
}

/* The HTTP server's gate, with an API token set: a /v1/ request without it,
 * one of a read-only token that would write, or a body sent anywhere else,
 * is refused on its head, before the body is read. */
static int api_gate(http_req *req, void *arg, http_refusal *out)
{
    const api *a = arg;
    /* open: the API's description, as /healthz and /metrics */
    if (strncmp(http_target(req), "/v1/", 4) != 0 ||
        strcmp(http_target(req), "/v1/openapi.json") == 0) {
        /* the open routes take no body: without the token, no client may
         * have the server buffer server.max_body per connection */
        if (!http_body_coming(req)) return 0;
        *out = (http_refusal){413, "Payload Too Large", "payload_too_large", ""};
        snprintf(out->msg, sizeof(out->msg), "body: only /v1/ requests carry one");
        return 1;
    }
    if (http_header_count(req, "Authorization") > 1) {
        *out = (http_refusal){400, "Bad Request", "invalid_argument", ""};
        snprintf(out->msg, sizeof(out->msg), "Authorization: given more than once");
        return 1;
    }
    int scope = api_authorized(a, req);
    /* HEAD comes as GET: a read-only token reads, and does nothing else */
    if (scope == API_SCOPE_READ && strcmp(http_method(req), "GET") != 0) {
        const char *target = http_target(req);
        *out = (http_refusal){403, "Forbidden", "forbidden", ""};
        snprintf(out->msg, sizeof(out->msg), "Authorization: a read-only token "
                 "(server.read_tokens); %.16s %.*s needs a token of server.api_token",
                 http_method(req), (int)(strcspn(target, "?") < 120 ? strcspn(target, "?") : 120),
                 target);
        return 1;
    }
    if (scope != API_SCOPE_NONE) return 0;
    int given = http_header(req, "Authorization") != NULL;
    http_add_header(req, "WWW-Authenticate", given ? "Bearer error=\"invalid_token\"" : "Bearer");
    *out = (http_refusal){401, "Unauthorized", "unauthorized", ""};
    snprintf(out->msg, sizeof(out->msg), "Authorization: %s",
             given ? "wrong token (want Bearer and server.api_token)"
                   : "missing (send Authorization: Bearer <server.api_token>)");
    return 1;
}

static void api_route(http_req *req, void *arg)
{
    api *a = arg;
    const char *uri = http_target(req);
    const char *m = http_method(req);
    char path[512];
    size_t n = strcspn(uri, "?");
    if (n >= sizeof(path)) {
        api_error(req, 404, "not_found", "path: no such resource");
        return;
    }
    memcpy(path, uri, n);
    path[n] = '\0';
    if (ui_route(req, path)) return;
    if (!a->s) {
        api_route_waiting(a, req, path);
        return;
    }

    if (strcmp(path, "/v1/tasks") == 0) {
        if (strcmp(m, "POST") == 0) {
            api_post_task(a, req);
            return;
        }
        if (strcmp(m, "GET") == 0) {
            api_list_tasks(a, req);
            return;
        }
        http_add_header(req, "Allow", "GET, POST");
        api_error(req, 405, "method_not_allowed", "method: use POST to create a task, GET to list");
        return;
    }
    if (strcmp(path, "/v1/tasks/retry") == 0) {
        if (strcmp(m, "POST") == 0) {
            api_retry_tasks(a, req);
            return;
        }
        http_add_header(req, "Allow", "POST");
        api_error(req, 405, "method_not_allowed", "method: use POST to retry tasks");
        return;
    }
    if (strncmp(path, "/v1/tasks/", 10) == 0 && strchr(path + 10, '/')) {
        char id[TASK_ID_MAX];
        const char *slash = strchr(path + 10, '/');
        int retry = strcmp(slash, "/retry") == 0;
        if ((!retry && strcmp(slash, "/run") != 0) || (size_t)(slash - path - 10) >= sizeof(id)) {
            api_error(req, 404, "not_found", "path: no such resource: %.200s", path);
            return;
        }
        if (strcmp(m, "POST") != 0) {
            http_add_header(req, "Allow", "POST");
            api_error(req, 405, "method_not_allowed", "method: use POST");
            return;
        }
        snprintf(id, sizeof(id), "%.*s", (int)(slash - path - 10), path + 10);
        api_move_task(a, req, id, retry);
        return;
    }
    if (strcmp(path, "/v1/tasks/batch") == 0) {
        if (strcmp(m, "POST") == 0) {
            api_post_batch(a, req);
            return;
        }
        http_add_header(req, "Allow", "POST");
        api_error(req, 405, "method_not_allowed", "method: use POST for a batch");
        return;
    }
    if (strncmp(path, "/v1/tasks/", 10) == 0 && !strchr(path + 10, '/')) {
        api_task_by_id(a, req, path + 10);
        return;
    }
    if (api_console(a, req, path)) return;
    if (strcmp(path, "/v1/schedules") == 0) {
        if (strcmp(m, "POST") == 0) api_put_schedule(a, req, NULL);
        else if (strcmp(m, "GET") == 0) api_list_schedules(a, req);
        else {
            http_add_header(req, "Allow", "GET, POST");
            api_error(req, 405, "method_not_allowed", "method: use POST to create a schedule, GET to list");
        }
        return;
    }
    if (strncmp(path, "/v1/schedules/", 14) == 0) {
        api_schedule_by_id(a, req, path + 14);
        return;
    }
    if ((strncmp(path, "/v1/queues", 10) == 0 && (path[10] == '\0' || path[10] == '/')) ||
        (strncmp(path, "/v1/destinations", 16) == 0 && (path[16] == '\0' || path[16] == '/'))) {
        api_flow(a, req, path);
        return;
    }
    if (strcmp(path, "/healthz") == 0) {
        if (strcmp(m, "GET") != 0) {
            http_add_header(req, "Allow", "GET");
            api_error(req, 405, "method_not_allowed", "method: use GET");
            return;
        }
        api_req *r = api_req_new(a, req);
        store_health(a->s, api_health_cb, r);
        return;
    }
    if (strcmp(path, "/v1/openapi.json") == 0) {
        if (strcmp(m, "GET") != 0) {
            http_add_header(req, "Allow", "GET");
            api_error(req, 405, "method_not_allowed", "method: use GET");
            return;
        }
        http_reply(req, 200, "OK", "application/json", openapi_json, openapi_json_len);
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        if (strcmp(m, "GET") != 0) {
            http_add_header(req, "Allow", "GET");
            api_error(req, 405, "method_not_allowed", "method: use GET");
            return;
        }
        api_metrics(a, req);
        return;
    }
    if (strcmp(path, "/v1/whoami") == 0) {
        int scope = a->ntokens ? api_authorized(a, req) : API_SCOPE_ADMIN;
        ui_whoami(req, !a->ntokens ? "open" : scope == API_SCOPE_ADMIN ? "admin" : "read");
        return;
    }
    if (strcmp(path, "/v1/stats") == 0) {
        if (strcmp(m, "GET") != 0) {
            http_add_header(req, "Allow", "GET");
            api_error(req, 405, "method_not_allowed", "method: use GET");
            return;
        }
        cJSON *body = cJSON_CreateObject();
        a->stats(a->stats_priv, body);
        api_alerts(a, cJSON_AddObjectToObject(body, "store"));
        api_send_json(req, 200, "OK", body);
        cJSON_Delete(body);
        return;
    }
    api_error(req, 404, "not_found", "path: no such resource: %.200s", path);
}

static void api_free_tokens(api *a)
{
    for (int t = 0; t < a->ntokens; t++) free(a->tokens[t]);
    free(a->tokens);
    a->tokens = NULL;
    a->ntokens = a->nadmin = 0;
}

/* Add the space-separated tokens of list (as config_validate checked them),
 * but those already there: a token in both lists stays a full one. */
static void api_add_tokens(api *a, const char *list)
{
    for (const char *t = list ? list : ""; *(t += strspn(t, " "));) {
        size_t n = strcspn(t, " "), have = 0;
        for (int i = 0; i < a->ntokens && !have; i++)
            have = strlen(a->tokens[i]) == n && memcmp(a->tokens[i], t, n) == 0;
        if (!have) {
            a->tokens = xrealloc(a->tokens, (size_t)(a->ntokens + 1) * sizeof(*a->tokens));
            a->tokens[a->ntokens++] = xstrndup(t, n);
        }
        t += n;
    }
}

int api_set_tokens(api *a, const char *token, const char *read_tokens, int *nread)
{
    api_free_tokens(a);
    api_add_tokens(a, token);
    a->nadmin = a->ntokens;
    /* read-only tokens without a full one would guard nothing
     * (config_validate refuses it; the API stays open rather than half shut) */
    if (a->nadmin) api_add_tokens(a, read_tokens);
    if (nread) *nread = a->ntokens - a->nadmin;
    http_server_set_gate(a->http, a->ntokens ? api_gate : NULL);
    return a->nadmin;
}

api *api_create(struct event_base *base, const char *listen, int64_t max_body,
                int64_t idle_timeout_ms, const char *token, const char *read_tokens, store *s,
                api_stats_fn *stats, void *stats_priv, char *err, size_t errlen)
{
    api *a = xcalloc(1, sizeof(*a));
    a->s = s;
    a->stats = stats;
    a->stats_priv = stats_priv;
    a->http = http_server_new(base, listen, (size_t)max_body, idle_timeout_ms, api_route, a, err,
                              errlen);
    if (!a->http) {
        free(a);
        return NULL;
    }
    api_set_tokens(a, token, read_tokens, NULL);
    return a;
}

void api_on_schedule(api *a, api_schedule_fn *fn, void *priv)
{
    a->on_schedule = fn;
    a->on_schedule_priv = priv;
}

int api_port(const api *a) { return http_server_port(a->http); }
http_server *api_http(const api *a) { return a->http; }
int api_busy(const api *a) { return a->busy; }

void api_stop_accepting(api *a) { http_server_stop_accepting(a->http); }

void api_on_flow(api *a, api_flow_fn *fn, void *priv)
{
    a->on_flow = fn;
    a->on_flow_priv = priv;
}

void api_on_metrics(api *a, api_gauges_fn *fn, void *priv)
{
    a->gauges = fn;
    a->gauges_priv = priv;
}

void api_free(api *a)
{
    if (!a) return;
    free(a->count_waiting);
    free(a->waiting_for);
    http_server_free(a->http);
    api_free_tokens(a);
    free(a);
}
