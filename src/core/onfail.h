/* onfail.h -- the task.failed event: once a task has ended failed (its end
 * recorded in the store), its on_failure callback -- or callback.on_failure_url
 * when it names none -- is POSTed a JSON description of the task, its attempts
 * and its last error, with the header tickd-event: task.failed, signed as any
 * callback is, through the same dispatch pool (and the same destination
 * policy).
 *
 * An event has its own small retry policy (ONFAIL_ATTEMPTS attempts, from
 * ONFAIL_BACKOFF_MS doubling, ONFAIL_TIMEOUT_MS each) and lives in this
 * process only: a restart while one waits for its next attempt loses it. At
 * most ONFAIL_PENDING wait at once; beyond, new ones are dropped with a
 * warning, so a dead failure receiver cannot make tickd grow.
 *
 * Main thread only. */
#ifndef TICKD_ONFAIL_H
#define TICKD_ONFAIL_H

#include <stddef.h>
#include <stdint.h>

#include "delivery/dispatch.h"

#define ONFAIL_EVENT "task.failed"
#define ONFAIL_EXPIRED "task.expired"    /* the same, for a task that expired */
#define ONFAIL_ATTEMPTS 5
#define ONFAIL_BACKOFF_MS 1000
#define ONFAIL_TIMEOUT_MS 10000
#define ONFAIL_PENDING 10000

struct event_base;
typedef struct onfail onfail;

/* Events go to submit (the dispatch pool) and come back through
 * onfail_on_done. global_url: callback.on_failure_url ("" = none). */
onfail *onfail_create(struct event_base *base, const char *global_url,
                      void (*submit)(callback *j, void *priv), void *priv);

/* Task j (its spec, last attempt, status_code and err) ended failed at
 * now_ms: send its event, if it or the configuration names a receiver. j
 * stays the caller's. */
void onfail_task_failed(onfail *o, const callback *j, int64_t now_ms);

/* An event's attempt ended (j->event set): done, or tried again later. An
 * aborted one (the pool stopped, or submit had no pool to give it to) is
 * dropped with a warning. */
void onfail_on_done(onfail *o, callback *j);

/* Events handed to submit and not yet back: a stop waits for them as for
 * callbacks. */
int onfail_calling(const onfail *o);

/* The body of the event for task j at now_ms (malloc'd JSON), or NULL when
 * j's spec is not readable JSON. */
char *onfail_body(const callback *j, int64_t now_ms);

/* Events waiting for their next attempt are dropped (call after the pool has
 * handed back every callback). */
void onfail_free(onfail *o);

#endif
