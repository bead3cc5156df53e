/* api.h -- the HTTP API v1 on http.h (README.md documents it for users).
 *
 * The API talks to a backend (Redis store or memory store) through the table
 * below; every backend call answers through its callback exactly once, from
 * the loop. Every request gets exactly one http_reply (dropped by the HTTP
 * layer if its client went away first). */
#ifndef TICKD_API_H
#define TICKD_API_H

#include <stdint.h>

#include "store.h"
#include "task.h"

struct event_base;
typedef struct api api;

typedef struct api_backend {
    void *self;
    void (*add)(void *self, const task_input *t, store_add_fn *cb, void *priv);
    void (*get)(void *self, const char *id, store_get_fn *cb, void *priv);
    void (*cancel)(void *self, const char *id, store_cancel_fn *cb, void *priv);
    void (*health)(void *self, store_health_fn *cb, void *priv);
    int64_t (*now_ms)(void *self);
    /* counters for GET /v1/stats: adds its fields to obj */
    void (*stats)(void *self, cJSON *obj);
} api_backend;

/* Listen on host:port ("127.0.0.1:0" picks a free port). With a non-empty
 * `token` (one or more tokens separated by spaces), every /v1/ request must
 * carry "Authorization: Bearer <one of them>" (401 otherwise); /healthz stays
 * open. Returns NULL + err. */
api *api_create(struct event_base *base, const char *listen, int64_t max_body,
                int64_t idle_timeout_ms, const char *token, const api_backend *be, char *err,
                size_t errlen);

/* The port actually bound. */
int api_port(const api *a);

/* The HTTP server under the API (for its limits). */
struct http_server *api_http(const api *a);

/* Stop accepting connections; requests already read are still answered. */
void api_stop_accepting(api *a);

/* Requests read and not yet answered. */
int api_busy(const api *a);

void api_free(api *a);

#endif
