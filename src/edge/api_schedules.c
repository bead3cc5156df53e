/* api_schedules.c -- the routes of schedules (doc/api.md "Schedules"):
 *   POST   /v1/schedules                    create one (the same again: 200)
 *   GET    /v1/schedules                    a page, bucket by bucket
 *   GET    /v1/schedules/{id}               one, with its next runs and last run
 *   PUT    /v1/schedules/{id}               replace its definition
 *   DELETE /v1/schedules/{id}               delete it
 *   POST   /v1/schedules/{id}/pause|resume
 * A write that replaces the runs made ahead cancels them (api_cancel_ahead). */
#include "edge/api_schedules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "base/util.h"
#include "edge/api_reply.h"
#include "edge/api_tasks.h"
#include "model/schedule.h"
#include "model/task.h"

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
    if (st == ST_OK) api_tasks_state_status(state, status, sizeof(status));
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

/* {schedule}: a schedule's id, sch.<key>; anything else names no schedule,
 * whatever follows it or the method. */
int api_schedules_param(api *a, http_req *req, api_param *p)
{
    (void)a;
    if (p->len > SCHED_ID_MAX - 1 || p->len == 0 || !schedule_id_key(p->value)) {
        api_error(req, 404, "not_found", "id: no such schedule");
        return -1;
    }
    return 1;
}

void api_schedules_add(api *a, http_req *req, const api_params *p)
{
    (void)p;
    api_put_schedule(a, req, NULL);
}

void api_schedules_replace(api *a, http_req *req, const api_params *p)
{
    api_put_schedule(a, req, p->param[0].value);
}

void api_schedules_get(api *a, http_req *req, const api_params *p)
{
    api_sreq *q = api_sreq_new(a, req, p->param[0].value);
    q->op = SCH_CREATE; /* a read */
    store_sch_get(a->s, q->id, api_sch_get_cb, q);
}

void api_schedules_delete(api *a, http_req *req, const api_params *p)
{
    api_sreq *q = api_sreq_new(a, req, p->param[0].value);
    q->op = SCH_DELETE;
    store_sch_write(a->s, SCH_DELETE, q->id, NULL, -1, api_sch_written_cb, q);
}

void api_schedules_pause(api *a, http_req *req, const api_params *p)
{
    api_sreq *q = api_sreq_new(a, req, p->param[0].value);
    q->status = 200;
    q->op = SCH_PAUSE;
    store_sch_write(a->s, SCH_PAUSE, q->id, NULL, -1, api_sch_written_cb, q);
}

void api_schedules_resume(api *a, http_req *req, const api_params *p)
{
    api_sreq *q = api_sreq_new(a, req, p->param[0].value);
    q->status = 200;
    q->op = SCH_RESUME;
    store_sch_get(a->s, q->id, api_sch_get_cb, q);
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


void api_schedules_list(api *a, http_req *req, const api_params *p)
{
    char v[SCHED_ID_MAX + 32];
    (void)p;
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
