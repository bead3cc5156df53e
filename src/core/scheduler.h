/* scheduler.h -- the scheduler: the tick that claims due tasks from the store,
 * the fire wheel that holds them to their millisecond, and the recording of
 * each attempt's outcome. It runs on any store (store.h).
 *
 * Tick: every tick_ms, each bucket is scanned from its watermark (the oldest
 * minute slice not yet drained) to the slice of now + lookahead, one claim
 * claim per slice (more while a slice fills the batch), as long as
 * there is room under max_inflight. Slices found empty and older than the
 * grace move the watermark forward (compare-and-set), so after any downtime
 * the scan starts where the last one stopped: nothing due is ever skipped.
 * A slice whose claim fails holds its bucket's watermark back; the scan goes
 * on with the bucket's other slices.
 *
 * Claimed tasks wait on the in-process timing wheel and go to the dispatch
 * pool at their due ms (the store's clock). */
#ifndef TICKD_SCHED_H
#define TICKD_SCHED_H

#include "base/config.h"
#include "delivery/dispatch.h"
#include "store/store.h"

struct event_base;
typedef struct sched sched;

/* Create the scheduler; sets each bucket's watermark if none exists (so
 * call it before the API accepts tasks) and listens to the store's adds.
 * Returns NULL + err. */
sched *sched_create(struct event_base *base, store *s, const config *cfg, char *err,
                    size_t errlen);

/* Where fired jobs go (the dispatch pool, in tickd); each comes back through
 * sched_on_done once its attempt ended. */
typedef void sched_submit_fn(job *j, void *priv);
void sched_set_submit(sched *sc, sched_submit_fn *fn, void *priv);
void sched_on_done(sched *sc, job *j);

/* Told of each task whose end as failed the store has recorded (once per
 * task, as its final attempt is recorded once), with its last job (spec,
 * attempt, status_code and err), which is freed after fn returns. */
typedef void sched_failed_fn(const job *j, void *priv);
void sched_set_failed(sched *sc, sched_failed_fn *fn, void *priv);

/* Start ticking. */
void sched_start(sched *sc);

/* A task was added due within the lookahead: scan its bucket now rather than
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
