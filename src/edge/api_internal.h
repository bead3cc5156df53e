/* api_internal.h -- what the API's files (api.c: tasks, schedules, routing;
 * api_tasks.c: finding tasks and running them again) share. Not an
 * interface: nothing outside src/api*.c includes it. */
#ifndef TICKD_API_INTERNAL_H
#define TICKD_API_INTERNAL_H

#include <stddef.h>

#include "edge/api.h"
#include "edge/http_server.h"

struct api {
    http_server *http;
    store *s;                 /* NULL until the store is reached */
    char *waiting_for;        /* why it is not yet */
    api_stats_fn *stats;
    void *stats_priv;
    int busy;
    char **tokens;            /* the accepted tokens; none: the API is open */
    int ntokens;
    int nadmin;               /* tokens[0..nadmin) may do everything, the rest only read */
    api_schedule_fn *on_schedule;
    void *on_schedule_priv;
    api_gauges_fn *gauges;
    void *gauges_priv;
    api_flow_fn *on_flow;
    void *on_flow_priv;
    /* the cached count of scheduled tasks (GET /metrics) */
    int64_t count, count_ms, count_took_ms, count_started_ms;
    int counting;
    struct api_req **count_waiting;   /* scrapes waiting for the first count */
    int ncount_waiting;
};

/* One API request waiting for the backend. If its client went away, the
 * reply to `req` is dropped by the HTTP layer. */
typedef struct api_req {
    api *a;
    http_req *req;
    int waiting;              /* backend answers still to come */
    /* batch */
    int n;
    cJSON **results;
    task_input *tasks;
    int *slot_of;             /* task index -> result index */
} api_req;

/* A request waiting for the store: counted busy until api_finish*. */
api_req *api_req_new(api *a, http_req *req);
void api_req_free(api_req *r);
void api_send_json(http_req *req, int code, const char *reason, cJSON *body);

/* GET /metrics (api_metrics.c) */
void api_metrics(api *a, http_req *req);
void api_error(http_req *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Answer r with body (or the error) and free it. */
void api_finish(api_req *r, int status, const char *reason, cJSON *body);
void api_finish_error(api_req *r, int status, const char *code, const char *msg);
/* A stored task for GET: malloc'd JSON, or NULL. */
char *api_render_task(const char *id, const char *spec, const char *state);
void api_state_status(const char *state, char *out, size_t outlen);
/* The request's JSON body; on failure answered (400/415) and NULL. */
cJSON *api_body(http_req *req);
/* The value of hex digit c, or -1. */
int api_hex(int c);
/* Query parameter `name`, percent-decoded, into out: 1 found, 0 absent. */
int api_query(const char *target, const char *name, char *out, size_t outlen);
/* A listing's limit (1..max; left as it is when not given) and cursor
 * ("" when not given) from the query, which may hold nothing else: 0, or
 * -1 when answered 400. */
int api_page_query(http_req *req, int64_t max, int64_t *limit, char *cursor, size_t cursorlen);

/* api_flow.c: /v1/queues..., /v1/destinations... */
void api_flow(api *a, http_req *req, const char *path);

/* api_console.c: /v1/history, /v1/cluster, /v1/schedules:preview; 1 when
 * path is one of them (answered) */
int api_console(api *a, http_req *req, const char *path);

/* api_tasks.c */
void api_list_tasks(api *a, http_req *req);
void api_move_task(api *a, http_req *req, const char *id, int retry);
void api_retry_tasks(api *a, http_req *req);

#endif
