/* fuzz_schedule_json.c -- the API's schedule JSON on arbitrary bytes, as
 * api.c takes it: cJSON, the check of NULs and numbers, schedule_def_parse; then what the
 * runner does with an accepted one: read back, plan a pass (with missed runs
 * and without), make the runs' tasks. Invariants beyond the sanitizers: an
 * error names a field ("field: reason"); the stored definition reads back to
 * itself; planned runs are in order, honour times and end_at, and each makes
 * a valid task. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/schedule.h"

#define NOW_MS INT64_C(1795323600000)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void plan_check(const schedule_def *d, int64_t next, int64_t now)
{
    schedule_plan p;
    char err[400];
    schedule_plan_runs(d, next, 0, now, 3500, 5500, &p);
    if (p.n < 0 || p.n > SCHED_PLAN_MAX) abort();
    for (int i = 0; i < p.n; i++) {
        if (i && p.at[i] <= p.at[i - 1]) abort();
        if (d->end_at_ms && p.at[i] > d->end_at_ms) abort();
        if (d->times && i >= d->times) abort();
        if (i < 3) {
            task_input t;
            if (schedule_run_task(d, "sch.k", 1, p.at[i], now, &t, err, sizeof(err)) != 0) {
                fprintf(stderr, "run refused: %s\n", err);
                abort();
            }
            char *text = task_input_spec(&t);
            cJSON *spec = cJSON_Parse(text);
            if (!spec) abort();
            cJSON_Delete(spec);
            free(text);
            task_input_free(&t);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char err[400];
    if (memchr(s, '\0', size)) return 0;
    cJSON *j = cJSON_ParseWithLength(s, size);
    if (!j) return 0;
    schedule_def d, back;
    if (task_json_check(s, size, err, sizeof(err)) != 0 ||
        schedule_def_parse(j, NOW_MS, &d, err, sizeof(err)) != 0) {
        if (!strchr(err, ':')) abort();
        cJSON_Delete(j);
        return 0;
    }
    cJSON_Delete(j);
    /* times from the API are within the bounds (task.h) */
    if (d.start_at_ms < 0 || d.start_at_ms > TASK_TIME_MAX_MS || d.end_at_ms < 0 ||
        d.end_at_ms > TASK_TIME_MAX_MS)
        abort();
    if (schedule_def_load(d.json, &back, err, sizeof(err)) != 0) {
        fprintf(stderr, "stored definition refused: %s\n%s\n", err, d.json);
        abort();
    }
    if (strcmp(back.json, d.json) != 0) abort();
    schedule_def_free(&back);
    int64_t first = schedule_first(&d, NOW_MS);
    if (first < 0) abort(); /* parse refuses a schedule that never runs */
    plan_check(&d, first, NOW_MS);
    plan_check(&d, first, NOW_MS + 3600 * 1000);  /* an hour of downtime */
    schedule_def_free(&d);
    return 0;
}
