/* memstore.h -- `--store memory`: the API's backend with no Redis at all.
 * Tasks live in this process, on the timing wheel alone (the seeds'
 * single-machine design). NOT durable: a restart loses every pending task.
 * For development and tests. Functions with a `void *self` first argument
 * are the api_backend entries (see api.h); their callbacks run from the loop. */
#ifndef TICKD_MEMSTORE_H
#define TICKD_MEMSTORE_H

#include "config.h"
#include "dispatch.h"
#include "store.h"

struct event_base;
typedef struct memstore memstore;

memstore *memstore_create(struct event_base *base, const config *cfg);
void memstore_set_dispatch(memstore *m, dispatch *d);
void memstore_free(memstore *m);

void memstore_add(void *self, const task_input *t, store_add_fn *cb, void *priv);
void memstore_get(void *self, const char *id, store_get_fn *cb, void *priv);
void memstore_cancel(void *self, const char *id, store_cancel_fn *cb, void *priv);
void memstore_health(void *self, store_health_fn *cb, void *priv);
int64_t memstore_now(void *self);
void memstore_stats(void *self, cJSON *obj);

/* A callback of a memstore job finished (dispatch's done callback). */
void memstore_on_done(memstore *m, job *j);
/* Callbacks being made now. */
int memstore_calling(const memstore *m);

#endif
