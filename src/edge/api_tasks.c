/* api_tasks.c -- the routes of tasks (doc/api.md):
 *   POST   /v1/tasks                 schedule a task
 *   POST   /v1/tasks/batch           up to BATCH_MAX, each with its own answer
 *   GET    /v1/tasks/{id}            one task, as stored
 *   DELETE /v1/tasks/{id}            cancel it
 *   GET    /v1/tasks?status=...      a page of tasks of one status
 *   POST   /v1/tasks/{id}/retry      a failed or cancelled task, again
 *   POST   /v1/tasks/{id}/run        a scheduled task, now
 *   POST   /v1/tasks/retry           every failed (or cancelled) task matching
 *                                    a filter, in bounded batches */
#include "edge/api_tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/trace.h"
#include "base/util.h"
#include "edge/api_reply.h"
#include "model/schedule.h"
#include "model/task.h"

#define LIST_LIMIT_MAX 1000
#define LIST_LIMIT_DEFAULT 100
#define RETRY_LIMIT_MAX 10000
#define RETRY_LIMIT_DEFAULT 1000
#define RETRY_PAGE 100
#define BATCH_MAX 1000

/* A task of POST /v1/tasks or of a batch, waiting for the store. */
typedef struct api_item {
    api_req *r;
    int idx;                  /* result index */
    task_input t;
} api_item;

/* ---- rendering --------------------------------------------------------- */

/* Render a stored task for GET: the spec plus id, status, attempts and the
 * last failure. A malloc'd JSON string, or NULL if spec or state is not JSON. */
char *api_tasks_render(const char *id, const char *spec, const char *state)
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
void api_tasks_state_status(const char *state, char *out, size_t outlen)
{
    cJSON *st = state ? cJSON_Parse(state) : NULL;
    cJSON *s = st ? cJSON_GetObjectItemCaseSensitive(st, "s") : NULL;
    util_copy(out, outlen, cJSON_IsString(s) ? s->valuestring : "scheduled");
    cJSON_Delete(st);
}

/* Answer r with the stored task, or with status, code and why when it does
 * not read back (spec NULL: it was not read). */
static void api_answer_task(api_req *r, const char *id, const char *spec, const char *state,
                            int status, const char *code, const char *why)
{
    char *s = spec ? api_tasks_render(id, spec, state) : NULL;
    cJSON *body = s ? cJSON_Parse(s) : NULL;
    free(s);
    if (body) api_finish(r, 200, "OK", body);
    else api_finish_error(r, status, code, why);
    cJSON_Delete(body);
}

/* A created (or found) task's answer {id, key, execute_at, status}, as
 * cJSON would print it: ids, keys and status words need no JSON escaping,
 * and execute_at is a whole number of milliseconds (printed by cJSON as
 * such). This is the hot path of ingest, one and batch. */
static void api_created_text(util_buf *b, const char *id, const char *key, int64_t at_ms,
                             const char *status)
{
    util_buf_add(b, "{\"id\":\"", 7);
    util_buf_str(b, id);
    util_buf_add(b, "\",\"key\":\"", 9);
    util_buf_str(b, key);
    util_buf_add(b, "\",\"execute_at\":", 15);
    util_buf_int(b, at_ms);
    util_buf_add(b, ",\"status\":\"", 11);
    util_buf_str(b, status);
    util_buf_add(b, "\"}", 2);
}

/* The status of a task add() answered: a stored one is scheduled (add.lua
 * writes that state; one its call's first run stored, found when the call
 * was sent again, may have been claimed since: scheduled is what this
 * request made), one found has its state's. */
static void api_added_status(store_status st, const char *state, char *out, size_t outlen)
{
    if (st == ST_OK) util_copy(out, outlen, "scheduled");
    else api_tasks_state_status(state, out, outlen);
}

/* ---- POST /v1/tasks ---------------------------------------------------- */

static void api_add_cb(store_status st, const char *id, const char *state, const char *err,
                       void *priv)
{
    api_item *it = priv;
    api_req *r = it->r;
    api *a = r->a;
    if (st == ST_OK) metrics.tasks_created++;
    if (st == ST_OK || st == ST_EXISTS) {
        char status[32], body[TASK_ID_MAX + TASK_KEY_MAX + 128];
        util_buf b = UTIL_BUF(body);
        api_added_status(st, state, status, sizeof(status));
        api_created_text(&b, id, it->t.key, it->t.execute_at_ms, status);
        util_buf_add(&b, "\n", 1);
        http_reply(r->req, st == ST_OK ? 201 : 200, st == ST_OK ? "Created" : "OK",
                   "application/json", body, b.len);
        r->a->busy--;
        api_req_free(r);
    } else if (id) {
        /* stored, or perhaps stored: err says which; the id lets the
         * client look (the batch's results carry it the same way) */
        cJSON *o = api_error_body("unavailable", err);
        cJSON_AddStringToObject(o, "id", id);
        api_finish(r, 503, "Service Unavailable", o);
        cJSON_Delete(o);
    } else {
        char msg[400];
        snprintf(msg, sizeof(msg), "redis: %s; the task was not stored", err ? err : "unavailable");
        api_finish_error(r, 503, "unavailable", msg);
    }
    task_input_free(&it->t);
    util_pool_put(&a->item_pool, it);
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

void api_tasks_add(api *a, http_req *req, const api_params *p)
{
    char err[400];
    (void)p;
    cJSON *body = api_body(req);
    if (!body) return;
    /* not zeroed: task_input_parse sets the task whole, r is set below */
    api_item *it = util_pool_get(&a->item_pool, sizeof(*it));
    it->idx = 0;
    int64_t now = store_now_ms(a->s);
    if (task_input_parse(body, now, &it->t, err, sizeof(err)) != 0) {
        cJSON_Delete(body);
        util_pool_put(&a->item_pool, it);
        api_error(req, 400, "invalid_argument", "%s", err);
        return;
    }
    char tp[TRACE_PARENT_LEN + 1];
    const char *ts;
    int traced = api_trace_context(req, tp, &ts);
    api_trace_default(body, &it->t, traced ? tp : NULL, ts);
    cJSON_Delete(body);
    /* homed by the clock its due was read by (the store would read it again) */
    it->t.home_now_ms = now;
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

/* A result's text: o printed as api_send_json would print it within the
 * answer (then freed). Its pieces are cut at ASCII, so cleaning each one
 * to UTF-8 is cleaning the whole. */
static char *api_batch_json(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    log_assert(s); /* out of memory */
    size_t n = strlen(s);
    if (!util_utf8_valid(s, n, NULL)) util_text_clean(s, n);
    return s;
}

static char *api_batch_error(const char *code, const char *msg)
{
    return api_batch_json(api_error_body(code, msg));
}

/* A task of a batch, in one array of them all (by index): a created (or
 * found) task's answer is kept as its parts until all are in. */
typedef struct api_batch_item {
    api_item it;
    char id[TASK_ID_MAX];
    char status[32];
} api_batch_item;

/* {"results":[...]}, in index order: the text cJSON would print of the same
 * object, with no second UTF-8 check (each error's text was checked when
 * it was made, and ids, keys and status words are ASCII). Frees items. */
static void api_batch_done(api_req *r, api_batch_item *items)
{
    size_t len = sizeof("{\"results\":[]}\n");
    for (int i = 0; i < r->n; i++)
        len += (r->results[i] ? strlen(r->results[i]) : TASK_ID_MAX + TASK_KEY_MAX + 128) + 1;
    char *out = xmalloc(len);
    util_buf b = {out, 0, len};
    util_buf_add(&b, "{\"results\":[", 12);
    for (int i = 0; i < r->n; i++) {
        const api_batch_item *x = &items[i];
        if (i) util_buf_add(&b, ",", 1);
        if (r->results[i]) util_buf_str(&b, r->results[i]);
        else api_created_text(&b, x->id, x->it.t.key, x->it.t.execute_at_ms, x->status);
    }
    util_buf_add(&b, "]}\n", 3);
    free(items);
    http_reply(r->req, 200, "OK", "application/json", out, b.len);
    free(out);
    r->a->busy--;
    api_req_free(r);
}

static void api_batch_add_cb(store_status st, const char *id, const char *state, const char *err,
                             void *priv)
{
    api_batch_item *x = priv;
    api_req *r = x->it.r;
    if (st == ST_OK) metrics.tasks_created++;
    if (st == ST_OK || st == ST_EXISTS) {
        util_copy(x->id, sizeof(x->id), id);
        api_added_status(st, state, x->status, sizeof(x->status));
    } else if (id) {
        /* stored but not confirmed by the replicas, or sent and never
         * answered (perhaps stored): err says which, and the id lets the
         * client check on it */
        cJSON *o = api_error_body("unavailable", err);
        cJSON_AddStringToObject(o, "id", id);
        r->results[x->it.idx] = api_batch_json(o);
    } else {
        char msg[400];
        snprintf(msg, sizeof(msg), "redis: %s; the task was not stored", err ? err : "unavailable");
        r->results[x->it.idx] = api_batch_error("unavailable", msg);
    }
    task_input_free(&x->it.t);
    /* the items are one array: the first is idx items before this one */
    if (--r->waiting == 0) api_batch_done(r, x - x->it.idx);
}

void api_tasks_add_batch(api *a, http_req *req, const api_params *p)
{
    char err[400], why[300];
    (void)p;
    cJSON *body = api_body_parse(req);
    if (!body) return;
    cJSON *tasks = cJSON_GetObjectItemCaseSensitive(body, "tasks");
    int n = cJSON_IsArray(tasks) ? cJSON_GetArraySize(tasks) : 0;
    /* NULs first: cJSON has cut the strings that hold one, so the checks
     * below would read names and values the client never sent */
    size_t len;
    const char *data = http_body(req, &len);
    api_batch_nul nuls = {n, xcalloc((size_t)(n ? n : 1), sizeof(char *)), ""};
    if (!task_json_plain(data, len))
        task_json_scan(data, len, api_batch_nul_cb, api_batch_num_cb, &nuls);
    if (nuls.whole[0]) {
        util_copy(why, sizeof(why), nuls.whole);
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
    r->results = xcalloc((size_t)(n ? n : 1), sizeof(char *));
    int64_t now = store_now_ms(a->s);
    char tp[TRACE_PARENT_LEN + 1];
    const char *ts;
    int traced = api_trace_context(req, tp, &ts);
    /* not zeroed: task_input_parse sets a task whole, the callback its answer */
    api_batch_item *items = xmalloc((size_t)(n ? n : 1) * sizeof(*items));
    int i = 0;
    for (cJSON *e = tasks->child; e; e = e->next, i++) {
        api_item *it = &items[i].it;
        it->r = r;
        it->idx = i;
        if (nuls.why[i]) {
            r->results[i] = api_batch_error("invalid_argument", nuls.why[i]);
            continue;
        }
        if (task_input_parse(e, now, &it->t, err, sizeof(err)) != 0) {
            char msg[450];
            snprintf(msg, sizeof(msg), "tasks[%d].%s", i, err);
            r->results[i] = api_batch_error("invalid_argument", msg);
            continue;
        }
        api_trace_default(e, &it->t, traced ? tp : NULL, ts);
        r->waiting++;
    }
    for (int k = 0; k < n; k++) free(nuls.why[k]);
    free(nuls.why);
    cJSON_Delete(body);
    if (r->waiting == 0) {
        api_batch_done(r, items);
        return;
    }
    /* no answer comes back before add() returns, so waiting is final here;
     * a task that was refused has its error */
    for (i = 0; i < n; i++)
        if (!r->results[i]) store_add(a->s, &items[i].it.t, api_batch_add_cb, &items[i]);
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
        api_answer_task(q->r, q->id, spec, state, 500, "internal", "stored task is not valid JSON");
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

/* The {id} of a task's route, looked up: NULL when it cannot name a task
 * (answered 404). */
static api_idreq *api_idreq_new(api *a, http_req *req, const api_params *p)
{
    const api_param *id = &p->param[0];
    if (id->len >= TASK_ID_MAX || id->len == 0) {
        api_error(req, 404, "not_found", "id: no such task");
        return NULL;
    }
    api_idreq *q = xcalloc(1, sizeof(*q));
    memcpy(q->id, id->value, id->len + 1);
    q->r = api_req_new(a, req);
    return q;
}

void api_tasks_get(api *a, http_req *req, const api_params *p)
{
    api_idreq *q = api_idreq_new(a, req, p);
    if (q) store_get(a->s, q->id, api_get_cb, q);
}

void api_tasks_cancel(api *a, http_req *req, const api_params *p)
{
    api_idreq *q = api_idreq_new(a, req, p);
    if (q) store_cancel(a->s, q->id, api_cancel_cb, q);
}

/* ---- filters (a listing's query, a bulk retry's body) ------------------ */

static const char *statuses[] = {"scheduled", "running", "succeeded", "failed", "cancelled",
                                 "expired"};

/* A filter of tasks, from a query string or a JSON body. */
typedef struct api_filter {
    char status[16];
    char order[8];
    char cursor[STORE_CURSOR_MAX];
    char prefix[TASK_KEY_MAX + 1];
    int runs;                   /* by schedule_id: the schedule's runs alone */
    int64_t from, to, limit;
} api_filter;

static int api_status_ok(const char *s)
{
    for (size_t i = 0; i < sizeof(statuses) / sizeof(*statuses); i++)
        if (strcmp(s, statuses[i]) == 0) return 1;
    return 0;
}

/* Fill f from a name -> value source; the same checks for both sources.
 * get(name, out, outlen) answers 1 when the name is given. */
typedef int api_get_fn(void *src, const char *name, char *out, size_t outlen);

static int api_filter_read(api_filter *f, api_get_fn *get, void *src, int64_t dflt_limit,
                           int64_t max_limit, char *err, size_t errlen)
{
    char v[STORE_CURSOR_MAX + 8];
    memset(f, 0, sizeof(*f));
    f->from = f->to = -1;
    f->limit = dflt_limit;
    snprintf(f->order, sizeof(f->order), "oldest");
    if (!get(src, "status", v, sizeof(v))) {
        snprintf(err, errlen, "status: required, one of scheduled, running, succeeded, failed, "
                 "cancelled, expired");
        return -1;
    }
    if (!api_status_ok(v)) {
        snprintf(err, errlen, "status: %.40s is not one of scheduled, running, succeeded, "
                 "failed, cancelled, expired", v);
        return -1;
    }
    snprintf(f->status, sizeof(f->status), "%.15s", v); /* checked: a status word */
    if (get(src, "order", v, sizeof(v))) {
        if (strcmp(v, "oldest") != 0 && strcmp(v, "newest") != 0) {
            snprintf(err, errlen, "order: must be oldest or newest");
            return -1;
        }
        snprintf(f->order, sizeof(f->order), "%.7s", v);
    }
    if (get(src, "limit", v, sizeof(v))) {
        char *end;
        long long n = strtoll(v, &end, 10);
        if (!*v || *end || n < 1 || n > max_limit) {
            snprintf(err, errlen, "limit: must be an integer from 1 to %lld", (long long)max_limit);
            return -1;
        }
        f->limit = n;
    }
    if (get(src, "cursor", v, sizeof(v)) && *v) {
        if (!task_cursor_valid(v) || strlen(v) >= sizeof(f->cursor)) {
            snprintf(err, errlen, "cursor: malformed (pass next_cursor as given)");
            return -1;
        }
        memcpy(f->cursor, v, strlen(v) + 1);
    }
    if (get(src, "key_prefix", v, sizeof(v))) {
        if (strlen(v) > TASK_KEY_MAX || (*v && !task_key_valid(v))) {
            snprintf(err, errlen, "key_prefix: must be up to %d characters of A-Z a-z 0-9 . _ : -",
                     TASK_KEY_MAX);
            return -1;
        }
        util_copy(f->prefix, sizeof(f->prefix), v);
    }
    if (get(src, "schedule_id", v, sizeof(v))) {
        const char *key = schedule_id_key(v);
        if (!key) {
            snprintf(err, errlen, "schedule_id: not a schedule id (sch.<key>)");
            return -1;
        }
        if (f->prefix[0]) {
            snprintf(err, errlen, "schedule_id: give key_prefix or schedule_id, not both");
            return -1;
        }
        /* a schedule's runs have the keys s:<key>:<version>; s:<key>:1:2 is
         * a run of the schedule keyed <key>:1 */
        snprintf(f->prefix, sizeof(f->prefix), TASK_RUN_PREFIX "%s:", key);
        f->runs = 1;
    }
    if (get(src, "from", v, sizeof(v)) && task_text_time(v, "from", &f->from, err, errlen) != 0)
        return -1;
    if (get(src, "to", v, sizeof(v)) && task_text_time(v, "to", &f->to, err, errlen) != 0)
        return -1;
    if (f->from >= 0 && f->to >= 0 && f->to <= f->from) {
        snprintf(err, errlen, "to: must be after from");
        return -1;
    }
    return 0;
}

static store_list_query api_filter_query(const api_filter *f, int limit)
{
    return (store_list_query){.status = f->status, .desc = strcmp(f->order, "newest") == 0,
                              .cursor = f->cursor, .limit = limit, .from_ms = f->from,
                              .to_ms = f->to, .key_prefix = f->prefix, .runs = f->runs};
}

/* ---- GET /v1/tasks ------------------------------------------------------- */

static const char *query_names[] = {"status", "order", "limit", "cursor", "key_prefix",
                                    "schedule_id", "from", "to"};

static int api_query_get(void *src, const char *name, char *out, size_t outlen)
{
    return api_query(src, name, out, outlen);
}

typedef struct list_req {
    api_req *r;
    int n, waiting;
    cJSON **items;
    char *next;
} list_req;

static void list_req_done(list_req *l)
{
    cJSON *body = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(body, "tasks");
    for (int i = 0; i < l->n; i++)
        if (l->items[i]) cJSON_AddItemToArray(arr, l->items[i]);
    if (l->next) cJSON_AddStringToObject(body, "next_cursor", l->next);
    else cJSON_AddNullToObject(body, "next_cursor");
    api_finish(l->r, 200, "OK", body);
    cJSON_Delete(body);
    free(l->items);
    free(l->next);
    free(l);
}

typedef struct list_item {
    list_req *l;
    int i;
    char id[TASK_ID_MAX];
} list_item;

static void list_get_cb(store_status st, const char *spec, const char *state, const char *err,
                        void *priv)
{
    list_item *it = priv;
    list_req *l = it->l;
    (void)err;
    /* a task that expired since it was listed is left out */
    if (st == ST_OK) {
        char *s = api_tasks_render(it->id, spec, state);
        l->items[it->i] = s ? cJSON_Parse(s) : NULL;
        free(s);
        /* a listing shows URLs redacted; GET of one task shows them whole */
        if (l->items[it->i]) task_redact_urls(l->items[it->i]);
    }
    free(it);
    if (--l->waiting == 0) list_req_done(l);
}

static void list_cb(const char *const *ids, int n, const char *next, const char *err, void *priv)
{
    list_req *l = priv;
    if (err) {
        char msg[300];
        snprintf(msg, sizeof(msg), "redis: %s", err);
        api_finish_error(l->r, 503, "unavailable", msg);
        free(l);
        return;
    }
    l->n = n;
    l->items = xcalloc((size_t)(n ? n : 1), sizeof(cJSON *));
    l->next = next ? xstrdup(next) : NULL;
    if (n == 0) {
        list_req_done(l);
        return;
    }
    l->waiting = n;
    list_item **its = xcalloc((size_t)n, sizeof(*its));
    for (int i = 0; i < n; i++) {
        its[i] = xcalloc(1, sizeof(**its));
        its[i]->l = l;
        its[i]->i = i;
        util_copy(its[i]->id, sizeof(its[i]->id), ids[i]);
    }
    /* the ids are the store's until this returns: copied above first */
    store *s = l->r->a->s;
    for (int i = 0; i < n; i++) store_get(s, its[i]->id, list_get_cb, its[i]);
    free(its);
}

void api_tasks_list(api *a, http_req *req, const api_params *p)
{
    const char *target = http_target(req), *q = strchr(target, '?');
    char err[300];
    api_filter f;
    for (q = q ? q + 1 : NULL; q && *q; q = strchr(q, '&') ? strchr(q, '&') + 1 : NULL) {
        size_t n = strcspn(q, "=&"), i = 0;
        while (i < sizeof(query_names) / sizeof(*query_names) &&
               !(strlen(query_names[i]) == n && strncmp(q, query_names[i], n) == 0))
            i++;
        if (i == sizeof(query_names) / sizeof(*query_names)) {
            api_error(req, 400, "invalid_argument", "%.*s: unknown parameter", (int)(n > 100 ? 100 : n), q);
            return;
        }
    }
    if (api_filter_read(&f, api_query_get, (void *)target, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, err,
                        sizeof(err)) != 0) {
        api_error(req, 400, "invalid_argument", "%s", err);
        return;
    }
    (void)p;
    list_req *l = xcalloc(1, sizeof(*l));
    l->r = api_req_new(a, req);
    store_list_query sq = api_filter_query(&f, (int)f.limit);
    store_list(a->s, &sq, list_cb, l);
}

/* ---- POST /v1/tasks/{id}/retry, /run --------------------------------------- */

typedef struct move_req {
    api_req *r;
    char id[TASK_ID_MAX];
    int retry;
} move_req;

static void move_get_cb(store_status st, const char *spec, const char *state, const char *err,
                        void *priv)
{
    move_req *m = priv;
    (void)err;
    api_answer_task(m->r, m->id, st == ST_OK ? spec : NULL, state, 503, "unavailable",
                    "the task was moved, but could not be read");
    free(m);
}

static void move_cb(store_status st, const char *detail, void *priv)
{
    move_req *m = priv;
    char msg[300];
    switch (st) {
    case ST_OK:
        store_get(m->r->a->s, m->id, move_get_cb, m);
        return;
    case ST_NOTFOUND:
        api_finish_error(m->r, 404, "not_found", "id: no such task");
        break;
    case ST_CONFLICT:
        if (strcmp(detail, STORE_PAST_EXPIRY) == 0) {
            api_finish_error(m->r, 409, "conflict",
                             "execute_at: not before the task's expires_at: a task is never "
                             "called after its expiry");
            break;
        }
        snprintf(msg, sizeof(msg), "id: the task is %s; %s", detail,
                 m->retry ? "only a failed or cancelled task can be retried (an expired one is never called after its expires_at)"
                          : "only a scheduled task can be run now");
        api_finish_error(m->r, 409, "conflict", msg);
        break;
    default:
        snprintf(msg, sizeof(msg), "redis: %s", detail ? detail : "unavailable");
        api_finish_error(m->r, 503, "unavailable", msg);
    }
    free(m);
}

static void api_move_task(api *a, http_req *req, const char *id, int retry)
{
    char err[300];
    int64_t now = store_now_ms(a->s), at = now;
    size_t len;
    http_body(req, &len);
    if (retry && len) {
        static const char *fields[] = {"execute_at"};
        cJSON *body = api_body(req);
        if (!body) return;
        /* an array's members have no names: checked as an object's only */
        if (!cJSON_IsObject(body) || task_check_fields(body, fields, 1, err, sizeof(err)) != 0) {
            if (!cJSON_IsObject(body))
                snprintf(err, sizeof(err), "body: must be a JSON object ({\"execute_at\": ...})");
            cJSON_Delete(body);
            api_error(req, 400, "invalid_argument", "%s", err);
            return;
        }
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(body, "execute_at");
        int bad = e && task_json_time(e, "execute_at", &at, err, sizeof(err)) != 0;
        if (!bad && at > now + TASK_MAX_AHEAD_MS) {
            snprintf(err, sizeof(err), "execute_at: more than ten years ahead");
            bad = 1;
        }
        cJSON_Delete(body);
        if (bad) {
            api_error(req, 400, "invalid_argument", "%s", err);
            return;
        }
    }
    if (strlen(id) >= TASK_ID_MAX || !*id) {
        api_error(req, 404, "not_found", "id: no such task");
        return;
    }
    move_req *m = xcalloc(1, sizeof(*m));
    m->r = api_req_new(a, req);
    m->retry = retry;
    util_copy(m->id, sizeof(m->id), id);
    store_move(a->s, m->id, retry ? MOVE_RETRY : MOVE_RUN, at, move_cb, m);
}

/* {task}: a task's id that an action names; one too long for an id names
 * no route (404 for the path, whatever the method). */
int api_tasks_param(api *a, http_req *req, api_param *p)
{
    (void)a, (void)req;
    return p->len < TASK_ID_MAX;
}

void api_tasks_retry(api *a, http_req *req, const api_params *p)
{
    api_move_task(a, req, p->param[0].value, 1);
}

void api_tasks_run(api *a, http_req *req, const api_params *p)
{
    api_move_task(a, req, p->param[0].value, 0);
}

/* ---- POST /v1/tasks/retry ---------------------------------------------------- */

typedef struct bulk_req {
    api_req *r;
    api_filter f;
    int64_t retried, seen;
    int waiting;
    char *next;
} bulk_req;

static void bulk_page(bulk_req *b);

static void bulk_answer(bulk_req *b, const char *next)
{
    cJSON *body = cJSON_CreateObject();
    cJSON_AddNumberToObject(body, "retried", (double)b->retried);
    if (next) cJSON_AddStringToObject(body, "next_cursor", next);
    else cJSON_AddNullToObject(body, "next_cursor");
    api_finish(b->r, 200, "OK", body);
    cJSON_Delete(body);
    free(b->next);
    free(b);
}

static void bulk_moved_cb(store_status st, const char *detail, void *priv)
{
    bulk_req *b = priv;
    (void)detail;
    b->retried += st == ST_OK;
    if (--b->waiting) return;
    /* the page is done: the next one, or the answer */
    if (!b->next || b->seen >= b->f.limit) {
        bulk_answer(b, b->next);
        return;
    }
    util_copy(b->f.cursor, sizeof(b->f.cursor), b->next);
    bulk_page(b);
}

static void bulk_list_cb(const char *const *ids, int n, const char *next, const char *err,
                         void *priv)
{
    bulk_req *b = priv;
    if (err) {
        char msg[300];
        snprintf(msg, sizeof(msg), "redis: %s; %lld tasks were retried before", err,
                 (long long)b->retried);
        api_finish_error(b->r, 503, "unavailable", msg);
        free(b->next);
        free(b);
        return;
    }
    free(b->next);
    b->next = next ? xstrdup(next) : NULL;
    if (n == 0) {
        bulk_answer(b, NULL);
        return;
    }
    b->seen += n;
    b->waiting = n;
    int64_t now = store_now_ms(b->r->a->s);
    char (*copy)[TASK_ID_MAX] = xmalloc(sizeof(*copy) * (size_t)n);
    for (int i = 0; i < n; i++) snprintf(copy[i], TASK_ID_MAX, "%s", ids[i]);
    for (int i = 0; i < n; i++)
        store_move(b->r->a->s, copy[i], MOVE_RETRY, now, bulk_moved_cb, b);
    free(copy);
}

static void bulk_page(bulk_req *b)
{
    int64_t left = b->f.limit - b->seen;
    store_list_query q = api_filter_query(&b->f, (int)(left < RETRY_PAGE ? left : RETRY_PAGE));
    store_list(b->r->a->s, &q, bulk_list_cb, b);
}

static int api_json_get(void *src, const char *name, char *out, size_t outlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, name);
    int64_t n;
    if (!v) return 0;
    if (cJSON_IsString(v)) snprintf(out, outlen, "%s", v->valuestring);
    else if (task_json_int(v, 0, TASK_TIME_MAX_MS, &n) == 0) snprintf(out, outlen, "%lld", (long long)n);
    else snprintf(out, outlen, "?");  /* refused by the checks */
    return 1;
}

void api_tasks_retry_matching(api *a, http_req *req, const api_params *p)
{
    static const char *fields[] = {"status", "order", "limit", "cursor", "key_prefix",
                                   "schedule_id", "from", "to"};
    char err[300];
    (void)p;
    cJSON *body = api_body(req);
    if (!body) return;
    api_filter f;
    if (!cJSON_IsObject(body)) {
        snprintf(err, sizeof(err), "body: must be a JSON object (a filter)");
    } else if (task_check_fields(body, fields, sizeof(fields) / sizeof(*fields), err,
                                 sizeof(err)) == 0 &&
               api_filter_read(&f, api_json_get, body, RETRY_LIMIT_DEFAULT, RETRY_LIMIT_MAX, err,
                               sizeof(err)) == 0) {
        if (strcmp(f.status, "failed") != 0 && strcmp(f.status, "cancelled") != 0) {
            snprintf(err, sizeof(err), "status: only failed or cancelled tasks can be retried "
                     "(an expired task is never called after its expires_at)");
        } else {
            cJSON_Delete(body);
            bulk_req *b = xcalloc(1, sizeof(*b));
            b->r = api_req_new(a, req);
            b->f = f;
            bulk_page(b);
            return;
        }
    }
    cJSON_Delete(body);
    api_error(req, 400, "invalid_argument", "%s", err);
}
