/* scheduler.c -- see scheduler.h. */
#include "core/scheduler.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/flow.h"
#include "base/log.h"
#include "base/metrics.h"
#include "core/history.h"
#include "base/util.h"
#include "base/wheel.h"

#define BACKLOG_GATHER_MS 20
#define JOB_SPARE_KEEP 512  /* ended jobs kept however long unused (sched_spare_trim) */
#define JOB_SPARE_SCANS 10  /* full scans a kept job may go unused before it is let go */

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
    int64_t sent_ms;     /* when it was sent (the store's clock) */
    int failures;        /* claims failed in a row in this pass */
    int starved;         /* the pass stopped for lack of room, at minute */
    int share;           /* the next claim asks for no more (0: no cap) */
} bucket_scan;

/* Flow control (flow.h): a task a limit may apply to asks the store before
 * its callback goes (FLOW_ASKING); let go, it may wait on the wheel for its
 * time (FLOW_LET_GO), and its end frees its slots. */
enum { FLOW_ASKING = 1, FLOW_LET_GO = 2 };
#define FLOW_PUMP_MIN 64          /* tasks a pump may let go, whatever the room */
/* tasks or ended callbacks in one flow.lua call: a burst of them (up to
 * max_inflight) goes as several calls, so none holds Redis long */
#define FLOW_CALL_MAX 128

/* What flow calls carry past the job's life: a task to put in its queue's
 * waiting list, or a callback that ended. */
typedef struct flow_rec {
    char id[TASK_ID_MAX], queue[TASK_QUEUE_MAX], dest[FLOW_DEST_MAX];
    char slice[TASK_SLICE_MAX], reason[FLOW_REASON_MAX];
    int64_t due_ms, timeout_ms, until_ms;
    int failed, back;
} flow_rec;

typedef struct flow_batch {
    flow_rec *r;
    int n, cap;
} flow_batch;

/* Slices failing in a row before a pass gives up until the next tick: the
 * store as a whole is failing, not one slice. */
#define SCAN_FAILURES_MAX 4

/* The rate callbacks fire at is measured over windows of at least this, and
 * claims look at least this far ahead whatever the rate. */
#define RATE_WINDOW_MS 250
#define REACH_MIN_MS 40

struct sched {
    struct event_base *base;
    store *s;
    const config *cfg;
    sched_submit_fn *submit;  /* hands a fired job to the callers */
    void *submit_priv;
    sched_warm_fn *warm;      /* told of each claimed batch (NULL: not) */
    void *warm_priv;
    callback **warm_cbs;      /* the batch's callbacks for it */
    int warm_cap;
    sched_failed_fn *failed;  /* told of each task recorded as failed */
    void *failed_priv;
    wheel *w;
    struct event *tick_ev;
    struct event *wheel_ev;   /* reads wheel_fd */
    int wheel_fd;             /* the wheel's timerfd (sched_wheel_arm) */
    int64_t wheel_due_us;     /* the store's time it is set for; 0: none, -1: unknown */
    bucket_scan *bk;
    int nb;
    int held;            /* jobs claimed and not yet settled */
    int claiming;        /* room the claims in flight may fill (their limits) */
    int recording;       /* of held, those whose outcome the store is recording */
    int scans;           /* buckets whose pass is running */
    int calling;         /* of those, in the dispatch pool */
    int pending;         /* store calls in flight, and attempts being recorded */
    int starved;         /* a pass stopped for lack of room */
    int kick_from;       /* the bucket sched_kick_all starts with: it turns */
    int64_t reach_ms;    /* claims take tasks due before now + this */
    int64_t period_ms;   /* between two ticks (+-25 %) */
    int64_t rate_from_ms, rate_from_fired; /* the window being measured */
    double rate_per_ms;  /* callbacks fired a ms in the last window */
    double short_rate;   /* at least this many a ms are due: a pass ran out of room
                            while jobs claimed well ahead held most of their half
                            (0: none in the last window) */
    int short_seen;      /* such a pass in this window */
    int nfar;            /* held jobs claimed due later than half the reach ahead */
    int64_t full_ms;     /* the last tick that scanned from the watermarks */
    int64_t tick_at_ms;  /* when the tick armed comes */
    int stopping;
    job *waiting;        /* jobs on the wheel or being fetched */
    job *spare;          /* ended jobs kept for reuse, linked by next */
    int nspare;
    int spare_low;       /* the fewest kept since the last trim (sched_spare_trim) */
    int spare_scans;     /* full scans since then */
    int64_t claimed, fired, settled;
    int64_t backlog_until_ms; /* overdue claims gather until then */
    store_attempt *settle;    /* outcomes gathered for the store */
    int nsettle, settle_cap;
    struct event *flush_ev;   /* hands them over */
    log_limit warn;
    /* flow control (NULL fc: the store has none) */
    flow_cache *fc;
    struct event *snap_ev;    /* reads the settings again */
    struct event *flow_ev;    /* sends what this loop turn gathered */
    int snap_busy, pump_wanted;
    int64_t flow_version;     /* the store's last change this copy has */
    int64_t flow_loads;       /* times the settings were read (/v1/stats) */
    job *asking, **asking_tail; /* jobs to ask about, linked by next */
    int nasking;
    flow_batch enq, ends;
};

static void sched_flow_end(sched *sc, job *j, int64_t until_ms, int failed);
static void sched_record(sched *sc, job *j, store_outcome o, int64_t due_ms);

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
    if (j->far) {
        j->far = 0;
        sc->nfar--;
    }
}

/* What a job owns (its spec, an answer's bytes). */
static void sched_job_clear(job *j)
{
    task_spec_free(j->cb.spec);
    free(j->cb.answer);
}

static void sched_job_free(job *j)
{
    sched_job_clear(j);
    free(j);
}

/* Room for more claimed jobs: max_inflight of them wait for their time or
 * call back, and as many again may wait while the store records their
 * outcomes. A job's place frees when its callback ends, not a store round
 * trip later: in a backlog, where the store is busy with claims and
 * outcomes alike, the callbacks would otherwise run dry while the outcomes
 * of finished ones wait their turn. A claim in flight holds its limit's
 * worth: the buckets' claims of one kick go out together, and each would see
 * the whole room otherwise, taking up to buckets x batch between them. */
static int sched_room(const sched *sc)
{
    int max = (int)sc->cfg->max_inflight;
    int live = max - (sc->held - sc->recording) - sc->claiming;
    int all = 2 * max - sc->held - sc->claiming;
    int room = live < all ? live : all;
    return room < 0 ? 0 : room;
}

static void scan_resume(sched *sc);

/* The part of the room kept for tasks due soon (sched_near): half. Claims
 * of tasks due later stop short of it, so that tasks claimed early (a
 * second ahead, say) never take the places of tasks due now, which no claim
 * could take back. */
static int sched_reserve(const sched *sc)
{
    return (int)sc->cfg->max_inflight / 2;
}

/* The least a claim asks for: half a batch, and no more than half the
 * reserve (at least 1), so that a claim fits in the reserve. */
static int sched_least_claim(const sched *sc)
{
    int least = (int)sc->cfg->batch / 2 + 1, most = sched_reserve(sc) / 2;
    if (most < 1) most = 1;
    return least < most ? least : most;
}

/* Room freed: the passes that stopped for lack of it go on, from the slice
 * where each stopped, once half the reserve is free (at least the least
 * claim: tasks held far ahead may keep the rest of the room) and no pass is
 * running (a running one claims with the room as it is when it asks).
 * Started again from the watermark, every pass would claim the slices
 * before that one again, empty: in a burst, three claims a bucket each time
 * room frees. */
static void sched_room_freed(sched *sc)
{
    int want = sched_reserve(sc) / 2;
    if (want < sched_least_claim(sc)) want = sched_least_claim(sc);
    if (sc->starved && !sc->stopping && sc->scans == 0 && sched_room(sc) >= want) {
        sc->starved = 0;
        scan_resume(sc);
    }
}

/* A kept job's text buffers, in the order they lie in it (each is written
 * whole before it is read; util_zero_but aborts on any other order, at the
 * first job reused). Of a job's 1,472 bytes a success writes some
 * 400, and a burst holds up to twice max_inflight jobs: zeroed whole, each
 * would bring its error text and host buffers into the cache at its claim
 * for nothing. */
static const util_span job_text[] = {UTIL_SPAN(job, cb.id), UTIL_SPAN(job, cb.err),
                                     UTIL_SPAN(job, flow_reason), UTIL_SPAN(job, queue),
                                     UTIL_SPAN(job, dest), UTIL_SPAN(job, park_slice)};

/* A job made new (job_text): a kept one, or a new one. */
static job *sched_job_new(sched *sc)
{
    job *j = sc->spare;
    if (!j) return xcalloc(1, sizeof(*j));
    sc->spare = j->next;
    if (--sc->nspare < sc->spare_low) sc->spare_low = sc->nspare;
    util_zero_but(j, sizeof(*j), job_text, sizeof(job_text) / sizeof(job_text[0]));
    return j;
}

/* Let n of the kept jobs go (fewer when fewer are kept); a kept job owns
 * nothing (sched_job_clear ran). */
static void sched_spare_drop(sched *sc, int n)
{
    for (; n > 0 && sc->spare; n--) {
        job *j = sc->spare;
        sc->spare = j->next;
        sc->nspare--;
        free(j);
    }
}

/* An ended job is kept for the next claim, up to as many as the room holds
 * (sched_room: twice max_inflight): bursts make their jobs once. Those no
 * claim took for JOB_SPARE_SCANS full scans are let go, down to
 * JOB_SPARE_KEEP (sched_spare_trim). */
static void sched_job_gone(sched *sc, job *j)
{
    sc->held--;
    if (sc->nspare < 2 * (int)sc->cfg->max_inflight) {
        sched_job_clear(j);
        j->next = sc->spare;
        sc->spare = j;
        sc->nspare++;
    } else {
        sched_job_free(j);
    }
    sched_room_freed(sc);
}

/* ---- the fire wheel ---------------------------------------------------- */

/* The wheel's timer is a timerfd of its own on CLOCK_MONOTONIC, set to the
 * microsecond: it runs when the store's clock reaches next.000, not up to a
 * millisecond after. It is set again only when the wheel's next due time
 * changes. (The loop's own timers run on libevent's coarse clock, main.c:
 * libevent's precise timer sets a timerfd before every epoll_wait, a
 * system call each loop turn.) */
static void sched_wheel_arm(sched *sc)
{
    uint64_t next = wheel_next_due(sc->w);
    int64_t due = 0, in = 0;
    if (next != WHEEL_NEVER) {
        due = (int64_t)next * 1000;
        if (due < sc->backlog_until_ms * 1000) due = sc->backlog_until_ms * 1000;
    }
    if (due == sc->wheel_due_us) return;
    /* set as a delay from now, not as a time: what a library standing in
     * for the clocks (libfaketime, in the tests) leaves alone */
    if (due) {
        in = due - store_now_us(sc->s);
        if (in < 1) in = 1; /* passed: at once (0 would disarm it) */
    }
    struct itimerspec its = {.it_value = {(time_t)(in / 1000000), (long)(in % 1000000) * 1000}};
    if (timerfd_settime(sc->wheel_fd, 0, &its, NULL) != 0) {
        log_warn_limited(&sc->warn, store_now_ms(sc->s), "scheduler: timerfd_settime: %s",
                         strerror(errno));
        sc->wheel_due_us = -1;
        return;
    }
    sc->wheel_due_us = due;
}

static void sched_flow_arm(sched *sc)
{
    if (!event_pending(sc->flow_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {0, 0};
        event_add(sc->flow_ev, &tv);
    }
}

/* 1 when a limit may hold j back: it asks first. A task of an unlimited
 * queue to an unlimited destination costs nothing here while no limit
 * exists at all, and a parse of its spec while some do. */
static int sched_flow_asks(sched *sc, job *j)
{
    if (!sc->fc || flow_cache_empty(sc->fc) || j->flow) return 0;
    /* none applied at its claim, and none was added since */
    if (j->free_gen && j->free_gen == flow_cache_gen(sc->fc) + 1) return 0;
    if (flow_cache_route(sc->fc, j->cb.spec, store_now_ms(sc->s), j->queue, j->dest) != 1)
        return 0;
    j->flow = FLOW_ASKING;
    j->next = NULL;
    *sc->asking_tail = j;     /* in firing order: oldest first */
    sc->asking_tail = &j->next;
    sc->nasking++;
    sched_flow_arm(sc);
    return 1;
}

/* j reached too late for its lease (callback_too_late): no attempt, and
 * nothing recorded (a record could reach the store after another claim took
 * the task); the lease brings it back, the same attempt. */
static void sched_end_late(sched *sc, job *j)
{
    sched_flow_end(sc, j, 0, 0);
    j->flow = 0;
    metrics.late++;
    log_warn_limited(&sc->warn, store_now_ms(sc->s), "task %s attempt %d: %s", j->cb.id,
                     j->cb.attempt, j->cb.err);
    sched_job_gone(sc, j);
}

/* j ends expired (j->cb.err says why): its attempt made, if one was, is
 * recorded with it. flow_ended: its limits' slots were given back already. */
static void sched_end_expired(sched *sc, job *j, int flow_ended)
{
    j->cb.expired = 1;
    if (!flow_ended) sched_flow_end(sc, j, 0, 0);
    metrics.expired++;
    log_info("task %s %s", j->cb.id, j->cb.err);
    sched_record(sc, j, OUT_EXPIRE, 0);
}

/* A task whose expires_at has passed ends expired, no attempt made: when
 * it fires, and when a limit lets it go (the pool checks again when a
 * connection frees). 1 when it did. */
static int sched_expire(sched *sc, job *j)
{
    if (!callback_expire(&j->cb, store_now_ms(sc->s))) return 0;
    j->cb.attempt--;
    sched_end_expired(sc, j, 0);
    return 1;
}

/* j's time came, or a limit let it go: 1 when it ended here, too late for
 * its lease or expired, before anything about it is recorded or asked. */
static int sched_ended_unbegun(sched *sc, job *j)
{
    if (callback_too_late(&j->cb, store_now_ms(sc->s))) {
        sched_end_late(sc, j);
        return 1;
    }
    return sched_expire(sc, j);
}

/* To the pool: expires_at is checked again there, as the request begins,
 * on the store's clock carried by this host's monotonic one. */
static void sched_call(sched *sc, job *j)
{
    j->cb.clock_offset_ms = store_now_ms(sc->s) - util_mono_ms();
    sc->calling++;
    sc->fired++;
    sc->submit(j, sc->submit_priv);
}

/* A task a limit let go: it may have expired, or run out of lease, while it
 * waited. */
static void sched_submit(sched *sc, job *j)
{
    if (!sched_ended_unbegun(sc, j)) sched_call(sc, j);
}

static void sched_fire(wheel *w, wheel_timer *t, void *arg)
{
    sched *sc = arg;
    job *j = container_of(t, job, timer);
    (void)w;
    sched_unhold(sc, j);
    /* before a limit is asked: a task held back expires while it waits */
    if (sched_ended_unbegun(sc, j) || sched_flow_asks(sc, j)) return;
    sched_call(sc, j);
}

static void sched_wheel_cb(evutil_socket_t fd, short what, void *arg)
{
    sched *sc = arg;
    uint64_t n;
    (void)what;
    /* it ran: read, so that it is not ready again whatever comes next, and
     * set again (or disarmed) below, even for the same due (it may have run
     * a little ahead of the store's clock) */
    if (fd >= 0 && read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        log_warn_limited(&sc->warn, store_now_ms(sc->s), "scheduler: timerfd read: %s",
                         strerror(errno));
    sc->wheel_due_us = -1;
    wheel_advance(sc->w, (uint64_t)store_now_ms(sc->s));
    sched_wheel_arm(sc);
}

/* Put j on the wheel; the caller arms the wheel's timer once its batch is in. */
static void sched_wait(sched *sc, job *j)
{
    int64_t now = store_now_ms(sc->s);
    /* An overdue task fires on the next advance, oldest first. A backlog
     * (catching up after downtime) comes in one claim reply per bucket and
     * slice, a round trip apart: the wheel waits BACKLOG_GATHER_MS for the
     * other buckets' replies so that their tasks too go out oldest first.
     * Tasks due now are not held: only those later than the lookahead. */
    if (j->cb.due_ms + sc->cfg->lookahead_ms < now && sc->backlog_until_ms < now)
        sc->backlog_until_ms = now + BACKLOG_GATHER_MS;
    wheel_add(sc->w, &j->timer, NULL, (uint64_t)(j->cb.due_ms > 0 ? j->cb.due_ms : 0), 0, 1);
}

/* ---- recording attempts ------------------------------------------------ */


static flow_rec *sched_flow_rec(flow_batch *b, const job *j)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 32;
        b->r = xrealloc(b->r, sizeof(*b->r) * (size_t)b->cap);
    }
    flow_rec *r = &b->r[b->n++];
    memset(r, 0, sizeof(*r));
    util_copy(r->id, sizeof(r->id), j->cb.id);
    util_copy(r->queue, sizeof(r->queue), j->queue);
    util_copy(r->dest, sizeof(r->dest), j->dest);
    r->due_ms = j->cb.due_ms;
    r->timeout_ms = j->timeout_ms;
    return r;
}

static void sched_settled_cb(void *owner, const char *err, void *priv)
{
    sched *sc = priv;
    job *j = owner;
    (void)err; /* the store logged it; the lease brings the task back */
    sc->pending--;
    sc->recording--;
    /* told once the store holds the end: a record that failed brings the
     * task back by its lease, to end (and be told) later */
    if (!err && j->ended_failed && sc->failed) sc->failed(&j->cb, sc->failed_priv);
    /* a retry due within the reach is claimed now, not at the next tick */
    if (!err && j->retry_due_ms && j->retry_due_ms < store_now_ms(sc->s) + sc->reach_ms)
        sched_kick(sc, task_slice_bucket(j->cb.id));
    sc->settled++;
    if (!err && j->park_slice[0] && sc->fc) {
        /* parked: now it waits in its queue's list for a pump */
        flow_rec *r = sched_flow_rec(&sc->enq, j);
        util_copy(r->slice, sizeof(r->slice), j->park_slice);
        util_copy(r->reason, sizeof(r->reason), j->flow_reason);
        sched_flow_arm(sc);
    }
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
    j->ended_failed = o == OUT_FAIL || o == OUT_EXPIRE;
    history_outcome(o, j->cb.uncounted, j->cb.spec->queue);
    sc->settle[sc->nsettle++] = (store_attempt){
        .id = j->cb.id, .src = j->src, .outcome = o, .attempt = j->cb.attempt,
        .status_code = j->cb.status_code, .err = j->cb.err, .due_ms = due_ms,
        .timeout_ms = j->timeout_ms, .owner = j, .sent_at_ms = j->cb.sent_at_ms,
        .took_ms = j->cb.took_ms, .answer = j->cb.answer, .answer_len = j->cb.answer_len,
        .park_slice = j->park_slice};
    if (!event_pending(sc->flush_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {0, SCHED_SETTLE_GATHER_MS * 1000};
        event_add(sc->flush_ev, &tv);
    }
    sc->recording++;
    sched_room_freed(sc);
}

void sched_set_failed(sched *sc, sched_failed_fn *fn, void *priv)
{
    sc->failed = fn;
    sc->failed_priv = priv;
}

/* The attempt's outcome label and times, into the metrics. */
static void sched_count(const job *j)
{
    metrics_outcome o = j->cb.ok ? MO_2XX
                      : j->cb.permanent ? MO_DENIED
                      : j->cb.status_code ? MO_HTTP_ERROR
                      : j->cb.timed_out ? MO_TIMEOUT : MO_CONNECT_ERROR;
    metrics.attempts[o]++;
    int64_t from = j->cb.due_ms;
    if (j->cb.sent_at_ms > 0) {
        /* a limit's delay is its own: tickd's lateness runs from when the
         * limit let the callback go */
        if (j->flow == FLOW_LET_GO) {
            int64_t waited = j->flow_from_ms ? j->flow_from_ms : j->cb.due_ms;
            if (j->flow_at_ms > waited)
                metrics_observe(&metrics.flow_wait[metrics_flow_reason(j->flow_reason)],
                                (double)(j->flow_at_ms - waited) / 1000.0);
            if (j->flow_at_ms > from) from = j->flow_at_ms;
        }
        metrics_observe(&metrics.lateness, (double)(j->cb.sent_at_ms - from) / 1000.0);
        metrics_observe(&metrics.duration, (double)j->cb.took_ms / 1000.0);
    }
    history_attempt(j->cb.ok, j->cb.sent_at_ms > 0, j->cb.sent_at_ms - from);
}

/* An attempt finished: record it. A failed attempt is logged at debug
 * level; a task that ends failed, once, at warning level. */
void sched_on_done(sched *sc, job *j)
{
    sc->calling--;
    if (j->cb.aborted) {
        /* stopped mid-call: the lease stays, so it runs again after expiry */
        sched_job_gone(sc, j);
        return;
    }
    if (j->cb.late) {
        sched_end_late(sc, j);
        return;
    }
    if (j->cb.uncounted) {
        /* tickd's own failure (out of descriptors...): the receiver was never
         * called, so this was no attempt; the count stays, and it goes again
         * in a second or two */
        int64_t delay_ms = UNCOUNTED_RETRY_MS + random() % UNCOUNTED_RETRY_MS;
        j->cb.attempt--;
        sched_flow_end(sc, j, 0, 0);
        metrics.deferred++;
        log_warn_limited(&sc->warn, store_now_ms(sc->s),
                         "task %s: callback not made (%s); trying again in %lld ms without "
                         "counting an attempt", j->cb.id, j->cb.err, (long long)delay_ms);
        sched_record(sc, j, OUT_RETRY, store_now_ms(sc->s) + delay_ms);
        return;
    }
    if (j->cb.expired) {
        /* it waited for a connection past its expiry: no attempt made */
        j->cb.attempt--;
        sched_end_expired(sc, j, 0);
        return;
    }
    sched_count(j);
    /* a 429 or 503 with Retry-After holds the destination back (flow.h) */
    int64_t until = 0;
    if ((j->cb.status_code == 429 || j->cb.status_code == 503) && j->cb.retry_after_ms >= 0 && sc->fc) {
        int64_t ra = j->cb.retry_after_ms;
        if (ra > FLOW_RETRY_AFTER_MAX_MS) ra = FLOW_RETRY_AFTER_MAX_MS;
        until = store_now_ms(sc->s) + ra;
        if (!j->flow &&
            flow_cache_route(sc->fc, j->cb.spec, store_now_ms(sc->s), j->queue, j->dest) < 0)
            until = 0;
        if (until) flow_cache_hold(sc->fc, j->dest, until, store_now_ms(sc->s));
    }
    int ends = j->cb.ok || j->cb.permanent || j->cb.attempt >= j->cb.spec->max_attempts;
    sched_flow_end(sc, j, until, ends && !j->cb.ok);
    if (ends) {
        log_debug("task %s attempt %d: %s", j->cb.id, j->cb.attempt, j->cb.ok ? "ok" : j->cb.err);
        if (!j->cb.ok)
            log_warn("task %s failed after %d attempt%s: %s", j->cb.id, j->cb.attempt,
                     j->cb.attempt == 1 ? "" : "s", j->cb.err);
        if (j->cb.ok) metrics.succeeded++;
        else metrics.failed++;
        sched_record(sc, j, j->cb.ok ? OUT_OK : OUT_FAIL, 0);
    } else {
        double jitter = (double)(random() % 1000) / 1000.0;
        int64_t next = store_now_ms(sc->s) + task_backoff_ms(j->cb.spec->backoff_ms, j->cb.attempt, jitter);
        if (next < until) next = until;
        if (j->cb.spec->expires_ms > 0 && next >= j->cb.spec->expires_ms) {
            /* the next attempt could not begin in time: it ends now, this
             * attempt recorded */
            size_t n = strlen(j->cb.err);
            snprintf(j->cb.err + n, sizeof(j->cb.err) - n, "; expired: its next attempt would begin "
                     "after its expires_at");
            sched_end_expired(sc, j, 1);
            return;
        }
        log_debug("task %s attempt %d: %s; retry at %lld", j->cb.id, j->cb.attempt, j->cb.err,
                  (long long)next);
        metrics.retries++;
        sched_record(sc, j, OUT_RETRY, next);
    }
}

/* Give an unfired claim back: due again where it was (left to its lease
 * once that has (nearly) run out: a release then could undo another claim). */
static void sched_release(sched *sc, job *j)
{
    if (callback_too_late(&j->cb, store_now_ms(sc->s))) {
        sched_end_late(sc, j);
        return;
    }
    sched_flow_end(sc, j, 0, 0);
    j->flow = 0;
    sched_record(sc, j, OUT_RELEASE, j->cb.due_ms);
}

/* ---- flow control -------------------------------------------------------- */

/* j's callback was let go and has ended (or a Retry-After came, until_ms):
 * its slots are freed, and waiting tasks may go. */
static void sched_flow_end(sched *sc, job *j, int64_t until_ms, int failed)
{
    if (!sc->fc || (j->flow != FLOW_LET_GO && !until_ms)) return;
    flow_rec *r = sched_flow_rec(&sc->ends, j);
    r->until_ms = until_ms;
    r->failed = failed;
    sched_flow_arm(sc);
}

typedef struct admit_ctx {
    sched *sc;
    int n;
    job *jobs[];
} admit_ctx;

static void sched_admit_cb(const store_flow_verdict *v, int n, const char *err, void *priv)
{
    admit_ctx *c = priv;
    sched *sc = c->sc;
    int64_t now = store_now_ms(sc->s);
    sc->pending--;
    if (err)
        log_warn_limited(&sc->warn, now, "flow control: %s (the tasks asking go again)", err);
    for (int i = 0; i < c->n; i++) {
        job *j = c->jobs[i];
        if (err || i >= n || sc->stopping) {
            /* a go not taken ends at once, its slots freed */
            j->flow = !err && i < n && v[i].kind == FLOW_GO ? FLOW_LET_GO : 0;
            sched_release(sc, j);
        } else if (v[i].kind == FLOW_GO) {
            j->flow = FLOW_LET_GO;
            j->flow_at_ms = v[i].at_ms;
            j->flow_from_ms = v[i].waited_from_ms;
            util_copy(j->flow_reason, sizeof(j->flow_reason), v[i].reason);
            if (v[i].at_ms > now) {
                /* its turn in the rate: on the wheel until then */
                sched_hold(sc, j);
                wheel_add(sc->w, &j->timer, NULL, (uint64_t)v[i].at_ms, 0, 1);
                sched_wheel_arm(sc);
            } else {
                sched_submit(sc, j);
            }
        } else if (callback_too_late(&j->cb, now)) {
            /* held back, but its lease ran out meanwhile: a park recorded
             * now could undo another claim's */
            sched_end_late(sc, j);
        } else {
            /* held back: no attempt; its entry waits in this minute's slice */
            j->flow = 0;
            metrics.flow_held[metrics_flow_reason(v[i].reason)]++;
            util_copy(j->flow_reason, sizeof(j->flow_reason), v[i].reason);
            util_copy(j->cb.err, sizeof(j->cb.err), v[i].reason);
            task_slice_name(now, task_slice_bucket(j->src), j->park_slice);
            /* spread: a burst held back does not come round all at once;
             * one that expires sooner comes round then, to end */
            int64_t again = now + FLOW_PARK_MS + random() % FLOW_PARK_MS;
            if (j->cb.spec->expires_ms > 0 && j->cb.spec->expires_ms < again) again = j->cb.spec->expires_ms;
            sched_record(sc, j, OUT_PARK, again);
        }
    }
    free(c);
}

typedef struct take_ctx {
    sched *sc;
    job j;                    /* id, queue, dest of the task let go */
    char slice[TASK_SLICE_MAX];
} take_ctx;

static void sched_take_cb(int n, const char *err, void *priv)
{
    take_ctx *c = priv;
    sched *sc = c->sc;
    sc->pending--;
    if (n == 1 && !err) {
        sched_kick(sc, task_slice_bucket(c->slice));
    } else {
        /* unreachable: its slots go back, and its parked entry comes round
         * again by itself; not there: a claim holds it for a moment (to park
         * it again: that park's enqueue answers it where it goes), or it is
         * gone: it waits again, first in line (flow.lua, pump) */
        if (err) log_warn_limited(&sc->warn, store_now_ms(sc->s), "flow control: %s", err);
        c->j.flow = FLOW_LET_GO;
        sched_flow_end(sc, &c->j, 0, 0);
        if (!err) {
            flow_rec *r = &sc->ends.r[sc->ends.n - 1];
            r->back = 1;
            util_copy(r->slice, sizeof(r->slice), c->slice);
        }
    }
    free(c);
}

/* Tasks let go (by a pump, or answered by an enqueue: let go while this
 * replica's claim held their entry): their parked entries are made due. */
static void sched_pump_cb(const store_flow_go *g, int n, const char *err, void *priv)
{
    sched *sc = priv;
    sc->pending--;
    if (err) log_warn_limited(&sc->warn, store_now_ms(sc->s), "flow control: %s", err);
    for (int i = 0; i < n; i++) {
        take_ctx *c = xcalloc(1, sizeof(*c));
        c->sc = sc;
        util_copy(c->j.cb.id, sizeof(c->j.cb.id), g[i].id);
        util_copy(c->j.queue, sizeof(c->j.queue), g[i].queue);
        util_copy(c->j.dest, sizeof(c->j.dest), g[i].dest);
        util_copy(c->slice, sizeof(c->slice), g[i].slice);
        sc->pending++;
        store_flow_take(sc->s, c->j.cb.id, c->slice, g[i].at_ms, sched_take_cb, c);
    }
}

static store_flow_task *sched_flow_tasks(const flow_batch *b)
{
    store_flow_task *t = xcalloc((size_t)b->n + 1, sizeof(*t));
    for (int i = 0; i < b->n; i++)
        t[i] = (store_flow_task){b->r[i].id, b->r[i].queue, b->r[i].dest, b->r[i].slice,
                                 b->r[i].reason, b->r[i].due_ms, b->r[i].timeout_ms};
    return t;
}

/* How far ahead a limit lets a callback go. A pump: a tick and a half, so
 * that the pumps of the replicas' ticks keep a rate's callbacks evenly
 * spaced (a task a pump lets go is claimed afresh, its lease running from
 * its send time). A claim asking: within its lease (lease_margin_ms past
 * the due), so a callback let go late never outlives it. */
static int64_t sched_horizon(const sched *sc, int pump)
{
    int64_t h = sc->cfg->tick_ms * 3 / 2, lease = sc->cfg->lease_margin_ms / 2;
    return pump || h < lease ? h : lease;
}

/* Send what this loop turn gathered: questions, waiting tasks, ends (with a
 * pump when they free slots or a tick asks for one). */
static void sched_flow_cb(evutil_socket_t fd, short what, void *arg)
{
    sched *sc = arg;
    (void)fd, (void)what;
    if (sc->nasking && sc->stopping) {
        /* stopping: they go back unasked */
        for (job *j = sc->asking, *n; j; j = n) {
            n = j->next;
            j->flow = 0;
            sched_release(sc, j);
        }
        sc->asking = NULL;
        sc->asking_tail = &sc->asking;
        sc->nasking = 0;
    }
    while (sc->nasking) {
        int k = sc->nasking < FLOW_CALL_MAX ? sc->nasking : FLOW_CALL_MAX;
        admit_ctx *c = xmalloc(sizeof(*c) + sizeof(job *) * (size_t)k);
        store_flow_task *t = xcalloc((size_t)k, sizeof(*t));
        c->sc = sc;
        c->n = 0;
        for (job *j = sc->asking; c->n < k; j = j->next) {
            t[c->n] = (store_flow_task){.id = j->cb.id, .queue = j->queue, .dest = j->dest,
                                        .due_ms = j->cb.due_ms, .timeout_ms = j->timeout_ms};
            c->jobs[c->n++] = j;
        }
        sc->asking = c->jobs[k - 1]->next;
        if (!sc->asking) sc->asking_tail = &sc->asking;
        sc->nasking -= k;
        sc->pending++;
        store_flow_admit(sc->s, t, c->n, sched_horizon(sc, 0), sched_admit_cb, c);
        free(t);
    }
    if (sc->enq.n) {
        store_flow_task *t = sched_flow_tasks(&sc->enq);
        for (int i = 0; i < sc->enq.n; i += FLOW_CALL_MAX) {
            sc->pending++;
            store_flow_enqueue(sc->s, t + i, sc->enq.n - i < FLOW_CALL_MAX ? sc->enq.n - i
                                                                          : FLOW_CALL_MAX,
                               sched_pump_cb, sc);
        }
        free(t);
        sc->enq.n = 0;
        sc->pump_wanted = 1;  /* a slot may have freed meanwhile */
    }
    if (sc->ends.n || sc->pump_wanted) {
        store_flow_end *e = xcalloc((size_t)sc->ends.n + 1, sizeof(*e));
        for (int i = 0; i < sc->ends.n; i++)
            e[i] = (store_flow_end){sc->ends.r[i].id,      sc->ends.r[i].queue,
                                    sc->ends.r[i].dest,    sc->ends.r[i].until_ms,
                                    sc->ends.r[i].failed,  sc->ends.r[i].back,
                                    sc->ends.r[i].slice};
        /* what it lets go is claimed by whichever replica has room: a
         * replica busy with other work still lets a few go */
        int max = sched_room(sc) < FLOW_PUMP_MIN ? FLOW_PUMP_MIN : sched_room(sc);
        int i = 0;
        do {
            /* only the last call lets waiting tasks go */
            int k = sc->ends.n - i < FLOW_CALL_MAX ? sc->ends.n - i : FLOW_CALL_MAX;
            int last = i + k >= sc->ends.n;
            sc->pending++;
            store_flow_pump(sc->s, e + i, k, sc->stopping || !last ? 0 : max,
                            sched_horizon(sc, 1), sched_pump_cb, sc);
            i += k;
        } while (i < sc->ends.n);
        free(e);
        sc->ends.n = 0;
        sc->pump_wanted = 0;
    }
}

static void sched_snap_cb(const store_flow_info *items, int n, const store_flow_snap *m,
                          const char *err, void *priv)
{
    sched *sc = priv;
    sc->pending--;
    sc->snap_busy = 0;
    if (err) {
        log_warn_limited(&sc->warn, store_now_ms(sc->s), "flow control settings: %s", err);
        return;
    }
    /* only what changed since the last call comes, a page at a time; a
     * read counts once its last page is in */
    flow_cache_apply(sc->fc, items, n, m->fresh, !m->more, store_now_ms(sc->s));
    flow_cache_set_waiting(sc->fc, m->waiting);
    sc->flow_version = m->version;
    if (m->more) sched_flow_refresh(sc);
    else sc->flow_loads++;
}

void sched_flow_refresh(sched *sc)
{
    if (!sc->fc || sc->snap_busy || sc->stopping) return;
    sc->snap_busy = 1;
    sc->pending++;
    store_flow_snapshot(sc->s, sc->flow_version, sched_snap_cb, sc);
}

static void sched_snap_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    sched_flow_refresh(arg);
}

void sched_flow_pump(sched *sc)
{
    if (!sc->fc || sc->stopping) return;
    sc->pump_wanted = 1;
    sched_flow_arm(sc);
}

long long sched_flow_waiting(const sched *sc)
{
    return sc->fc && !flow_cache_empty(sc->fc) ? flow_cache_waiting(sc->fc) : -1;
}

/* ---- claiming ---------------------------------------------------------- */

static void scan_claim(bucket_scan *bs);
static void scan_finish(bucket_scan *bs);

/* Due soon: within half the reach. */
static int64_t sched_near(const sched *sc)
{
    return sc->reach_ms / 2;
}

/* The job of lease l, claimed by a claim sent at sent_ms, waiting for its
 * time (NULL: handed back at once); far (nfar) when due later than far_from. */
static job *sched_take(sched *sc, const char *slice, store_lease *l, int64_t sent_ms,
                       int64_t far_from)
{
    job *j = sched_job_new(sc);
    util_copy(j->cb.id, sizeof(j->cb.id), l->id);
    util_copy(j->src, sizeof(j->src), slice);
    j->cb.due_ms = l->due_ms;
    j->cb.attempt = l->attempt;
    j->cb.spec = l->spec;
    j->timeout_ms = l->spec->timeout_ms;
    /* The store leased it until max(due, its now at the claim) + timeout +
     * margin: its attempt must have ended half the margin before, for the
     * record to reach the store before another claim may take the task
     * (sent_ms is no later than the store's now; a limit lets a call go
     * within the other half: sched_horizon) */
    j->cb.end_by_ms = (l->due_ms > sent_ms ? l->due_ms : sent_ms) + j->timeout_ms +
                      sc->cfg->lease_margin_ms / 2;
    wheel_timer_init(&j->timer, sched_fire, sc);
    sc->held++;
    sc->claimed++;
    if (sc->stopping) {
        sched_release(sc, j);
        return NULL;
    }
    sched_hold(sc, j);
    if (l->due_ms > far_from) {
        j->far = 1;
        sc->nfar++;
    }
    sched_wait(sc, j);
    return j;
}

/* A claimed batch, the first n leases of res, taken: the callers may open
 * what its calls will need. Not for a call a limit may apply to (its
 * queue's or its destination's, as the copy of the limits has them now): a
 * limited destination may be allowed fewer calls at once than the batch
 * would open connections for. The calls no limit applies to are opened for
 * whatever limits other queues have. */
static void sched_take_batch(sched *sc, const char *slice, const store_claim *res,
                             int64_t sent_ms)
{
    int warm = sc->warm != NULL, n = 0;
    int limits = sc->fc && !flow_cache_empty(sc->fc);
    int64_t now = store_now_ms(sc->s), far_from = now + sched_near(sc);
    if (warm && res->n > sc->warm_cap) {
        sc->warm_cap = res->n;
        sc->warm_cbs = xrealloc(sc->warm_cbs, sizeof(*sc->warm_cbs) * (size_t)sc->warm_cap);
    }
    for (int i = 0; i < res->n; i++) {
        job *j = sched_take(sc, slice, &res->leases[i], sent_ms, far_from);
        if (!j || !warm) continue;
        if (limits) {
            if (flow_cache_route(sc->fc, j->cb.spec, now, j->queue, j->dest) != 0) continue;
            /* (its fire asks nothing while no limit is added: one route a call) */
            j->free_gen = flow_cache_gen(sc->fc) + 1;
        }
        sc->warm_cbs[n++] = &j->cb;
    }
    if (n) sc->warm(sc->warm_cbs, n, sc->warm_priv);
}

/* A slice whose minute and the grace after it are over: once it holds
 * nothing the scan may pass it (scan_claim_cb), so only then are a claim's
 * counts of what it left wanted. */
static int scan_minute_over(const sched *sc, int64_t minute)
{
    return (minute + 1) * 60000 + sc->cfg->slice_grace_ms <= store_now_ms(sc->s);
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
    sc->claiming -= bs->limit;
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
        sched_take_batch(sc, slice, res, bs->sent_ms);
        if (res->n) sched_wheel_arm(sc); /* once for the batch (sched_wait) */
        if (res->taken >= bs->limit && !sc->stopping) {
            scan_claim(bs); /* the slice had more than one batch */
            return;
        }
        passable = res->due_left == 0 && res->run_left == 0 && scan_minute_over(sc, bs->minute);
    }
    if (!passable && bs->first_open < 0) bs->first_open = bs->minute;
    if (bs->minute >= bs->end_minute || sc->stopping) {
        scan_finish(bs);
        return;
    }
    bs->minute++;
    scan_claim(bs);
}

static void sched_tick_arm(sched *sc);

/* How far ahead claims look, and how often the ticks come. The room
 * (max_inflight) bounds memory; it is no promise to cover lookahead_ms: at
 * 10,000 callbacks a second, 4,096 held jobs are 0.4 s of them. Claims that
 * looked the whole lookahead ahead filled the room a bucket at a time with
 * tasks due up to 1.5 s later, while other buckets' tasks came due with no
 * room to be claimed. So claims look no further ahead than a quarter of the
 * room covers at the rate callbacks fire (the rest is for the callbacks
 * being made and what comes due meanwhile: retries, tasks added for now, a
 * rising rate; claims of tasks due later stop at half, sched_reserve), and
 * the ticks come more than twice within that reach (at most every tick_ms),
 * every bucket's claims reaching the same time. The rate is the last window's, measured
 * at least every RATE_WINDOW_MS while ticks are that frequent. */
static void sched_reach(sched *sc)
{
    int64_t now = store_now_ms(sc->s), span = now - sc->rate_from_ms;
    if (span >= RATE_WINDOW_MS) {
        sc->rate_per_ms = (double)(sc->fired - sc->rate_from_fired) / (double)span;
        sc->rate_from_ms = now;
        sc->rate_from_fired = sc->fired;
        /* kept while passes still run out of room so */
        if (!sc->short_seen) sc->short_rate = 0;
        sc->short_seen = 0;
    }
    double rate = sc->rate_per_ms > sc->short_rate ? sc->rate_per_ms : sc->short_rate;
    int64_t reach = sc->cfg->lookahead_ms, period = sc->cfg->tick_ms;
    double covers = (double)sc->cfg->max_inflight / 4;
    /* a room that holds the whole lookahead with a quarter to spare is not
     * short: the reach and the ticks stay as they are */
    if (rate * (double)reach > 3 * covers) {
        covers /= rate;
        reach = covers > REACH_MIN_MS ? (int64_t)covers : REACH_MIN_MS;
    }
    sc->reach_ms = reach;
    /* while the room is short (claims of tasks due later stopped at the
     * reserve), a task due within the reach is claimed into the reserve
     * only once it is due soon: the next tick must come before that */
    if ((reach < sc->cfg->lookahead_ms || sched_room(sc) <= sched_reserve(sc)) &&
        period > sched_near(sc) * 4 / 5)
        period = sched_near(sc) * 4 / 5;
    /* a shorter period starts now: the tick armed may be a second away (and
     * only sooner: a tick put off each time would never come) */
    sc->period_ms = period;
    if (now + period * 5 / 4 < sc->tick_at_ms && !sc->stopping) sched_tick_arm(sc);
}

static void scan_claim(bucket_scan *bs)
{
    sched *sc = bs->sc;
    /* no claim for less than half a batch: the room that freed while the
     * kick's passes ran is split among them, and each would otherwise take
     * a few tasks a call */
    int room = sched_room(sc), least = sched_least_claim(sc);
    if (bs->share && least > bs->share) least = bs->share;
    if (room < least || sc->stopping) {
        /* out of room: it goes on when room frees */
        if (!sc->stopping) {
            sc->starved = bs->starved = 1;
            /* tasks claimed well ahead of their time took the room's half
             * for them, and the reach had more: tasks come due at least a
             * room a reach, whatever has fired yet (a fresh tickd, or a
             * load that rose from idle, whose first pass claimed a whole
             * lookahead a bucket at a time while tasks of the buckets after
             * came due unclaimed) */
            if (sc->nfar * 4 >= sched_reserve(sc) * 3) {
                double r = (double)sc->cfg->max_inflight / (double)sc->cfg->lookahead_ms;
                if (r > sc->short_rate) sc->short_rate = r;
                sc->short_seen = 1;
            }
        }
        if (bs->first_open < 0) bs->first_open = bs->minute;
        scan_finish(bs);
        return;
    }
    sched_reach(sc);
    bs->limit = room < sc->cfg->batch ? room : (int)sc->cfg->batch;
    if (bs->share && bs->limit > bs->share) bs->limit = bs->share;
    bs->share = 0;
    /* the reserve is for what is due before the next tick */
    int far = room - sched_reserve(sc);
    store_claim_ask ask = {sc->reach_ms, sched_near(sc), bs->limit, far > 0 ? far : 0,
                           scan_minute_over(sc, bs->minute)};
    sc->claiming += bs->limit;
    sc->pending++;
    bs->sent_ms = store_now_ms(sc->s);
    store_claim_slice(sc->s, bs->b, bs->minute, &ask, scan_claim_cb, bs);
}

static void scan_start(bucket_scan *bs);

/* A bucket's pass begins (from the watermark, or where a starved one
 * stopped) and ends. */
static void scan_begin(bucket_scan *bs, int share)
{
    bs->active = 1;
    bs->sc->scans++;
    bs->again = 0;
    bs->starved = 0;
    bs->share = share;
    bs->failures = 0;
}

static void scan_end(bucket_scan *bs)
{
    bs->active = 0;
    bs->sc->scans--;
}

/* A bucket's pass ended: again if it was kicked meanwhile; the last pass
 * to end goes on with the room that freed while they ran. */
static void scan_done(bucket_scan *bs)
{
    sched *sc = bs->sc;
    scan_end(bs);
    sched_reach(sc); /* the room it left may be short */
    if (bs->again && !sc->stopping) scan_start(bs);
    else if (sc->scans == 0) sched_room_freed(sc);
}

static void scan_wm_cb(int64_t wm, const char *err, void *priv)
{
    bucket_scan *bs = priv;
    bs->sc->pending--;
    if (err) log_warn_limited(&bs->sc->warn, store_now_ms(bs->sc->s), "watermark bucket %d: %s",
                              bs->b, err);
    else bs->wm = wm; /* a pass that goes on later advances it from here */
    scan_done(bs);
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
    scan_done(bs);
}

static void scan_get_cb(int64_t wm, const char *err, void *priv)
{
    bucket_scan *bs = priv;
    sched *sc = bs->sc;
    sc->pending--;
    if (err) {
        /* not again at once, even if kicked: the next tick tries again */
        log_warn_limited(&sc->warn, store_now_ms(sc->s), "watermark bucket %d: %s", bs->b, err);
        scan_end(bs);
        return;
    }
    int64_t now = store_now_ms(sc->s);
    bs->wm = wm;
    bs->minute = wm;
    bs->end_minute = (now + sc->reach_ms) / 60000;
    bs->first_open = -1;
    if (bs->minute > bs->end_minute) bs->minute = bs->end_minute;
    scan_claim(bs);
}

static void scan_start(bucket_scan *bs)
{
    scan_begin(bs, 0);
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

/* The passes that stopped for lack of room go on where they stopped, up to
 * the minute of now + reach, the buckets taking turns as in
 * sched_kick_all. The slices before were claimed whole by that pass (or hold
 * the watermark back); anything added there since is kicked by its add, or
 * found by the next tick's pass. */
static void scan_resume(sched *sc)
{
    int64_t end = (store_now_ms(sc->s) + sc->reach_ms) / 60000;
    /* The room is shared out evenly among their first claims, so that the
     * buckets drain side by side and a backlog goes oldest first across
     * them; their claims after the first take what room there is, as a full
     * pass does (kept to the share, each resume was a round of small claims,
     * and a backlog at 10 M pending drained a third slower). But no share
     * is below the least claim: a claim call costs the store about as much
     * as a hundred tasks it takes, whatever their number, and 16 buckets
     * sharing half the reserve claimed 64 tasks a call. So as many go on as
     * the room gives each the least claim; the others go at the next resume
     * (once these passes ended and room freed again), starting from the
     * bucket after the last that went. When all go, the next resume starts
     * one bucket further, as sched_kick_all does. */
    int room = sched_room(sc), starved = 0, least = sched_least_claim(sc);
    for (int i = 0; i < sc->nb; i++) starved += sc->bk[i].starved && !sc->bk[i].active;
    if (starved == 0) return;
    int n = starved;
    if (room / n < least) {
        n = room / least;
        if (n < 1) n = 1;
    }
    int share = room / n, went = 0, last = sc->kick_from;
    if (share < 1) share = 1;
    for (int i = 0; i < sc->nb && went < n; i++) {
        bucket_scan *bs = &sc->bk[(sc->kick_from + i) % sc->nb];
        if (!bs->starved || bs->active) continue;
        last = (sc->kick_from + i) % sc->nb;
        went++;
        scan_begin(bs, share);
        bs->end_minute = end;
        if (bs->minute > end) bs->minute = end;
        scan_claim(bs);
    }
    sc->kick_from = (went < starved ? last + 1 : sc->kick_from + 1) % sc->nb;
    /* the buckets left for the next resume keep the scheduler starved */
    for (int i = 0; i < sc->nb; i++)
        if (sc->bk[i].starved && !sc->bk[i].active) sc->starved = 1;
}

/* Every bucket, starting with another one each time: when the room for
 * claimed tasks is short (a backlog), the bucket claiming first takes all of
 * it, and so the buckets take turns and drain side by side, oldest first
 * across them, rather than one after the other. */
static void sched_kick_all(sched *sc)
{
    for (int i = 0; i < sc->nb; i++) sched_kick(sc, (sc->kick_from + i) % sc->nb);
    sc->kick_from = (sc->kick_from + 1) % sc->nb;
}

/* A fresh task due within the reach: claim it now rather than at the next
 * tick. */
static void sched_added_cb(int bucket, int64_t due_ms, void *priv)
{
    sched *sc = priv;
    if (due_ms < store_now_ms(sc->s) + sc->reach_ms) sched_kick(sc, bucket);
}

/* The next tick in period_ms +-25 %: replicas drift apart in phase, so each
 * claims its share of every minute instead of the first to tick taking all.
 * A reach >= 1.25 period keeps tasks claimed before they are due
 * (lookahead_ms >= 1.25 tick_ms; a shorter reach has ticks every 0.4 reach). */
static void sched_tick_arm(sched *sc)
{
    int64_t ms = sc->period_ms * 3 / 4 + random() % (sc->period_ms / 2 + 1);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    sc->tick_at_ms = store_now_ms(sc->s) + ms;
    event_add(sc->tick_ev, &tv);
}

/* A tick between two full ones (sched_reach makes them when the room is
 * short): each bucket's pass claims on from the slice where its last one
 * ended, without reading the watermark or claiming the slices before it
 * again (whatever comes due there is kicked by its add, or found by the
 * next full tick), and leaves the watermark where it is. A bucket that
 * never ran a pass, or whose pass stopped for lack of room (it goes on when
 * room frees), is left to those. */
static void sched_kick_on(sched *sc)
{
    int64_t now = store_now_ms(sc->s);
    if (sc->starved) return;
    for (int i = 0; i < sc->nb; i++) {
        bucket_scan *bs = &sc->bk[(sc->kick_from + i) % sc->nb];
        if (bs->active || bs->wm == 0) continue;
        scan_begin(bs, 0);
        bs->first_open = bs->wm;
        bs->end_minute = (now + sc->reach_ms) / 60000;
        if (bs->minute > now / 60000) bs->minute = now / 60000;
        if (bs->minute > bs->end_minute) bs->minute = bs->end_minute;
        scan_claim(bs);
    }
    sc->kick_from = (sc->kick_from + 1) % sc->nb;
}

/* Every JOB_SPARE_SCANS full scans: the kept jobs no claim took since the
 * last time (the fewest kept meanwhile) are let go, past JOB_SPARE_KEEP. A
 * burst's jobs stay while bursts come more often than that; after the last
 * one they go within two such periods (at most 25 s at tick_ms 1000). */
static void sched_spare_trim(sched *sc)
{
    if (++sc->spare_scans < JOB_SPARE_SCANS) return;
    /* (spare_low is never above nspare: only a claim moves it, down) */
    sched_spare_drop(sc, sc->spare_low - JOB_SPARE_KEEP);
    sc->spare_low = sc->nspare;
    sc->spare_scans = 0;
}

static void sched_tick_cb(evutil_socket_t fd, short what, void *arg)
{
    sched *sc = arg;
    int64_t now = store_now_ms(sc->s);
    (void)fd, (void)what;
    sched_reach(sc);
    if (!sc->stopping) sched_tick_arm(sc);
    if (now - sc->full_ms < sc->cfg->tick_ms * 3 / 4) {
        sched_kick_on(sc);
        return;
    }
    sc->full_ms = now;
    sched_spare_trim(sc);
    store_sync_clock(sc->s);
    sched_kick_all(sc);
    /* waiting tasks whose limit allows them now go (ends pump too) */
    if (sc->fc && (!flow_cache_empty(sc->fc) || flow_cache_waiting(sc->fc) > 0))
        sched_flow_pump(sc);
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
    sc->reach_ms = cfg->lookahead_ms;
    sc->period_ms = cfg->tick_ms;
    sc->rate_from_ms = store_now_ms(s);
    sc->w = wheel_create(1, (uint64_t)store_now_ms(s));
    sc->tick_ev = evtimer_new(base, sched_tick_cb, sc);
    sc->wheel_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    sc->wheel_due_us = -1;
    if (sc->wheel_fd < 0) {
        snprintf(err, errlen, "scheduler: timerfd_create: %s", strerror(errno));
        sched_free(sc);
        return NULL;
    }
    sc->wheel_ev = event_new(base, sc->wheel_fd, EV_READ | EV_PERSIST, sched_wheel_cb, sc);
    /* a due task is never kept waiting by other ready work (main.c sets up
     * three priorities; where the base has one, this fails harmlessly) */
    if (sc->wheel_ev) event_priority_set(sc->wheel_ev, 0);
    if (sc->wheel_ev && event_add(sc->wheel_ev, NULL) != 0) {
        event_free(sc->wheel_ev);
        sc->wheel_ev = NULL;
    }
    sc->flush_ev = evtimer_new(base, sched_flush_cb, sc);
    sc->flow_ev = evtimer_new(base, sched_flow_cb, sc);
    sc->asking_tail = &sc->asking;
    if (store_has_flow(s)) {
        sc->fc = flow_cache_new((size_t)cfg->flow_holds_max);
        sc->snap_ev = event_new(base, -1, EV_PERSIST, sched_snap_tick, sc);
    }
    sc->bk = xcalloc((size_t)sc->nb, sizeof(bucket_scan));
    if (!sc->w || !sc->tick_ev || !sc->wheel_ev || !sc->flush_ev || !sc->flow_ev ||
        (sc->fc && !sc->snap_ev)) {
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

void sched_set_warm(sched *sc, sched_warm_fn *fn, void *priv)
{
    sc->warm = fn;
    sc->warm_priv = priv;
}

void sched_poll(sched *sc)
{
    sched_wheel_cb(-1, 0, sc);
}

void sched_start(sched *sc)
{
    if (sc->snap_ev) {
        struct timeval tv = {0, FLOW_SNAPSHOT_MS * 1000};
        event_add(sc->snap_ev, &tv);
        sched_flow_refresh(sc);
    }
    sched_tick_cb(-1, 0, sc);
}

void sched_stop(sched *sc)
{
    sc->stopping = 1;
    event_del(sc->tick_ev);
    event_del(sc->wheel_ev);
    if (sc->snap_ev) event_del(sc->snap_ev);
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
    cJSON_AddNumberToObject(obj, "recording", sc->recording);
    cJSON_AddNumberToObject(obj, "jobs_kept", sc->nspare);
    if (sc->fc) cJSON_AddNumberToObject(obj, "flow_loads", (double)sc->flow_loads);
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
    sched_spare_drop(sc, sc->nspare);
    if (sc->w) wheel_free(sc->w);
    if (sc->tick_ev) event_free(sc->tick_ev);
    if (sc->wheel_ev) event_free(sc->wheel_ev);
    if (sc->wheel_fd >= 0) close(sc->wheel_fd);
    if (sc->flush_ev) event_free(sc->flush_ev);
    if (sc->flow_ev) event_free(sc->flow_ev);
    if (sc->snap_ev) event_free(sc->snap_ev);
    flow_cache_free(sc->fc);
    free(sc->enq.r);
    free(sc->ends.r);
    free(sc->settle);
    free(sc->warm_cbs);
    free(sc->bk);
    free(sc);
}
