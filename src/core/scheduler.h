/* scheduler.h -- the scheduler: the tick that claims due tasks from the store,
 * the fire wheel that holds them to their millisecond, and the recording of
 * each attempt's outcome. It runs on any store (store.h).
 *
 * Tick: every tick_ms, each bucket is scanned from its watermark (the oldest
 * minute slice not yet drained) to the slice of now + reach, one claim
 * per slice (more while a slice fills the batch), as long as there is room
 * under max_inflight. The reach is lookahead_ms, or less when the room is
 * short: no further than a quarter of max_inflight covers at the rate
 * callbacks fire, with ticks more than twice within it (claiming on from
 * where each pass ended); and half the room is kept for tasks due within
 * half the reach, so that tasks claimed early never keep those due now
 * waiting. Slices found
 * empty and older than the grace move the watermark forward
 * (compare-and-set), so after any downtime the scan starts where the last
 * one stopped: nothing due is ever skipped.
 * A slice whose claim fails holds its bucket's watermark back; the scan goes
 * on with the bucket's other slices.
 *
 * Claimed tasks wait on the in-process timing wheel and go to the dispatch
 * pool at their due ms (the store's clock). */
#ifndef TICKD_SCHED_H
#define TICKD_SCHED_H

#include "base/config.h"
#include "base/util.h"
#include "base/wheel.h"
#include "core/flow.h"
#include "delivery/dispatch.h"
#include "store/store.h"

struct event_base;
typedef struct sched sched;

/* A job that failed for tickd's own reason (uncounted) goes again after
 * this long plus up to as much again of jitter. */
#define UNCOUNTED_RETRY_MS 1000

/* Outcomes are gathered for this long and handed to the store in one call
 * (which sends one script call per home slice): under a burst that is a
 * hundred outcomes a call rather than tens, and a script call costs Redis
 * about as much as a hundred outcomes it carries, whatever its size. An
 * outcome is recorded up to this long (and a round trip) after its callback
 * ended; the lease (lease_margin_ms, at least 100, past the attempt's
 * timeout) covers it, and a stop waits for it (sched_idle). */
#define SCHED_SETTLE_GATHER_MS 20

/* A claimed task while the scheduler holds it: the callback the pool makes
 * (delivery's type, first, so that the pool's answer leads back here) and
 * what the scheduler keeps beside it. Owned by the scheduler from the claim
 * to the record of its outcome. */
typedef struct job job;
struct job {
    callback cb;                /* what the pool sends and answers */
    wheel_timer timer;          /* waiting for its ms on the fire wheel */
    job *next;                  /* the scheduler's queue link (asking, waiting) */
    char src[TASK_SLICE_MAX];   /* slice holding the lease */
    int64_t timeout_ms;         /* the attempt's: the spec's, or its queue's */
    job *wnext, *wprev;         /* the scheduler's list of jobs it holds */
    int far;                    /* claimed due later than half the reach ahead */
    int64_t retry_due_ms;       /* the retry being recorded (0: none) */
    /* a task a limit may hold back (flow.h) */
    int flow;                   /* 0, or FLOW_ASKING / FLOW_LET_GO (scheduler.c) */
    int64_t flow_at_ms;         /* let go: not sent before */
    int64_t flow_from_ms;       /* let go after waiting since (0: it did not wait) */
    char flow_reason[FLOW_REASON_MAX];
    uint64_t free_gen;          /* 1 + the limits' flow_cache_gen when a route
                                 * at the claim found none applies (0: none) */
    char queue[TASK_QUEUE_MAX];
    char dest[FLOW_DEST_MAX];
    char park_slice[TASK_SLICE_MAX]; /* held back: the slice its entry waits in */
    int ended_failed;           /* its end as failed (or expired) is being recorded */
};

/* The job a callback the scheduler submitted belongs to. */
static inline job *sched_job_of(callback *cb)
{
    return container_of(cb, job, cb);
}

/* Create the scheduler; sets each bucket's watermark if none exists (so
 * call it before the API accepts tasks) and listens to the store's adds.
 * Returns NULL + err. */
sched *sched_create(struct event_base *base, store *s, const config *cfg, char *err,
                    size_t errlen);

/* Where fired jobs go (the dispatch pool, in tickd); each comes back through
 * sched_on_done once its attempt ended. */
typedef void sched_submit_fn(job *j, void *priv);
void sched_set_submit(sched *sc, sched_submit_fn *fn, void *priv);
/* Told of each batch of claimed jobs that wait for their time, oldest due
 * first (the dispatch pool opens their connections ahead: dispatch_warm).
 * Not told while flow control holds a limit. */
typedef void sched_warm_fn(callback *const *cbs, int n, void *priv);
void sched_set_warm(sched *sc, sched_warm_fn *fn, void *priv);
void sched_on_done(sched *sc, job *j);

/* Told of each task whose end as failed the store has recorded (once per
 * task, as its final attempt is recorded once), with its last callback (spec,
 * attempt, status_code and err), which is freed after fn returns. */
typedef void sched_failed_fn(const callback *cb, void *priv);
void sched_set_failed(sched *sc, sched_failed_fn *fn, void *priv);

/* Start ticking. */
void sched_start(sched *sc);

/* A task was added due within the reach: scan its bucket now rather than
 * at the next tick. */
void sched_kick(sched *sc, int bucket);

/* Stop claiming; give back to the store every claimed task not yet fired. */
void sched_stop(sched *sc);

/* Callbacks being made now. */
int sched_calling(const sched *sc);
/* Tasks claimed and not yet recorded (calling, waiting for their ms, or
 * settling). */
int sched_held(const sched *sc);
/* 1 when nothing is held and no store call of the scheduler is pending. */
int sched_idle(const sched *sc);

/* Add the scheduler's counters to a JSON object (GET /v1/stats). */
void sched_stats(const sched *sc, cJSON *obj);

void sched_free(sched *sc);

/* Flow control (flow.h; nothing when the store has none): read the
 * settings again now (after a write); let waiting tasks go now (after a
 * resume or a limit raised); the tasks held back in the whole store as last
 * read (-1: no limits). */
void sched_flow_refresh(sched *sc);
void sched_flow_pump(sched *sc);
long long sched_flow_waiting(const sched *sc);

/* For tests on a fake clock: fire what is due by the store's clock now. */
void sched_poll(sched *sc);

#endif
