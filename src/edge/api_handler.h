/* api_handler.h -- the API object and what a route's handler is given,
 * shared by the API's files. Not an interface: nothing outside
 * src/edge/api*.c includes it.
 *
 * The API's files stand in floors, each calling only below itself:
 *   api.c             the API object, the route table, the gate, the tokens
 *   api_tasks.c, api_schedules.c, api_queues.c, api_metrics.c
 *                     one resource each: the handlers of its routes
 *   api_reply.c       what every handler uses: answers, errors, bodies, queries
 * This header is under them all, so it includes none of them (nor api.h: the
 * callbacks below are api.h's api_*_fn, spelled out). */
#ifndef TICKD_API_HANDLER_H
#define TICKD_API_HANDLER_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/util.h"
#include "edge/http_server.h"
#include "store/store.h"

struct metrics_now;
typedef struct api api;       /* as api.h has it */

struct api {
    http_server *http;
    store *s;                 /* NULL until the store is reached */
    char *waiting_for;        /* why it is not yet */
    void (*stats)(void *priv, cJSON *obj);               /* api_stats_fn */
    void *stats_priv;
    int busy;
    char **tokens;            /* the accepted tokens; none: the API is open */
    int ntokens;
    int nadmin;               /* tokens[0..nadmin) may do everything, the rest only read */
    void (*on_schedule)(int bucket, void *priv);         /* api_schedule_fn */
    void *on_schedule_priv;
    void (*gauges)(void *priv, struct metrics_now *now); /* api_gauges_fn */
    void *gauges_priv;
    void (*on_flow)(void *priv);                         /* api_flow_fn */
    void *on_flow_priv;
    /* the cached count of scheduled tasks (GET /metrics) */
    int64_t count, count_ms, count_took_ms, count_started_ms;
    int counting;
    struct api_req **count_waiting;   /* scrapes waiting for the first count */
    int ncount_waiting;
    /* made and freed a request each, kept for reuse (util_pool) */
    util_pool req_pool;       /* api_req (api_reply.c) */
    util_pool item_pool;      /* a single POST's api_item (api_tasks.c) */
};

/* What a route's pattern took from the path: each {name} in it, as the path
 * has it (at, len) and as its kind's check made it (value: the segment
 * itself when the kind has no check; NUL-terminated). A path is shorter
 * than API_PATH_MAX, so a segment always fits. */
#define API_PATH_MAX 512
#define API_PARAMS_MAX 2
typedef struct api_param {
    const char *at;
    size_t len;
    char value[API_PATH_MAX];
} api_param;

typedef struct api_params {
    const char *path;         /* the request's path, without the query */
    int n;
    api_param param[API_PARAMS_MAX];
} api_params;

/* A route's handler: answers req, now or from a store callback. */
typedef void api_handler(api *a, http_req *req, const api_params *p);

/* A {name}'s check, run as the route is matched, before its method is
 * looked at: 1 the segment names one (p->value as the handler wants it),
 * 0 it does not and the route is not this one, -1 req was answered (the
 * segment cannot name one: 404, 400). */
typedef int api_param_fn(api *a, http_req *req, api_param *p);

/* Whether the store can serve a route: 0, or -1 with req answered (501). */
typedef int api_ready_fn(api *a, http_req *req);

#endif
