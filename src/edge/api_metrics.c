/* api_metrics.c -- what tickd tells of itself: GET /metrics (the Prometheus
 * text, metrics.h), GET /v1/stats and GET /healthz.
 *
 * The count of scheduled tasks is the store's whole keyspace, so it is not
 * taken per scrape: a scrape answers with the last count and, when that is
 * older than COUNT_TTL_MS (or twenty times what counting took, on a large
 * keyspace), starts the next one. Only the first scrape waits for a count. */
#include "edge/api_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/tz.h"
#include "base/util.h"
#include "edge/api_reply.h"

#define COUNT_TTL_MS 5000

static void metrics_send(api *a, http_req *req)
{
    metrics_now now = {.scheduled = -1};
    store_counters sc;
    if (a->gauges) a->gauges(a->gauges_priv, &now);
    store_get_counters(a->s, &sc);
    now.redis_errors = sc.errors;
    now.redis_reconnects = sc.reconnects;
    store_alerts al;
    store_get_alerts(a->s, &al);
    now.store_refusing = al.refusing != NULL;
    now.store_evicting = al.evicting;
    now.store_memory_ratio = al.memory_ratio;
    now.store_data_lost = al.data_lost;
    now.api_connections = http_server_connections(a->http);
    if (a->count_ms) {
        now.scheduled = a->count;
        now.scheduled_age_s = (double)(util_mono_ms() - a->count_ms) / 1000.0;
    }
    if (!now.version) now.version = "";
    if (!now.store) now.store = "";
    size_t len;
    char *text = metrics_render(&now, &len);
    http_reply(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static void metrics_counted(int64_t n, const char *err, void *priv)
{
    api *a = priv;
    int64_t now = util_mono_ms();
    a->counting = 0;
    if (err) {
        log_warn("metrics: counting scheduled tasks failed: %s", err);
    } else {
        a->count = n;
        a->count_ms = now;
        a->count_took_ms = now - a->count_started_ms;
    }
    for (int i = 0; i < a->ncount_waiting; i++) {
        api_req *r = a->count_waiting[i];
        metrics_send(a, r->req);
        a->busy--;
        api_req_free(r);
    }
    a->ncount_waiting = 0;
}

void api_metrics_scrape(api *a, http_req *req, const api_params *p)
{
    (void)p;
    int64_t now = util_mono_ms();
    int64_t ttl = a->count_took_ms * 20 > COUNT_TTL_MS ? a->count_took_ms * 20 : COUNT_TTL_MS;
    if (!a->counting && (!a->count_ms || now - a->count_ms >= ttl)) {
        a->counting = 1;
        a->count_started_ms = now;
        store_count(a->s, metrics_counted, a);
    }
    if (a->count_ms || !a->counting) {
        metrics_send(a, req);
        return;
    }
    a->count_waiting = xrealloc(a->count_waiting,
                                sizeof(*a->count_waiting) * (size_t)(a->ncount_waiting + 1));
    a->count_waiting[a->ncount_waiting++] = api_req_new(a, req);
}

/* ---- GET /healthz, GET /v1/stats --------------------------------------- */

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

void api_metrics_health(api *a, http_req *req, const api_params *p)
{
    (void)p;
    api_req *r = api_req_new(a, req);
    store_health(a->s, api_health_cb, r);
}

void api_metrics_stats(api *a, http_req *req, const api_params *p)
{
    (void)p;
    cJSON *body = cJSON_CreateObject();
    a->stats(a->stats_priv, body);
    api_alerts(a, cJSON_AddObjectToObject(body, "store"));
    api_send_json(req, 200, "OK", body);
    cJSON_Delete(body);
}
