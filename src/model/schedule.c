/* schedule.c -- see schedule.h. */
#include "model/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/trace.h"
#include "base/util.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

static const char *catch_names[] = {"latest", "all", "none"};

/* Template fields a schedule decides itself. */
/* expires_at is a time of its own: a run takes ttl_ms, from its own time */
static const char *template_refused[] = {"key", "execute_at", "delay_ms", "expires_at"};

void schedule_id(const char *key, char out[SCHED_ID_MAX])
{
    snprintf(out, SCHED_ID_MAX, "sch.%s", key);
}

const char *schedule_id_key(const char *id)
{
    if (strncmp(id, "sch.", 4) != 0) return NULL;
    size_t n = strlen(id + 4);
    if (n == 0 || n > SCHED_KEY_MAX || !task_key_valid(id + 4)) return NULL;
    return id + 4;
}

/* A time field: from the API, task_json_time's bounds; as stored, integer
 * Unix ms from the year 0000 on (tickds before those bounds stored a start_at
 * before 1970 that an RFC 3339 string gave: such a schedule still reads
 * back, runs and shows, rather than failing on every pass). */
static int sched_time(const cJSON *v, const char *name, int stored, int64_t *out, char *err,
                      size_t errlen)
{
    if (!stored) return task_json_time(v, name, out, err, errlen);
    if (task_json_int(v, -TASK_TIME_MAX_MS, INT64_C(1) << 52, out) != 0)
        FAIL("%s: not integer Unix milliseconds", name);
    return 0;
fail:
    return -1;
}

/* Check the template: it is a task without key or due time. */
static int sched_check_template(const cJSON *t, const char *key, int64_t now_ms, char *err,
                                size_t errlen)
{
    char why[400];
    if (!cJSON_IsObject(t)) FAIL("task: must be a JSON object (the task template)");
    for (size_t i = 0; i < sizeof(template_refused) / sizeof(*template_refused); i++)
        if (cJSON_GetObjectItemCaseSensitive(t, template_refused[i]))
            FAIL("task.%s: not allowed in a template (%s)", template_refused[i],
                 strcmp(template_refused[i], "expires_at") == 0
                     ? "give ttl_ms: each run expires that long after its time"
                     : "the schedule sets it");
    cJSON *probe = cJSON_Duplicate(t, 1);
    char rkey[TASK_KEY_MAX + 1];
    snprintf(rkey, sizeof(rkey), TASK_RUN_PREFIX "%s:1", key);
    cJSON_AddStringToObject(probe, "key", rkey);
    task_input ti;
    int rc = task_input_parse_made(probe, now_ms, &ti, why, sizeof(why));
    cJSON_Delete(probe);
    if (rc != 0) FAIL("task.%s", why);
    task_input_free(&ti);
    return 0;
fail:
    return -1;
}

static void schedule_def_json(schedule_def *d)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", d->key);
    if (d->every_ms) {
        cJSON_AddNumberToObject(o, "every_ms", (double)d->every_ms);
        cJSON_AddNumberToObject(o, "start_at", (double)d->start_at_ms);
    } else {
        cJSON_AddStringToObject(o, "cron", d->cron_text);
        cJSON_AddStringToObject(o, "tz", d->tz_name);
    }
    if (d->times) cJSON_AddNumberToObject(o, "times", (double)d->times);
    if (d->end_at_ms) cJSON_AddNumberToObject(o, "end_at", (double)d->end_at_ms);
    cJSON_AddStringToObject(o, "catch_up", catch_names[d->catch_up]);
    cJSON_AddItemToObject(o, "task", cJSON_Duplicate(d->task, 1));
    d->json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
}

/* Shared by parse (from the API, `stored` 0) and load (`stored` 1: start_at
 * is always there, the template was checked when stored); `when`: the times
 * alone, no key nor task (a preview). */
static int schedule_def_read(const cJSON *obj, int64_t now_ms, int stored, int when,
                             schedule_def *out, char *err, size_t errlen)
{
    static const char *fields[] = {"key", "task", "every_ms", "start_at", "cron", "tz",
                                   "times", "end_at", "catch_up"};
    const cJSON *v;
    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(obj)) FAIL("schedule: must be a JSON object");
    if (task_check_fields(obj, fields, sizeof(fields) / sizeof(*fields), err, errlen) != 0)
        goto fail;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "key"))) {
        if (!cJSON_IsString(v) || strlen(v->valuestring) > SCHED_KEY_MAX ||
            !task_key_valid(v->valuestring))
            FAIL("key: must be 1-%d characters of A-Z a-z 0-9 . _ : -", SCHED_KEY_MAX);
        util_copy(out->key, sizeof(out->key), v->valuestring);
    } else {
        task_key_random(out->key);
        out->key_generated = 1;
    }

    const cJSON *every = cJSON_GetObjectItemCaseSensitive(obj, "every_ms");
    const cJSON *cron = cJSON_GetObjectItemCaseSensitive(obj, "cron");
    const cJSON *tzv = cJSON_GetObjectItemCaseSensitive(obj, "tz");
    const cJSON *start = cJSON_GetObjectItemCaseSensitive(obj, "start_at");
    if (every && cron) FAIL("every_ms: give every_ms or cron, not both");
    if (!every && !cron) FAIL("cron: required (or every_ms)");
    if (every) {
        if (task_json_int(every, SCHED_EVERY_MIN_MS, TASK_MAX_AHEAD_MS, &out->every_ms) != 0)
            FAIL("every_ms: must be an integer from %d to %lld", SCHED_EVERY_MIN_MS,
                 (long long)TASK_MAX_AHEAD_MS);
        if (tzv) FAIL("tz: only with cron (every_ms ignores time zones)");
        if (start) {
            if (sched_time(start, "start_at", stored, &out->start_at_ms, err, errlen) != 0)
                goto fail;
        } else if (stored) {
            FAIL("start_at: missing");
        } else {
            out->start_at_ms = now_ms + out->every_ms;
            out->start_default = 1;
        }
    } else {
        char why[256];
        if (!cJSON_IsString(cron)) FAIL("cron: must be a string");
        size_t n = strlen(cron->valuestring);
        if (n > CRON_LEN_MAX) FAIL("cron: longer than %d bytes", CRON_LEN_MAX);
        if (cron_parse(&out->cron, cron->valuestring, n, why) != 0) FAIL("%s", why);
        memcpy(out->cron_text, cron->valuestring, n + 1);
        if (start) FAIL("start_at: only with every_ms (a cron expression says when it runs)");
        const char *zn = "UTC";
        if (tzv) {
            if (!cJSON_IsString(tzv)) FAIL("tz: must be a string, an IANA zone name");
            zn = tzv->valuestring;
        }
        if (strlen(zn) >= sizeof(out->tz_name)) FAIL("tz: %.80s...: unknown time zone", zn);
        if (!(out->zone = tz_get(zn, why))) FAIL("%s", why); /* "tz: ..." */
        util_copy(out->tz_name, sizeof(out->tz_name), zn);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "times")) &&
        task_json_int(v, 1, INT64_C(1) << 52, &out->times) != 0)
        FAIL("times: must be an integer >= 1 (leave it out to run for ever)");
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "end_at"))) {
        if (sched_time(v, "end_at", stored, &out->end_at_ms, err, errlen) != 0) goto fail;
        if (out->end_at_ms == 0) FAIL("end_at: must be after 1970");
        if (out->every_ms && out->end_at_ms < out->start_at_ms)
            FAIL("end_at: before start_at");
        if (!stored && out->end_at_ms <= now_ms) FAIL("end_at: already passed");
    }
    out->catch_up = CATCH_LATEST;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "catch_up"))) {
        int i = 0;
        while (i < 3 && !(cJSON_IsString(v) && strcmp(v->valuestring, catch_names[i]) == 0)) i++;
        if (i == 3) FAIL("catch_up: must be one of latest, all, none");
        out->catch_up = (sched_catch)i;
    }
    v = when ? NULL : cJSON_GetObjectItemCaseSensitive(obj, "task");
    if (!when && !v) FAIL("task: required, the task template");
    if (v && !stored && sched_check_template(v, out->key, now_ms, err, errlen) != 0) goto fail;
    if (v && !cJSON_IsObject(v)) FAIL("task: must be a JSON object");
    out->task = v ? cJSON_Duplicate(v, 1) : NULL;
    if (!stored && schedule_first(out, now_ms) < 0)
        FAIL("%s: the schedule would never run", out->every_ms ? "end_at" : "cron");
    schedule_def_json(out);
    return 0;
fail:
    cJSON_Delete(out->task);
    out->task = NULL;
    return -1;
}

int schedule_def_parse(const cJSON *obj, int64_t now_ms, schedule_def *out, char *err,
                       size_t errlen)
{
    return schedule_def_read(obj, now_ms, 0, 0, out, err, errlen);
}

int schedule_when_parse(const cJSON *obj, int64_t now_ms, schedule_def *out, char *err,
                        size_t errlen)
{
    return schedule_def_read(obj, now_ms, 0, 1, out, err, errlen);
}

int schedule_def_load(const char *json, schedule_def *out, char *err, size_t errlen)
{
    cJSON *o = cJSON_Parse(json);
    if (!o) {
        memset(out, 0, sizeof(*out));
        snprintf(err, errlen, "schedule: stored definition is not JSON");
        return -1;
    }
    int rc = schedule_def_read(o, 0, 1, 0, out, err, errlen);
    cJSON_Delete(o);
    return rc;
}

int schedule_def_same(const schedule_def *posted, const char *stored_json)
{
    if (strcmp(posted->json, stored_json) == 0) return 1;
    if (!posted->start_default) return 0;
    cJSON *a = cJSON_Parse(posted->json), *b = cJSON_Parse(stored_json);
    cJSON_DeleteItemFromObjectCaseSensitive(a, "start_at");
    cJSON_DeleteItemFromObjectCaseSensitive(b, "start_at");
    int same = a && b && cJSON_Compare(a, b, 1);
    cJSON_Delete(a);
    cJSON_Delete(b);
    return same;
}

void schedule_def_free(schedule_def *d)
{
    cJSON_Delete(d->task);
    free(d->json);
    d->task = NULL;
    d->json = NULL;
}

/* ---- run times --------------------------------------------------------- */

int64_t schedule_after(const schedule_def *d, int64_t t)
{
    if (d->every_ms) {
        if (t < d->start_at_ms) return d->start_at_ms;
        return d->start_at_ms + ((t - d->start_at_ms) / d->every_ms + 1) * d->every_ms;
    }
    int64_t next;
    return cron_next(&d->cron, d->zone, t, &next) == 0 ? next : -1;
}

/* Whether a run at `at`, after `runs` made, is allowed by times and end_at. */
static int sched_allowed(const schedule_def *d, int64_t at, int64_t runs)
{
    /* a run is a task: none after the last time a task may have */
    return at >= 0 && at <= TASK_TIME_MAX_MS && (!d->times || runs < d->times) &&
           (!d->end_at_ms || at <= d->end_at_ms);
}

int64_t schedule_first(const schedule_def *d, int64_t now)
{
    int64_t at = d->every_ms && now < d->start_at_ms ? d->start_at_ms
                                                     : schedule_after(d, now);
    return sched_allowed(d, at, 0) ? at : -1;
}

int schedule_upcoming(const schedule_def *d, int64_t next, int64_t runs, int n, int64_t *out)
{
    int k = 0;
    for (int64_t at = next; k < n && sched_allowed(d, at, runs + k); at = schedule_after(d, at))
        out[k++] = at;
    return k;
}

/* Cron steps walked in one pass over missed runs before it goes on in the
 * next: a minute schedule missed for a year is 525,600 steps. */
#define PLAN_STEPS_MAX 200000

void schedule_plan_runs(const schedule_def *d, int64_t next, int64_t runs, int64_t now,
                        int64_t lead, int64_t late_ms, schedule_plan *p)
{
    int64_t at = next, missed_before = now - late_ms;
    memset(p, 0, sizeof(*p));
    /* missed runs */
    if (at >= 0 && at < missed_before && d->catch_up != CATCH_ALL) {
        int64_t last = -1;
        long steps = 0;
        if (d->every_ms && at >= d->start_at_ms) {
            /* the last missed step, at once */
            int64_t k = (missed_before - 1 - at) / d->every_ms;
            if (d->end_at_ms && at + k * d->every_ms > d->end_at_ms)
                k = d->end_at_ms < at ? 0 : (d->end_at_ms - at) / d->every_ms;
            last = at + k * d->every_ms;
            p->skipped = k;
            at = schedule_after(d, last);
        } else {
            while (at >= 0 && at < missed_before && steps++ < PLAN_STEPS_MAX &&
                   (!d->end_at_ms || at <= d->end_at_ms)) {
                if (last >= 0) p->skipped++;
                last = at;
                at = schedule_after(d, at);
            }
            if (steps > PLAN_STEPS_MAX || (at >= 0 && at < missed_before &&
                                            (!d->end_at_ms || at <= d->end_at_ms))) {
                /* more to walk: the next pass goes on from here */
                p->skipped += last >= 0;
                p->next = at;
                return;
            }
        }
        if (last >= 0) {
            if (d->catch_up == CATCH_LATEST && sched_allowed(d, last, runs))
                p->at[p->n++] = last;
            else
                p->skipped++;
        }
    }
    for (; p->n < SCHED_PLAN_MAX && at >= 0 && at <= now + lead &&
           sched_allowed(d, at, runs + p->n);
         at = schedule_after(d, at))
        p->at[p->n++] = at;
    p->next = sched_allowed(d, at, runs + p->n) ? at : -1;
}

/* ---- a run's task ------------------------------------------------------ */

/* A template stored before trace context had fields of its own may carry it
 * as headers, which a task may no longer set: taken as the fields (when
 * valid and none is given), never left to stop every run. */
static void schedule_trace_from_header(cJSON *t)
{
    cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "header");
    static const char *const names[] = {"traceparent", "tracestate"};
    for (size_t i = 0; i < 2 && cJSON_IsObject(h); i++) {
        for (cJSON *e = h->child, *next; e; e = next) {
            next = e->next;
            if (strcasecmp(e->string, names[i]) != 0) continue;
            cJSON *v = cJSON_DetachItemViaPointer(h, e);
            char tp[TRACE_PARENT_LEN + 1], why[160];
            int ok = cJSON_IsString(v) &&
                     (i ? trace_state_check(v->valuestring, why, sizeof(why)) == 0
                        : trace_parent_parse(v->valuestring, tp, why, sizeof(why)) == 0);
            if (ok && !cJSON_GetObjectItemCaseSensitive(t, names[i]) &&
                (i == 0 || cJSON_GetObjectItemCaseSensitive(t, "traceparent")))
                cJSON_AddItemToObject(t, names[i], v);
            else
                cJSON_Delete(v);
        }
    }
}

int schedule_run_task(const schedule_def *d, const char *id, int64_t v, int64_t at,
                      int64_t home_now_ms, task_input *out, char *err, size_t errlen)
{
    char rkey[TASK_KEY_MAX + 24], why[400];
    cJSON *t = cJSON_Duplicate(d->task, 1);
    schedule_trace_from_header(t);
    snprintf(rkey, sizeof(rkey), TASK_RUN_PREFIX "%s:%lld", d->key, (long long)(v % 10000000));
    cJSON_AddStringToObject(t, "key", rkey);
    cJSON_AddNumberToObject(t, "execute_at", (double)at);
    /* on the claim's clock: a run behind it is due at once */
    int rc = task_input_parse_made(t, home_now_ms, out, why, sizeof(why));
    /* trace context of its template's: a field, or a header taken as one */
    int traced = cJSON_GetObjectItemCaseSensitive(t, "traceparent") != NULL;
    cJSON_Delete(t);
    if (rc != 0) {
        snprintf(err, errlen, "task.%s", why);
        return -1;
    }
    out->home_now_ms = home_now_ms;
    /* a run with no trace context of its template's starts its own: one
     * trace per run, the same however often the run is made */
    if (!traced) {
        char seed[TASK_KEY_MAX + 64], tp[TRACE_PARENT_LEN + 1];
        snprintf(seed, sizeof(seed), "%s/%s/%lld", id, rkey, (long long)at);
        trace_new(seed, tp);
        task_input_add_member(out, "traceparent", tp);
    }
    /* schedule_id goes in the spec (GET shows it) */
    return task_input_add_member(out, "schedule_id", id);
}

cJSON *schedule_time_json(const schedule_def *d, int64_t at)
{
    char buf[TZ_RFC3339_MAX], why[256];
    const tz *z = d->zone ? d->zone : tz_get("UTC", why);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "at", (double)at);
    if (z) tz_rfc3339(z, at, buf);
    else snprintf(buf, sizeof(buf), "?");
    cJSON_AddStringToObject(o, "time", buf);
    return o;
}
