/* schedule_runner.h -- the schedule runner: every tick, each bucket's schedules whose
 * next run is within the lead are claimed from the store (a lease: one
 * runner of all the replicas holds a schedule at a time), their runs are made
 * as ordinary tasks (store add, idempotent on the run's id), and the pass is
 * recorded (store sch_advance), which ends the lease.
 *
 * Faults: a runner that dies between making runs and recording them leaves
 * a lease that expires; the next runner gets the same claim clock, so it
 * makes the same run ids, which the store already holds: no run is doubled
 * and none lost. A run that could not be made holds the schedule there; the
 * next pass makes it again.
 *
 * Lead: runs due before now + lookahead_ms + 2 x tick_ms are made, so each is
 * stored before the task scan reaches it and fires on its millisecond. A run
 * found more than the lead + SCHED_LEASE_MS in the past was missed (no tickd
 * ran); the schedule's catch_up decides (schedule.h). A pass's lease is
 * short, so the schedules of a runner that died mid-pass are taken over
 * before any of their runs counts as missed. */
#ifndef TICKD_RUNNER_H
#define TICKD_RUNNER_H

#include "base/config.h"
#include "store/store.h"

struct event_base;
typedef struct runner runner;

runner *runner_create(struct event_base *base, store *s, const config *cfg);
void runner_start(runner *r);
/* A schedule of this bucket changed: claim the bucket now. */
void runner_kick(runner *r, int bucket);
/* Stop claiming; passes in flight finish. */
void runner_stop(runner *r);
/* 1 when no store call of the runner is pending. */
int runner_idle(const runner *r);
/* The lead: runs before now + this are made. A run found later than
 * runner_late_ms (the lead + a pass's lease) was missed. */
int64_t runner_lead_ms(const config *cfg);
int64_t runner_late_ms(const config *cfg);
void runner_stats(const runner *r, cJSON *obj);
void runner_free(runner *r);

#endif
