/* schedule_runner.c -- see schedule_runner.h. */
#include "core/schedule_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/log.h"
#include "base/metrics.h"
#include "model/schedule.h"
#include "base/util.h"

#define CLAIM_LIMIT 64

struct runner {
    struct event_base *base;
    store *s;
    const config *cfg;
    struct event *tick;
    int stopping;
    int pending;               /* store calls in flight */
    char *claiming;            /* per bucket: a claim is in flight */
    /* counters */
    uint64_t passes, runs_made, runs_skipped, add_failures, lost_leases;
    log_limit warn;
};

/* One schedule's pass. */
typedef struct pass {
    runner *r;
    char id[SCHED_ID_MAX];
    schedule_def def;
    store_sch_pass adv;
    schedule_plan plan;
    int waiting;               /* adds still to answer */
    int *ok;                   /* per run: stored */
    char (*ids)[TASK_ID_MAX];  /* per run: its task id */
    const char **fut;
} pass;

int64_t runner_lead_ms(const config *cfg)
{
    return cfg->lookahead_ms + 2 * cfg->tick_ms;
}

int64_t runner_late_ms(const config *cfg)
{
    return runner_lead_ms(cfg) + SCHED_LEASE_MS;
}

static int64_t state_num(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

static void pass_free(pass *p)
{
    schedule_def_free(&p->def);
    free(p->ok);
    free(p->ids);
    free(p->fut);
    free(p);
}

static void runner_cancel_cb(store_status st, const char *detail, void *priv)
{
    runner *r = priv;
    (void)detail;
    if (st == ST_OK) metrics.cancelled++;
    r->pending--;
}

/* The pass is recorded: runs made ahead under a definition that changed
 * since (PUT), or of a schedule paused or deleted meanwhile, are cancelled. */
static void runner_advanced_cb(store_status st, const store_schedule *sc, const char *err,
                               void *priv)
{
    pass *p = priv;
    runner *r = p->r;
    r->pending--;
    /* a PUT, pause or resume since the claim changed the version */
    int stale = st == ST_NOTFOUND;
    if (st == ST_OK && sc && sc->state) {
        cJSON *o = cJSON_Parse(sc->state);
        stale = state_num(o, "v", -1) != p->adv.v;
        cJSON_Delete(o);
    } else if (st == ST_CONFLICT) {
        r->lost_leases++;
    } else if (st == ST_UNAVAILABLE) {
        log_warn_limited(&r->warn, util_mono_ms(), "schedule %s: pass not recorded (%s); its lease ends "
                    "and the runs are made again, with the same ids", p->id, err ? err : "?");
    }
    for (int i = 0; stale && i < p->adv.nfut; i++) {
        r->pending++;
        store_cancel(r->s, p->adv.fut[i], runner_cancel_cb, r);
    }
    pass_free(p);
}

static void runner_record(pass *p)
{
    runner *r = p->r;
    int64_t now = store_now_ms(r->s);
    int made = 0;
    while (made < p->plan.n && p->ok[made]) made++;
    p->adv.made = made;
    p->adv.next = made < p->plan.n ? p->plan.at[made] : p->plan.next;
    if (made < p->plan.n) r->add_failures++;
    if (made > 0) {
        p->adv.last_at = p->plan.at[made - 1];
        p->adv.last_id = p->ids[made - 1];
    }
    p->fut = xcalloc((size_t)(made ? made : 1), sizeof(*p->fut));
    for (int i = 0; i < made; i++)
        if (p->plan.at[i] > now) p->fut[p->adv.nfut++] = p->ids[i];
    p->adv.fut = p->fut;
    r->runs_made += (uint64_t)made;
    r->runs_skipped += (uint64_t)p->adv.skipped;
    r->pending++;
    store_sch_advance(r->s, p->id, &p->adv, runner_advanced_cb, p);
}

typedef struct run_add {
    pass *p;
    int i;
    task_input t;
} run_add;

static void runner_add_cb(store_status st, const char *id, const char *state, const char *err,
                          void *priv)
{
    run_add *a = priv;
    pass *p = a->p;
    (void)state;
    p->r->pending--;
    if (st == ST_OK) {
        metrics.tasks_created++;
        metrics.schedule_runs++;
    }
    /* stored but not confirmed by the replicas: stored */
    if (id && (st == ST_OK || st == ST_EXISTS || st == ST_UNAVAILABLE)) {
        p->ok[a->i] = 1;
        util_copy(p->ids[a->i], TASK_ID_MAX, id);
    } else {
        log_warn_limited(&p->r->warn, util_mono_ms(), "schedule %s: run at %lld not made (%s); it is "
                    "made again on the next pass", p->id, (long long)p->plan.at[a->i],
                    err ? err : "unavailable");
    }
    task_input_free(&a->t);
    free(a);
    if (--p->waiting == 0) runner_record(p);
}

/* Plan and make the runs of one claimed schedule. */
static void runner_pass(runner *r, const store_schedule *sc)
{
    char err[400];
    pass *p = xcalloc(1, sizeof(*p));
    p->r = r;
    util_copy(p->id, sizeof(p->id), sc->id);
    cJSON *st = cJSON_Parse(sc->state);
    int64_t next = state_num(st, "next", -1), runs = state_num(st, "runs", 0);
    p->adv.ct = state_num(st, "ct", 0);
    p->adv.v = state_num(st, "v", 0);
    p->adv.next = next;
    cJSON_Delete(st);
    r->passes++;
    if (schedule_def_load(sc->def, &p->def, err, sizeof(err)) != 0) {
        /* not a definition this tickd wrote: leave it to its lease */
        log_warn_limited(&r->warn, util_mono_ms(), "schedule %s: %s", p->id, err);
        pass_free(p);
        return;
    }
    schedule_plan_runs(&p->def, next, runs, store_now_ms(r->s), runner_lead_ms(r->cfg),
                       runner_late_ms(r->cfg), &p->plan);
    p->adv.skipped = p->plan.skipped;
    p->ok = xcalloc((size_t)p->plan.n + 1, sizeof(*p->ok));
    p->ids = xcalloc((size_t)p->plan.n + 1, sizeof(*p->ids));
    run_add **adds = xcalloc((size_t)p->plan.n + 1, sizeof(*adds));
    for (int i = 0; i < p->plan.n; i++) {
        run_add *a = xcalloc(1, sizeof(*a));
        a->p = p;
        a->i = i;
        if (schedule_run_task(&p->def, p->id, p->adv.v, p->plan.at[i], p->adv.ct, &a->t, err,
                              sizeof(err)) != 0) {
            /* the template no longer passes (callback policy changed): the
             * runs up to here are made, the schedule holds at this one */
            log_warn_limited(&r->warn, util_mono_ms(), "schedule %s: run at %lld: %s", p->id,
                        (long long)p->plan.at[i], err);
            free(a);
            p->plan.n = i;
            break;
        }
        adds[i] = a;
        p->waiting++;
    }
    /* no answer comes before add() returns: waiting is final here */
    int n = p->plan.n;
    for (int i = 0; i < n; i++) {
        r->pending++;
        store_add(r->s, &adds[i]->t, runner_add_cb, adds[i]);
    }
    free(adds);
    if (n == 0) runner_record(p);
}

static void runner_claim(runner *r, int bucket);

typedef struct claim_ctx {
    runner *r;
    int bucket;
} claim_ctx;

static void runner_claimed_cb(const store_schedule *items, int n, const char *err, void *priv)
{
    claim_ctx *c = priv;
    runner *r = c->r;
    int bucket = c->bucket;
    free(c);
    r->pending--;
    r->claiming[bucket] = 0;
    if (err) {
        log_warn_limited(&r->warn, util_mono_ms(), "schedules of bucket %d: claim failed: %s", bucket, err);
        return;
    }
    for (int i = 0; i < n; i++) runner_pass(r, &items[i]);
    /* a full claim: there may be more due now */
    if (n == CLAIM_LIMIT && !r->stopping) runner_claim(r, bucket);
}

static void runner_claim(runner *r, int bucket)
{
    if (r->claiming[bucket]) return;
    claim_ctx *c = xcalloc(1, sizeof(*c));
    c->r = r;
    c->bucket = bucket;
    r->claiming[bucket] = 1;
    r->pending++;
    store_sch_claim(r->s, bucket, store_now_ms(r->s) + runner_lead_ms(r->cfg), CLAIM_LIMIT,
                    SCHED_LEASE_MS, runner_claimed_cb, c);
}

static void runner_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    runner *r = arg;
    (void)fd, (void)what;
    if (r->stopping) return;
    for (int b = 0; b < (int)r->cfg->buckets; b++) runner_claim(r, b);
}

runner *runner_create(struct event_base *base, store *s, const config *cfg)
{
    runner *r = xcalloc(1, sizeof(*r));
    r->base = base;
    r->s = s;
    r->cfg = cfg;
    r->claiming = xcalloc((size_t)cfg->buckets, 1);
    r->tick = event_new(base, -1, EV_PERSIST, runner_tick_cb, r);
    log_assert(r->tick);
    return r;
}

void runner_start(runner *r)
{
    struct timeval tv = {(time_t)(r->cfg->tick_ms / 1000), (suseconds_t)(r->cfg->tick_ms % 1000) * 1000};
    event_add(r->tick, &tv);
    event_active(r->tick, EV_TIMEOUT, 0);
}

void runner_kick(runner *r, int bucket)
{
    if (!r->stopping && bucket >= 0 && bucket < (int)r->cfg->buckets) runner_claim(r, bucket);
}

void runner_stop(runner *r)
{
    r->stopping = 1;
    event_del(r->tick);
}

int runner_idle(const runner *r) { return r->pending == 0; }

void runner_stats(const runner *r, cJSON *obj)
{
    cJSON *o = cJSON_AddObjectToObject(obj, "schedules");
    cJSON_AddNumberToObject(o, "passes", (double)r->passes);
    cJSON_AddNumberToObject(o, "runs_made", (double)r->runs_made);
    cJSON_AddNumberToObject(o, "runs_skipped", (double)r->runs_skipped);
    cJSON_AddNumberToObject(o, "runs_not_made", (double)r->add_failures);
    cJSON_AddNumberToObject(o, "lost_leases", (double)r->lost_leases);
}

void runner_free(runner *r)
{
    if (!r) return;
    event_free(r->tick);
    free(r->claiming);
    free(r);
}
