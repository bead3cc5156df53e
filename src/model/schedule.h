/* schedule.h -- what a schedule is, independent of where it is stored: the
 * API's definition JSON validated and normalized, its run times, and the
 * plan of which runs one pass of the runner makes.
 *
 * A schedule repeats a task template on an interval (every_ms, from
 * start_at) or a cron expression in a time zone (cron.h), `times` runs in all
 * or for ever, none after end_at. Its id is "sch.<key>"; its bucket is the
 * key's (task_bucket), so the id routes every call.
 *
 * Each run is an ordinary task whose key is "s:<key>:<version>" and whose execute_at is
 * the run time: the run's task id is a function of the schedule, the run time
 * and the claim that made it (its home slice), so a run made twice, by two
 * replicas or after a crash between making it and recording it, is stored
 * once (store add is idempotent on the id). */
#ifndef TICKD_SCHEDULE_H
#define TICKD_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/cron.h"
#include "model/task.h"

#define SCHED_KEY_MAX 190            /* "s:<key>:<version>" is a task key (<= 200) */
#define SCHED_ID_MAX (SCHED_KEY_MAX + 8)
#define SCHED_EVERY_MIN_MS 1000
#define SCHED_NEXT_RUNS 5
#define SCHED_PLAN_MAX 100           /* most runs one pass makes of one schedule */

typedef enum { CATCH_LATEST, CATCH_ALL, CATCH_NONE } sched_catch;

typedef struct schedule_def {
    char key[SCHED_KEY_MAX + 1];
    int key_generated;
    int64_t every_ms;                /* 0: cron */
    int64_t start_at_ms;             /* every_ms: the first run */
    int start_default;               /* start_at was not given: now + every_ms */
    cron_expr cron;
    char cron_text[CRON_LEN_MAX + 1];
    const tz *zone;                  /* cron: the zone (never freed) */
    char tz_name[64];
    int64_t times;                   /* 0: for ever */
    int64_t end_at_ms;               /* 0: none */
    sched_catch catch_up;
    cJSON *task;                     /* the template (owned) */
    char *json;                      /* the normalized definition, malloc'd */
} schedule_def;

/* Validate a definition object from the API at time now_ms. Returns 0, or -1
 * with "field: reason" in err and nothing allocated. */
int schedule_def_parse(const cJSON *obj, int64_t now_ms, schedule_def *out, char *err,
                       size_t errlen);
/* The same for the times alone (every_ms, start_at, cron, tz, times,
 * end_at, catch_up; no key nor task): what a preview of the runs takes, with
 * the same errors. 0, or -1 + err. */
int schedule_when_parse(const cJSON *obj, int64_t now_ms, schedule_def *out, char *err,
                        size_t errlen);
/* Read back a normalized definition (as stored). 0 or -1 + err. */
int schedule_def_load(const char *json, schedule_def *out, char *err, size_t errlen);
void schedule_def_free(schedule_def *d);

/* The schedule's id for a key, and the key of an id (NULL if malformed). */
void schedule_id(const char *key, char out[SCHED_ID_MAX]);
const char *schedule_id_key(const char *id);

/* Whether a stored definition is what a POST asked for: the same, or, when
 * the POST gave no start_at (so its default moved with the clock), the same
 * but for start_at. */
int schedule_def_same(const schedule_def *posted, const char *stored_json);

/* The first run strictly after t, ignoring times and end_at; -1 when none. */
int64_t schedule_after(const schedule_def *d, int64_t t);
/* The first run of a new (or replaced, or resumed) schedule at now: every_ms
 * runs from start_at (then its later steps if start_at has passed), cron
 * from the first match after now. -1 when none (end_at passed). */
int64_t schedule_first(const schedule_def *d, int64_t now);

/* What one pass makes of a schedule whose next run not yet made is `next`,
 * with `runs` made so far, at time now. Runs up to now + lead are made; a run
 * more than late_ms in the past is missed (no tickd reached it in time) and
 * catch_up decides: all run (oldest first), the latest runs, or none.
 * At most SCHED_PLAN_MAX runs; `next` is then where the next pass goes on. */
typedef struct schedule_plan {
    int n;
    int64_t at[SCHED_PLAN_MAX];
    int64_t skipped;                 /* missed runs not made (catch_up) */
    int64_t next;                    /* the next run not made; -1: completed */
} schedule_plan;
void schedule_plan_runs(const schedule_def *d, int64_t next, int64_t runs, int64_t now,
                        int64_t lead, int64_t late_ms, schedule_plan *p);

/* The next `n` run times from `next` given `runs` made, honouring times and
 * end_at; returns how many were written. */
int schedule_upcoming(const schedule_def *d, int64_t next, int64_t runs, int n, int64_t *out);

/* The task of the run at `at` of schedule `id` at definition version v: the
 * template with key "s:<key>:<v>", execute_at = at and schedule_id = id in
 * its spec, homed by the clock home_now_ms (the claim's). A new version (PUT,
 * pause and resume) gives its runs new ids, so a run cancelled under the old
 * one is made anew. Returns 0 or -1 + err. */
int schedule_run_task(const schedule_def *d, const char *id, int64_t v, int64_t at,
                      int64_t home_now_ms, task_input *out, char *err, size_t errlen);

/* How long a claim's clock may home the runs it makes (task_home_ms keeps
 * such a home open for half the slice grace, less a margin): a lease that
 * expired sooner hands the same clock, so the same run ids, to the next
 * runner. */
static inline int64_t schedule_keep_ms(int64_t slice_grace_ms)
{
    return slice_grace_ms / 2 > 2000 ? slice_grace_ms / 2 - 2000 : 0;
}
/* A pass's lease: a runner that dies mid-pass leaves its schedules to the
 * others this long, so their runs are made again before they count as
 * missed (the runner's lead + this). */
#define SCHED_LEASE_MS 2000

/* Render one run time as {"at": ms, "time": RFC 3339 in the schedule's zone}. */
cJSON *schedule_time_json(const schedule_def *d, int64_t at);

#endif
