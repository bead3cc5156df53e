/* sched.c -- see sched.h. */
#include "sched.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "util.h"
#include "wheel.h"

#define BACKLOG_GATHER_MS 20

typedef struct bucket_scan {
    sched *sc;
    int b;
    int active;          /* a pass is running */
    int again;           /* kicked during the pass: run another */
    int64_t wm;          /* watermark read at the start of the pass */
    int64_t minute;      /* slice being claimed */
    int64_t end_minute;
    int64_t first_open;  /* first minute the watermark may not pass, -1 none */
    int limit;           /* the LIMIT of the claim in flight */
    int failures;        /* claims failed in a row in this pass */
} bucket_scan;

/* Slices failing in a row before a pass gives up until the next tick: the
 * store as a whole is failing, not one slice. */
#define SCAN_FAILURES_MAX 4

struct sched {
    struct event_base *base;
    store *s;
    const config *cfg;
    sched_submit_fn *submit;  /* hands a fired job to the callers */
    void *submit_priv;
    sched_failed_fn *failed;  /* told of each task recorded as failed */
    void *failed_priv;
    wheel *w;
    struct event *tick_ev;
    struct event *wheel_ev;
    bucket_scan *bk;
    int nb;
    int held;            /* jobs claimed and not yet settled */
    int calling;         /* of those, in the dispatch pool */
    int pending;         /* store calls in flight, and attempts being recorded */
    int starved;         /* a pass stopped for lack of room */
    int stopping;
    job *waiting;        /* jobs on the wheel or being fetched */
    int64_t claimed, fired, settled;
    int64_t backlog_until_ms; /* overdue claims gather until then */
    store_attempt *settle;    /* outcomes gathered for the store */
    int nsettle, settle_cap;
    struct event *flush_ev;   /* hands them over */
    log_limit warn;
};

/* ---- bookkeeping ------------------------------------------------------- */

static void sched_hold(sched *sc, job *j)
{
    j->wprev = NULL;
    j->wnext = sc->waiting;
    if (sc->waiting) sc->waiting->wprev = j;
    sc->waiting = j;
}

static void sched_unhold(sched *sc, job *j)
{
    if (j->wprev) j->wprev->wnext = j->wnext;
    else if (sc->waiting == j) sc->waiting = j->wnext;
    if (j->wnext) j->wnext->wprev = j->wprev;
    j->wnext = j->wprev = NULL;
}

static void sched_job_free(job *j)
{
    free(j->spec);
    free(j->answer);
    free(j);
}

static int sched_room(const sched *sc)
{
    int room = (int)sc->cfg->max_inflight - sc->held;
    return room < 0 ? 0 : room;
}

static void sched_job_gone(sched *sc, job *j)
{
    sc->held--;
    sched_job_free(j);
    if (sc->starved && !sc->stopping && sched_room(sc) >= (int)sc->cfg->batch / 2 + 1) {
        sc->starved = 0;
        for (int b = 0; b < sc->nb; b++) sched_kick(sc, b);
    }
}

/* ---- the fire wheel ---------------------------------------------------- */

static void sched_wheel_arm(sched *sc)
{
    uint64_t next = wheel_next_due(sc->w);
    if (next == WHEEL_NEVER) {
        event_del(sc->wheel_ev);
        return;
    }
    int64_t now = store_now_ms(sc->s);
    int64_t delay = (int64_t)next - now;
    if (delay < sc->backlog_until_ms - now) delay = sc->backlog_until_ms - now;
    if (delay < 0) delay = 0;
    struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
    event_add(sc->wheel_ev, &tv);
}

static void sched_fire(wheel *w, wheel_timer *t, void *arg)
{
    sched *sc = arg;
    job *j = container_of(t, job, timer);
    (void)w;
    sched_unhold(sc, j);
    sc->calling++;
    sc->fired++;
    sc->submit(j, sc->submit_priv);
}

static void sched_wheel_cb(evutil_socket_t fd, short what, void *arg)
{
    sched *sc = arg;
    (void)fd, (void)what;
    wheel_advance(sc->w, (uint64_t)store_now_ms(sc->s));
    sched_wheel_arm(sc);
}

static void sched_wait(sched *sc, job *j)
{
    int64_t now = store_now_ms(sc->s);
    /* An overdue task fires on the next advance, oldest first. A backlog
     * (catching up after downtime) comes in one claim reply per bucket and
     * slice, a round trip apart: the wheel waits BACKLOG_GATHER_MS for the
     * other buckets' replies so that their tasks too go out oldest first.
     * Tasks due now are not held: only those later than the lookahead. */
    if (j->due_ms + sc->cfg->lookahead_ms < now && sc->backlog_until_ms < now)
        sc->backlog_until_ms = now + BACKLOG_GATHER_MS;
    wheel_add(sc->w, &j->timer, NULL, (uint64_t)(j->due_ms > 0 ? j->due_ms : 0), 0, 1);
    sched_wheel_arm(sc);
}

/* ---- recording attempts ------------------------------------------------ */

/* Outcomes are gathered for SETTLE_GATHER_MS and handed to the store in one
 * call (which sends one script call per home slice): under a burst that is
 * tens of outcomes a call rather than a few. The outcome is recorded a few ms
 * later; the lease (lease_margin_ms past the attempt's timeout) covers it. */
#define SETTLE_GATHER_MS 5

static void sched_settled_cb(void *owner, const char *err, void *priv)
{
    sched *sc = priv;
    job *j = owner;
    (void)err; /* the store logged it; the lease brings the task back */
    sc->pending--;
    /* told once the store holds the end: a record that failed brings the
     * task back by its lease, to end (and be told) later */
    if (!err && j->ended_failed && sc->failed) sc->failed(j, sc->failed_priv);
    /* a retry due within the lookahead is claimed now, not at the next tick */
    if (!err && j->retry_due_ms && j->retry_due_ms < store_now_ms(sc->s) + sc->cfg->lookahead_ms)
        sched_kick(sc, task_slice_bucket(j->id));
    sc->settled++;
    sched_job_gone(sc, j);
}

static void sched_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    sched *sc = arg;
    int n = sc->nsettle;
    (void)fd, (void)what;
    sc->nsettle = 0;
    sc->pending += n;
    if (n) store_settle(sc->s, sc->settle, n, sched_settled_cb, sc);
}

static void sched_record(sched *sc, job *j, store_outcome o, int64_t due_ms)
{
    if (sc->nsettle == sc->settle_cap) {
        sc->settle_cap = sc->settle_cap ? sc->settle_cap * 2 : 64;
        sc->settle = xrealloc(sc->settle, sizeof(*sc->settle) * (size_t)sc->settle_cap);
    }
    j->retry_due_ms = o == OUT_RETRY ? due_ms : 0;
    j->ended_failed = o == OUT_FAIL;
    sc->settle[sc->nsettle++] = (store_attempt){
        .id = j->id, .src = j->src, .outcome = o, .attempt = j->attempt,
        .status_code = j->status_code, .err = j->err, .due_ms = due_ms,
        .timeout_ms = j->timeout_ms, .owner = j, .sent_at_ms = j->sent_at_ms,
        .took_ms = j->took_ms, .answer = j->answer, .answer_len = j->answer_len};
    if (!event_pending(sc->flush_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {0, SETTLE_GATHER_MS * 1000};
        event_add(sc->flush_ev, &tv);
    }
}

void sched_set_failed(sched *sc, sched_failed_fn *fn, void *priv)
{
    sc->failed = fn;
    sc->failed_priv = priv;
}

/* The attempt's outcome label and times, into the metrics. */
static void sched_count(const job *j)
{
    metrics_outcome o = j->ok ? MO_2XX
                      : j->permanent ? MO_DENIED
                      : j->status_code ? MO_HTTP_ERROR
                      : j->timed_out ? MO_TIMEOUT : MO_CONNECT_ERROR;
    metrics.attempts[o]++;
    if (j->sent_at_ms > 0) {
        metrics_observe(&metrics.lateness, (double)(j->sent_at_ms - j->due_ms) / 1000.0);
        metrics_observe(&metrics.duration, (double)j->took_ms / 1000.0);
    }
}

/* An attempt finished: record it. A failed attempt is logged at debug
 * level; a task that ends failed, once, at warning level. */
void sched_on_done(sched *sc, job *j)
{
    sc->calling--;
    if (j->aborted) {
        /* stopped mid-call: the lease stays, so it runs again after expiry */
        sched_job_gone(sc, j);
        return;
    }
    if (j->uncounted) {
        /* tickd's own failure (out of descriptors...): the receiver was never
         * called, so this was no attempt; the count stays, and it goes again
         * in a second or two */
        int64_t delay_ms = UNCOUNTED_RETRY_MS + random() % UNCOUNTED_RETRY_MS;
        j->attempt--;
        metrics.deferred++;
        log_warn_limited(&sc->warn, store_now_ms(sc->s),
                         "task %s: callback not made (%s); trying again in %lld ms without "
                         "counting an attempt", j->id, j->err, (long long)delay_ms);
        sched_record(sc, j, OUT_RETRY, store_now_ms(sc->s) + delay_ms);
        return;
    }
    sched_count(j);
    if (j->ok || j->permanent || j->attempt >= j->max_attempts) {
        log_debug("task %s attempt %d: %s", j->id, j->attempt, j->ok ? "ok" : j->err);
        if (!j->ok)
            log_warn("task %s failed after %d attempt%s: %s", j->id, j->attempt,
                     j->attempt == 1 ? "" : "s", j->err);
        if (j->ok) metrics.succeeded++;
        else metrics.failed++;
        sched_record(sc, j, j->ok ? OUT_OK : OUT_FAIL, 0);
    } else {
        double jitter = (double)(random() % 1000) / 1000.0;
        int64_t next = store_now_ms(sc->s) + task_backoff_ms(j->backoff_ms, j->attempt, jitter);
        log_debug("task %s attempt %d: %s; retry at %lld", j->id, j->attempt, j->err,
                  (long long)next);
        metrics.retries++;
        sched_record(sc, j, OUT_RETRY, next);
    }
}

/* Give an unfired claim back: due again where it was. */
static void sched_release(sched *sc, job *j)
{
    sched_record(sc, j, OUT_RELEASE, j->due_ms);
}

/* ---- claiming ---------------------------------------------------------- */

static void scan_claim(bucket_scan *bs);
static void scan_finish(bucket_scan *bs);

static void sched_take(sched *sc, const char *slice, store_lease *l)
{
    job *j = xcalloc(1, sizeof(*j));
    snprintf(j->id, sizeof(j->id), "%s", l->id);
    snprintf(j->src, sizeof(j->src), "%s", slice);
    j->due_ms = l->due_ms;
    j->attempt = l->attempt;
    j->spec = l->spec;
    wheel_timer_init(&j->timer, sched_fire, sc);
    sc->held++;
    sc->claimed++;
    if (sc->stopping) {
        sched_release(sc, j);
        return;
    }
    sched_hold(sc, j);
    sched_wait(sc, j);
}

/* The claim of one slice answered. A slice whose claim fails holds back its
 * bucket's watermark, and the scan goes on with the next slice: one slice
 * that cannot be claimed (its node down, a write refused) does not stall the
 * rest of its bucket. */
static void scan_claim_cb(const store_claim *res, void *priv)
{
    bucket_scan *bs = priv;
    sched *sc = bs->sc;
    char slice[TASK_SLICE_MAX];
    sc->pending--;
    int passable = 0;
    if (res->err) {
        log_warn_limited(&sc->warn, store_now_ms(sc->s), "claim bucket %d minute %lld: %s",
                         bs->b, (long long)bs->minute, res->err);
        if (++bs->failures >= SCAN_FAILURES_MAX) {
            /* the store as a whole is failing: wait for the next tick */
            if (bs->first_open < 0) bs->first_open = bs->minute;
            scan_finish(bs);
            return;
        }
    } else {
        bs->failures = 0;
        task_slice_name(bs->minute * 60000, bs->b, slice);
        for (int i = 0; i < res->n; i++) sched_take(sc, slice, &res->leases[i]);
        if (res->taken >= bs->limit && !sc->stopping) {
            scan_claim(bs); /* the slice had more than one batch */
            return;
        }
        passable = res->due_left == 0 && res->run_left == 0 &&
                   (bs->minute + 1) * 60000 + sc->cfg->slice_grace_ms <= store_now_ms(sc->s);
    }
    if (!passable && bs->first_open < 0) bs->first_open = bs->minute;
    if (bs->minute >= bs->end_minute || sc->stopping) {
        scan_finish(bs);
        return;
    }
    bs->minute++;
    scan_claim(bs);
}

static void scan_claim(bucket_scan *bs)
{
    sched *sc = bs->sc;
    int room = sched_room(sc);
    if (room == 0 || sc->stopping) {
        if (room == 0) sc->starved = 1;
        if (bs->first_open < 0) bs->first_open = bs->minute;
        scan_finish(bs);
        return;
    }
    bs->limit = room < sc->cfg->batch ? room : (int)sc->cfg->batch;
    sc->pending++;
    store_claim_slice(sc->s, bs->b, bs->minute, bs->limit, scan_claim_cb, bs);
}

static void scan_start(bucket_scan *bs);

static void scan_wm_cb(int64_t wm, const char *err, void *priv)
{
    bucket_scan *bs = priv;
    (void)wm;
    bs->sc->pending--;
    if (err) log_warn_limited(&bs->sc->warn, store_now_ms(bs->sc->s), "watermark bucket %d: %s",
                              bs->b, err);
    bs->active = 0;
    if (bs->again && !bs->sc->stopping) scan_start(bs);
}

static void scan_finish(bucket_scan *bs)
{
    sched *sc = bs->sc;
    int64_t to = bs->first_open >= 0 ? bs->first_open : bs->end_minute + 1;
    if (to > bs->wm) {
        sc->pending++;
        store_wm_advance(sc->s, bs->b, bs->wm, to, scan_wm_cb, bs);
        return;
    }
    bs->active = 0;
    if (bs->again && !sc->stopping) scan_start(bs);
}

static void scan_get_cb(int64_t wm, const char *err, void *priv)
{
    bucket_scan *bs = priv;
    sched *sc = bs->sc;
    sc->pending--;
    if (err) {
        log_warn_limited(&sc->warn, store_now_ms(sc->s), "watermark bucket %d: %s", bs->b, err);
        bs->active = 0;
        return;
    }
    int64_t now = store_now_ms(sc->s);
    bs->wm = wm;
    bs->minute = wm;
    bs->end_minute = (now + sc->cfg->lookahead_ms) / 60000;
    bs->first_open = -1;
    bs->failures = 0;
    if (bs->minute > bs->end_minute) bs->minute = bs->end_minute;
    scan_claim(bs);
}

static void scan_start(bucket_scan *bs)
{
    bs->active = 1;
    bs->again = 0;
    bs->sc->pending++;
    store_wm_get(bs->sc->s, bs->b, scan_get_cb, bs);
}

void sched_kick(sched *sc, int bucket)
{
    bucket_scan *bs = &sc->bk[bucket];
    if (sc->stopping) return;
    if (bs->active) bs->again = 1;
    else scan_start(bs);
}

/* A fresh task due within the lookahead: claim it now rather than at the
 * next tick. */
static void sched_added_cb(int bucket, int64_t due_ms, void *priv)
{
    sched *sc = priv;
    if (due_ms < store_now_ms(sc->s) + sc->cfg->lookahead_ms) sched_kick(sc, bucket);
}

/* The next tick in tick_ms +-25 %: replicas drift apart in phase, so each
 * claims its share of every minute instead of the first to tick taking all.
 * lookahead_ms >= 1.25 tick_ms keeps tasks claimed before they are due. */
static void sched_tick_arm(sched *sc)
{
    int64_t ms = sc->cfg->tick_ms * 3 / 4 + random() % (sc->cfg->tick_ms / 2 + 1);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(sc->tick_ev, &tv);
}

static void sched_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    sched *sc = arg;
    (void)fd, (void)what;
    if (!sc->stopping) sched_tick_arm(sc);
    store_sync_clock(sc->s);
    for (int b = 0; b < sc->nb; b++) sched_kick(sc, b);
}

/* ---- life -------------------------------------------------------------- */

sched *sched_create(struct event_base *base, store *s, const config *cfg, char *err,
                    size_t errlen)
{
    sched *sc = xcalloc(1, sizeof(*sc));
    sc->base = base;
    sc->s = s;
    sc->cfg = cfg;
    sc->nb = (int)cfg->buckets;
    sc->w = wheel_create(1, (uint64_t)store_now_ms(s));
    sc->tick_ev = evtimer_new(base, sched_tick_cb, sc);
    sc->wheel_ev = evtimer_new(base, sched_wheel_cb, sc);
    /* a due task is never kept waiting by other ready work (main.c sets up
     * two priorities; where the base has one, this fails harmlessly) */
    if (sc->wheel_ev) event_priority_set(sc->wheel_ev, 0);
    sc->flush_ev = evtimer_new(base, sched_flush_cb, sc);
    sc->bk = xcalloc((size_t)sc->nb, sizeof(bucket_scan));
    if (!sc->w || !sc->tick_ev || !sc->wheel_ev || !sc->flush_ev) {
        snprintf(err, errlen, "scheduler: out of memory");
        sched_free(sc);
        return NULL;
    }
    for (int b = 0; b < sc->nb; b++) {
        sc->bk[b].sc = sc;
        sc->bk[b].b = b;
    }
    /* A new keyspace starts scanning a minute back; an existing one keeps
     * its watermark, however old: that is the catch-up. */
    if (store_wm_init(s, store_now_ms(s) / 60000 - 1, err, errlen) != 0) {
        sched_free(sc);
        return NULL;
    }
    store_listen(s, sched_added_cb, sc);
    return sc;
}

void sched_set_submit(sched *sc, sched_submit_fn *fn, void *priv)
{
    sc->submit = fn;
    sc->submit_priv = priv;
}

void sched_poll(sched *sc)
{
    sched_wheel_cb(-1, 0, sc);
}

void sched_start(sched *sc)
{
    sched_tick_cb(-1, 0, sc);
}

void sched_stop(sched *sc)
{
    sc->stopping = 1;
    event_del(sc->tick_ev);
    event_del(sc->wheel_ev);
    /* hand back every claim still waiting for its ms */
    for (job *j = sc->waiting, *n; j; j = n) {
        n = j->wnext;
        wheel_cancel(sc->w, &j->timer);
        sched_unhold(sc, j);
        sched_release(sc, j);
    }
    log_info("scheduler stopped: %d claimed task%s handed back or settling, %d calling",
             sc->held - sc->calling, sc->held - sc->calling == 1 ? "" : "s", sc->calling);
}

int sched_calling(const sched *sc) { return sc->calling; }
int sched_held(const sched *sc) { return sc->held; }

void sched_stats(const sched *sc, cJSON *obj)
{
    cJSON_AddNumberToObject(obj, "claimed", (double)sc->claimed);
    cJSON_AddNumberToObject(obj, "fired", (double)sc->fired);
    cJSON_AddNumberToObject(obj, "settled", (double)sc->settled);
    cJSON_AddNumberToObject(obj, "held", sc->held);
    cJSON_AddNumberToObject(obj, "calling", sc->calling);
    store_stats(sc->s, obj);
}

int sched_idle(const sched *sc) { return sc->held == 0 && sc->pending == 0; }

void sched_free(sched *sc)
{
    if (!sc) return;
    for (job *j = sc->waiting, *n; j; j = n) {
        n = j->wnext;
        sched_job_free(j);
    }
    if (sc->w) wheel_free(sc->w);
    if (sc->tick_ev) event_free(sc->tick_ev);
    if (sc->wheel_ev) event_free(sc->wheel_ev);
    if (sc->flush_ev) event_free(sc->flush_ev);
    free(sc->settle);
    free(sc->bk);
    free(sc);
}
