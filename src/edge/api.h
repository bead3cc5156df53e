/* api.h -- the HTTP API v1 on http_server.h (doc/api.md documents it for users).
 *
 * The API talks to the store (store.h), whichever it is; every store call
 * answers through its callback exactly once, from the loop. Every request
 * gets exactly one http_reply (dropped by the HTTP layer if its client went
 * away first). */
#ifndef TICKD_API_H
#define TICKD_API_H

#include <stdint.h>

#include "store/store.h"
#include "model/task.h"

struct event_base;
typedef struct api api;

/* Adds counters to the JSON object of GET /v1/stats. */
typedef void api_stats_fn(void *priv, cJSON *obj);

/* Listen on host:port ("127.0.0.1:0" picks a free port). With a non-empty
 * `token` (one or more tokens separated by spaces), every /v1/ request must
 * carry "Authorization: Bearer <one of them>" (401 otherwise); /healthz stays
 * open. A token of `read_tokens` (the same syntax; only with `token`) may
 * only read: GET and HEAD, 403 otherwise. Returns NULL + err. */
api *api_create(struct event_base *base, const char *listen, int64_t max_body,
                int64_t idle_timeout_ms, const char *token, const char *read_tokens, store *s,
                api_stats_fn *stats, void *stats_priv, char *err, size_t errlen);

/* Replace the accepted tokens (as api_create's `token` and `read_tokens`;
 * "" and "" open the API), from the next request's head on. Returns how many
 * full tokens there are now, and in *nread (if not NULL) how many read-only
 * ones (a token in both lists is a full one). */
int api_set_tokens(api *a, const char *token, const char *read_tokens, int *nread);

/* Told the bucket of each schedule created, replaced or resumed (the runner
 * makes its first runs at once rather than at its next tick). */
typedef void api_schedule_fn(int bucket, void *priv);
void api_on_schedule(api *a, api_schedule_fn *fn, void *priv);

/* GET /metrics: fn fills the gauges other modules own (callbacks in flight,
 * tasks held, build labels); the API adds its connections, the store's
 * counters and the cached count of scheduled tasks. */
struct metrics_now;
typedef void api_gauges_fn(void *priv, struct metrics_now *now);
void api_on_metrics(api *a, api_gauges_fn *fn, void *priv);

/* Told of each write to flow control's settings (the scheduler reads them
 * again and lets waiting tasks go at once). */
typedef void api_flow_fn(void *priv);
void api_on_flow(api *a, api_flow_fn *fn, void *priv);

/* The port actually bound. */
/* Created with no store (NULL), the API answers every request 503 with the
 * reason last set here, and /healthz too; api_set_store() opens it. */
void api_set_waiting(api *a, const char *why);
void api_set_store(api *a, store *s);

int api_port(const api *a);

/* The HTTP server under the API (for its limits). */
struct http_server *api_http(const api *a);

/* Stop accepting connections; requests already read are still answered. */
void api_stop_accepting(api *a);

/* Requests read and not yet answered. */
int api_busy(const api *a);

void api_free(api *a);

#endif
