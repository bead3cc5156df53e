/* history.h -- the scheduler's outcomes, minute by minute, for the console
 * (GET /v1/history): counted here, summed over the replicas by the store
 * (store.h's history).
 *
 * As metrics.h's counters, one accumulator for the process, written on the
 * main loop only: the scheduler tells it of each attempt and of each outcome
 * it records. Every HISTORY_FLUSH_MS the minutes counted go to the store, one
 * call each (one, mostly; two across a minute's end), whatever the number of
 * callbacks. Minutes are the store's clock's, the same on every replica. A
 * write that fails is not tried again: the console's history is telemetry,
 * and a Redis that refuses it has graver things to say (its counts stay in
 * GET /metrics). Nothing is counted while no history runs (unit tests of the
 * scheduler). */
#ifndef TICKD_HISTORY_H
#define TICKD_HISTORY_H

#include <stdint.h>

#include "delivery/dispatch.h"
#include "store/store.h"

struct event_base;
typedef struct history history;

#define HISTORY_FLUSH_MS 2000
/* How long the store keeps a minute: the console shows the last 24 h; three
 * days keep yesterday whole across a weekend's look back, at about 1 KB a
 * minute (4 MB at most) in Redis. */
#define HISTORY_KEEP_MS (3 * 86400000LL)

/* Start counting into s, flushing every HISTORY_FLUSH_MS (one history runs
 * at a time). */
history *history_create(struct event_base *base, store *s);

/* An attempt ended (ok: a 2xx); late_ms: from due (or from the time a limit
 * let it go) to the request sent, < 0 when no request was sent. */
void history_attempt(int ok, int64_t late_ms);
/* The scheduler records outcome o of job j (OUT_OK, OUT_FAIL, OUT_RETRY,
 * OUT_EXPIRE count; a retry of tickd's own, j->uncounted, does not). */
void history_outcome(store_outcome o, const job *j);

/* Write what was counted now, and stop the timer (a stop). */
void history_stop(history *h);
/* 1 when no write is under way. */
int history_idle(const history *h);

/* Writes that failed, for GET /v1/stats. */
void history_stats(const history *h, cJSON *obj);

/* After the store is closed (its calls answered). */
void history_free(history *h);

#endif
