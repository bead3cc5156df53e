/* api_console.c -- what the web console reads, for the whole cluster rather
 * than one replica's view (doc/api.md, "The console's endpoints"):
 *   GET /v1/history            outcomes per minute (history.h), all replicas
 *   GET /v1/cluster            the replicas alive and the backend's nodes
 *   GET /v1/schedules:preview  a schedule's next runs, nothing stored
 * All three read only: a read-only token may call them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "base/util.h"
#include "edge/api_internal.h"
#include "model/schedule.h"

/* Whether every query parameter is one of `names` (NULL-terminated); else
 * answered 400 naming it. */
static int api_console_params(http_req *req, const char *const *names, const char *list)
{
    const char *q = strchr(http_target(req), '?');
    for (q = q ? q + 1 : NULL; q && *q; q = strchr(q, '&') ? strchr(q, '&') + 1 : NULL) {
        size_t n = strcspn(q, "=&");
        int known = 0;
        for (int i = 0; names[i] && !known; i++)
            known = strlen(names[i]) == n && strncmp(q, names[i], n) == 0;
        if (!known) {
            api_error(req, 400, "invalid_argument", "%.*s: unknown parameter (%s)",
                      (int)(n > 100 ? 100 : n), q, list);
            return 0;
        }
    }
    return 1;
}

static int api_console_get(http_req *req)
{
    if (strcmp(http_method(req), "GET") == 0) return 1;
    http_add_header(req, "Allow", "GET");
    api_error(req, 405, "method_not_allowed", "method: use GET");
    return 0;
}

/* ---- GET /v1/history ------------------------------------------------------
 * window=1h: a point a minute, the last 60 (the present minute last);
 * window=24h: a point per 10 minutes, the last 144. */

typedef struct hist_req {
    api_req *r;
    int64_t from_minute, step_minutes;
    int points;
    const char *window;
} hist_req;

/* The q-quantile (0..1) of bucket counts b (metrics.c's bounds, then +Inf)
 * in ms, interpolated in its bucket as Prometheus's histogram_quantile
 * does; -1 when there is nothing. */
static double api_quantile_ms(const int64_t *b, double q)
{
    int64_t total = 0;
    for (int i = 0; i < STORE_HIST_BUCKETS; i++) total += b[i];
    if (total == 0) return -1;
    double rank = q * (double)total, seen = 0;
    const double *le = metrics.lateness.le;
    for (int i = 0; i < STORE_HIST_BUCKETS; i++) {
        if (b[i] == 0 || seen + (double)b[i] < rank) {
            seen += (double)b[i];
            continue;
        }
        /* +Inf: its lower bound, the highest one known */
        if (i == METRICS_BUCKETS) return le[METRICS_BUCKETS - 1] * 1000.0;
        double lo = i ? le[i - 1] : 0, hi = le[i];
        return (lo + (hi - lo) * (rank - seen) / (double)b[i]) * 1000.0;
    }
    return le[METRICS_BUCKETS - 1] * 1000.0;
}

static void api_hist_sum(store_hist *to, const store_hist *m)
{
    to->succeeded += m->succeeded;
    to->attempts_failed += m->attempts_failed;
    to->retried += m->retried;
    to->failed += m->failed;
    to->expired += m->expired;
    for (int b = 0; b < STORE_HIST_BUCKETS; b++) to->lateness[b] += m->lateness[b];
}

static void api_hist_fields(cJSON *o, const store_hist *h)
{
    cJSON_AddNumberToObject(o, "succeeded", (double)h->succeeded);
    cJSON_AddNumberToObject(o, "failed", (double)h->failed);
    cJSON_AddNumberToObject(o, "retried", (double)h->retried);
    cJSON_AddNumberToObject(o, "attempts_failed", (double)h->attempts_failed);
    cJSON_AddNumberToObject(o, "expired", (double)h->expired);
    double p50 = api_quantile_ms(h->lateness, 0.5), p99 = api_quantile_ms(h->lateness, 0.99);
    if (p50 < 0) cJSON_AddNullToObject(o, "lateness_p50_ms");
    else cJSON_AddNumberToObject(o, "lateness_p50_ms", p50);
    if (p99 < 0) cJSON_AddNullToObject(o, "lateness_p99_ms");
    else cJSON_AddNumberToObject(o, "lateness_p99_ms", p99);
}

typedef struct queue_count {
    const char *name;
    int64_t failed;
} queue_count;

static int api_queue_cmp(const void *a, const void *b)
{
    const queue_count *x = a, *y = b;
    if (x->failed != y->failed) return x->failed > y->failed ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void api_history_cb(const store_hist *m, int n, const char *err, void *priv)
{
    hist_req *h = priv;
    if (err) {
        api_finish_error(h->r, 503, "unavailable", err);
        free(h);
        return;
    }
    store_hist *pts = xcalloc((size_t)h->points, sizeof(*pts)), total = {0};
    queue_count *qs = NULL;
    int nq = 0;
    for (int i = 0; i < n; i++) {
        int64_t p = (m[i].minute - h->from_minute) / h->step_minutes;
        if (p < 0 || p >= h->points) continue;
        api_hist_sum(&pts[p], &m[i]);
        api_hist_sum(&total, &m[i]);
        for (int k = 0; k < m[i].nqueues; k++) {
            int j = 0;
            while (j < nq && strcmp(qs[j].name, m[i].queues[k].name) != 0) j++;
            if (j == nq) {
                qs = xrealloc(qs, sizeof(*qs) * (size_t)(nq + 1));
                qs[nq++] = (queue_count){m[i].queues[k].name, 0};
            }
            qs[j].failed += m[i].queues[k].failed;
        }
    }
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "window", h->window);
    cJSON_AddNumberToObject(body, "step_ms", (double)(h->step_minutes * 60000));
    cJSON_AddNumberToObject(body, "from", (double)(h->from_minute * 60000));
    cJSON_AddNumberToObject(body, "to",
                            (double)((h->from_minute + h->points * h->step_minutes) * 60000));
    cJSON *arr = cJSON_AddArrayToObject(body, "points");
    for (int p = 0; p < h->points; p++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "t", (double)((h->from_minute + p * h->step_minutes) * 60000));
        api_hist_fields(o, &pts[p]);
        cJSON_AddItemToArray(arr, o);
    }
    api_hist_fields(cJSON_AddObjectToObject(body, "total"), &total);
    if (nq) qsort(qs, (size_t)nq, sizeof(*qs), api_queue_cmp);
    cJSON *fq = cJSON_AddArrayToObject(body, "failed_by_queue");
    for (int j = 0; j < nq; j++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "queue", qs[j].name);
        cJSON_AddNumberToObject(o, "failed", (double)qs[j].failed);
        cJSON_AddItemToArray(fq, o);
    }
    /* the names live in m, which lives until this returns */
    api_finish(h->r, 200, "OK", body);
    cJSON_Delete(body);
    free(qs);
    free(pts);
    free(h);
}

static void api_history(api *a, http_req *req)
{
    static const char *const names[] = {"window", NULL};
    char w[16] = "1h";
    if (!api_console_get(req) || !api_console_params(req, names, "window")) return;
    api_query(http_target(req), "window", w, sizeof(w));
    int day = strcmp(w, "24h") == 0;
    if (!day && strcmp(w, "1h") != 0) {
        api_error(req, 400, "invalid_argument", "window: must be 1h or 24h");
        return;
    }
    hist_req *h = xcalloc(1, sizeof(*h));
    int64_t now_minute = store_now_ms(a->s) / 60000;
    h->window = day ? "24h" : "1h";
    h->step_minutes = day ? 10 : 1;
    h->points = day ? 144 : 60;
    /* the last point holds the present minute (its step, begun) */
    int64_t last = now_minute - now_minute % h->step_minutes;
    h->from_minute = last - (h->points - 1) * h->step_minutes;
    h->r = api_req_new(a, req);
    store_hist_read(a->s, h->from_minute, last + h->step_minutes, api_history_cb, h);
}

/* ---- GET /v1/cluster ------------------------------------------------------ */

typedef struct cluster_req {
    api_req *r;
    cJSON *body;
    int64_t now_ms;
    int waiting;
} cluster_req;

static void api_cluster_done(cluster_req *c)
{
    if (--c->waiting) return;
    api_finish(c->r, 200, "OK", c->body);
    cJSON_Delete(c->body);
    free(c);
}

static void api_cluster_replicas_cb(const store_replica *r, int n, const char *err, void *priv)
{
    cluster_req *c = priv;
    cJSON *arr = cJSON_AddArrayToObject(c->body, "replicas");
    if (err) cJSON_AddStringToObject(c->body, "replicas_error", err);
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", r[i].id);
        cJSON_AddStringToObject(o, "listen", r[i].listen);
        cJSON_AddStringToObject(o, "version", r[i].version);
        cJSON_AddNumberToObject(o, "started_at", (double)r[i].started_at_ms);
        cJSON_AddNumberToObject(o, "uptime_ms", (double)(r[i].seen_ms - r[i].started_at_ms));
        cJSON_AddNumberToObject(o, "seen_at", (double)r[i].seen_ms);
        cJSON_AddNumberToObject(o, "inflight", (double)r[i].inflight);
        cJSON_AddNumberToObject(o, "held", (double)r[i].held);
        cJSON_AddItemToArray(arr, o);
    }
    api_cluster_done(c);
}

static void api_cluster_nodes_cb(const store_node *nd, int n, void *priv)
{
    cluster_req *c = priv;
    cJSON *arr = cJSON_AddArrayToObject(c->body, "nodes");
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "address", nd[i].addr);
        cJSON_AddStringToObject(o, "role", nd[i].role);
        if (nd[i].primary) cJSON_AddStringToObject(o, "primary", nd[i].primary);
        cJSON_AddBoolToObject(o, "reachable", nd[i].reachable);
        if (nd[i].err) cJSON_AddStringToObject(o, "error", nd[i].err);
        if (nd[i].version) cJSON_AddStringToObject(o, "version", nd[i].version);
        if (nd[i].used_memory >= 0)
            cJSON_AddNumberToObject(o, "used_memory", (double)nd[i].used_memory);
        if (nd[i].maxmemory >= 0) cJSON_AddNumberToObject(o, "maxmemory", (double)nd[i].maxmemory);
        if (nd[i].policy) cJSON_AddStringToObject(o, "maxmemory_policy", nd[i].policy);
        if (nd[i].refusing) cJSON_AddStringToObject(o, "refusing", nd[i].refusing);
        else cJSON_AddNullToObject(o, "refusing");
        cJSON_AddItemToArray(arr, o);
    }
    api_cluster_done(c);
}

static void api_cluster(api *a, http_req *req)
{
    static const char *const names[] = {NULL};
    if (!api_console_get(req) || !api_console_params(req, names, "none")) return;
    cluster_req *c = xcalloc(1, sizeof(*c));
    c->r = api_req_new(a, req);
    c->body = cJSON_CreateObject();
    c->now_ms = store_now_ms(a->s);
    cJSON_AddStringToObject(c->body, "store", a->s->type->name);
    cJSON_AddNumberToObject(c->body, "now", (double)c->now_ms);
    /* what the store's watch found, as /healthz and /v1/stats give it */
    store_alerts al;
    store_get_alerts(a->s, &al);
    if (al.refusing) cJSON_AddStringToObject(c->body, "refusing_adds", al.refusing);
    else cJSON_AddNullToObject(c->body, "refusing_adds");
    cJSON_AddNumberToObject(c->body, "data_lost", (double)al.data_lost);
    c->waiting = store_has_nodes(a->s) ? 2 : 1;
    if (!store_has_nodes(a->s)) cJSON_AddArrayToObject(c->body, "nodes");
    else store_nodes(a->s, api_cluster_nodes_cb, c);
    store_replicas(a->s, api_cluster_replicas_cb, c);
}

/* ---- GET /v1/schedules:preview --------------------------------------------
 * A schedule's times as query parameters, named as in its definition; the
 * next `count` runs as GET /v1/schedules/{id} gives next_runs, with the
 * errors of POST /v1/schedules. */

#define PREVIEW_COUNT_MAX 100

/* A query value as JSON: digits alone are a number (ms, a count), anything
 * else a string, so that the definition's checks name what is wrong. */
static cJSON *api_preview_value(const char *v)
{
    size_t n = strlen(v), d = v[0] == '-' ? 1 : 0;
    if (n > d && n - d <= 16 && strspn(v + d, "0123456789") == n - d)
        return cJSON_CreateNumber((double)strtoll(v, NULL, 10));
    return cJSON_CreateString(v);
}

static void api_preview(api *a, http_req *req)
{
    static const char *const names[] = {"cron", "tz", "every_ms", "start_at", "times", "end_at",
                                        "count", NULL};
    static const char *const strings[] = {"cron", "tz"};
    const char *target = http_target(req);
    char v[512], err[400];
    if (!api_console_get(req) ||
        !api_console_params(req, names, "cron, tz, every_ms, start_at, times, end_at, count"))
        return;
    int64_t count = SCHED_NEXT_RUNS;
    if (api_query(target, "count", v, sizeof(v))) {
        char *end;
        long long n = strtoll(v, &end, 10);
        if (!*v || *end || n < 1 || n > PREVIEW_COUNT_MAX) {
            api_error(req, 400, "invalid_argument", "count: must be an integer from 1 to %d",
                      PREVIEW_COUNT_MAX);
            return;
        }
        count = n;
    }
    cJSON *def = cJSON_CreateObject();
    for (int i = 0; names[i]; i++) {
        if (strcmp(names[i], "count") == 0 || !api_query(target, names[i], v, sizeof(v)))
            continue;
        int str = i < (int)(sizeof(strings) / sizeof(*strings));
        cJSON_AddItemToObject(def, names[i], str ? cJSON_CreateString(v) : api_preview_value(v));
    }
    schedule_def d;
    int rc = schedule_when_parse(def, store_now_ms(a->s), &d, err, sizeof(err));
    cJSON_Delete(def);
    if (rc != 0) {
        api_error(req, 400, "invalid_argument", "%s", err);
        return;
    }
    /* the definition as a saved schedule's, then its runs from its first */
    cJSON *body = cJSON_Parse(d.json);
    cJSON_DeleteItemFromObjectCaseSensitive(body, "key");
    cJSON_DeleteItemFromObjectCaseSensitive(body, "catch_up");
    int64_t *at = xmalloc(sizeof(*at) * (size_t)count);
    int64_t first = schedule_first(&d, store_now_ms(a->s));
    int n = first >= 0 ? schedule_upcoming(&d, first, 0, (int)count, at) : 0;
    cJSON *arr = cJSON_AddArrayToObject(body, "next_runs");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, schedule_time_json(&d, at[i]));
    api_send_json(req, 200, "OK", body);
    cJSON_Delete(body);
    free(at);
    schedule_def_free(&d);
}

int api_console(api *a, http_req *req, const char *path)
{
    if (strcmp(path, "/v1/history") == 0) api_history(a, req);
    else if (strcmp(path, "/v1/cluster") == 0) api_cluster(a, req);
    else if (strcmp(path, "/v1/schedules:preview") == 0) api_preview(a, req);
    else return 0;
    return 1;
}
