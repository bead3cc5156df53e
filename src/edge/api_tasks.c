/* api_tasks.c -- finding tasks and running them again (doc/api.md: "Find
 * tasks", "Dead letters"):
 *   GET  /v1/tasks?status=...        a page of tasks of one status
 *   POST /v1/tasks/{id}/retry        a failed or cancelled task, again
 *   POST /v1/tasks/{id}/run          a scheduled task, now
 *   POST /v1/tasks/retry             every failed (or cancelled) task matching
 *                                    a filter, in bounded batches */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edge/api_internal.h"
#include "model/schedule.h"
#include "base/util.h"

#define LIST_LIMIT_MAX 1000
#define LIST_LIMIT_DEFAULT 100
#define RETRY_LIMIT_MAX 10000
#define RETRY_LIMIT_DEFAULT 1000
#define RETRY_PAGE 100

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
        snprintf(f->prefix, sizeof(f->prefix), "%s", v);
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
        char *s = api_render_task(it->id, spec, state);
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
        snprintf(its[i]->id, sizeof(its[i]->id), "%s", ids[i]);
    }
    /* the ids are the store's until this returns: copied above first */
    store *s = l->r->a->s;
    for (int i = 0; i < n; i++) store_get(s, its[i]->id, list_get_cb, its[i]);
    free(its);
}

void api_list_tasks(api *a, http_req *req, const api_params *p)
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
    char *s = st == ST_OK ? api_render_task(m->id, spec, state) : NULL;
    cJSON *body = s ? cJSON_Parse(s) : NULL;
    (void)err;
    free(s);
    if (body) api_finish(m->r, 200, "OK", body);
    else api_finish_error(m->r, 503, "unavailable", "the task was moved, but could not be read");
    cJSON_Delete(body);
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
    snprintf(m->id, sizeof(m->id), "%s", id);
    store_move(a->s, m->id, retry ? MOVE_RETRY : MOVE_RUN, at, move_cb, m);
}

/* {task}: a task's id that an action names; one too long for an id names
 * no route (404 for the path, whatever the method). */
int api_task_param(api *a, http_req *req, api_param *p)
{
    (void)a, (void)req;
    return p->len < TASK_ID_MAX;
}

void api_retry_task(api *a, http_req *req, const api_params *p)
{
    api_move_task(a, req, p->param[0].value, 1);
}

void api_run_task(api *a, http_req *req, const api_params *p)
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
    snprintf(b->f.cursor, sizeof(b->f.cursor), "%s", b->next);
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

void api_retry_tasks(api *a, http_req *req, const api_params *p)
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
