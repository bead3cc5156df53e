/* sched.c -- see sched.h. */
#include "sched.h"

#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "util.h"
#include "wheel.h"

#define SETTLE_TRIES 40
#define SETTLE_BACKOFF_MAX_MS 2000
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
    char wmkey[96];
} bucket_scan;

struct sched {
    struct event_base *base;
    store *s;
    const config *cfg;
    dispatch *d;
    wheel *w;
    struct event *tick_ev;
    struct event *wheel_ev;
    bucket_scan *bk;
    int nb;
    int held;            /* jobs claimed and not yet settled */
    int calling;         /* of those, in the dispatch pool */
    int pending;         /* scheduler Redis calls in flight */
    int starved;         /* a pass stopped for lack of room */
    int stopping;
    job *waiting;        /* jobs on the wheel or being fetched */
    int64_t claimed, fired, settled;
    int64_t backlog_until_ms; /* overdue claims gather until then */
    struct chain *batches;  /* settle batches filling in this loop turn */
    struct event *flush_ev;
    int64_t warn_ms;     /* last warning logged by sched_warn */
    int warn_quiet;      /* warnings left out since */
};

#define WARN_EVERY_MS 5000

/* Warnings of a Redis that fails for a while (one per bucket per tick, one
 * per task being recorded) are logged at most once per WARN_EVERY_MS, with
 * the count of those left out. */
static void sched_warn(sched *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sched_warn(sched *sc, const char *fmt, ...)
{
    int64_t now = store_now_ms(sc->s);
    char msg[512];
    va_list ap;
    if (now - sc->warn_ms < WARN_EVERY_MS) {
        sc->warn_quiet++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (sc->warn_quiet)
        log_warn("%s (and %d more warnings since the last one)", msg, sc->warn_quiet);
    else
        log_warn("%s", msg);
    sc->warn_ms = now;
    sc->warn_quiet = 0;
}

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

static void job_free(job *j)
{
    free(j->spec);
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
    job_free(j);
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
    job *j = (job *)((char *)t - offsetof(job, timer));
    (void)w;
    sched_unhold(sc, j);
    sc->calling++;
    sc->fired++;
    dispatch_submit(sc->d, j);
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

/* ---- Redis call chains with retry -------------------------------------- */

/* One step of a settle or release chain: a script on one slice, retried
 * when Redis cannot be reached (every step is idempotent). */
typedef struct step {
    store_script sc;
    int nkeys, nargs;
    char keys[5][128];
    char *args;             /* the arguments, each NUL-terminated (owned) */
    size_t len, cap;
} step;

/* The steps recording one attempt, or (a batch) one settle step recording
 * the attempts of several jobs of one home slice. */
typedef struct chain {
    sched *sc;
    job **jobs;
    int njobs;
    step steps[3];
    int n, at, tries;
    int64_t retry_due_ms;   /* a retry was scheduled for then (0: none) */
    struct event *retry_ev;
    struct chain *next;     /* open batches */
} chain;

#define SETTLE_BATCH 256
#define SETTLE_GATHER_MS 5   /* see sched_batch_settle */

static void chain_run(chain *c);

static int sched_bucket_of(const char *slice)
{
    const char *dot = strchr(slice, '.');
    return dot ? atoi(dot + 1) : 0;
}

static void chain_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    chain_run(arg);
}

static void chain_done(chain *c)
{
    sched *sc = c->sc;
    if (c->retry_ev) event_free(c->retry_ev);
    /* a retry due within the lookahead is claimed now, not at the next tick */
    if (c->retry_due_ms && c->retry_due_ms < store_now_ms(sc->s) + sc->cfg->lookahead_ms)
        sched_kick(sc, sched_bucket_of(c->jobs[0]->home));
    for (int i = 0; i < c->njobs; i++) {
        sc->settled++;
        sched_job_gone(sc, c->jobs[i]);
    }
    for (int i = 0; i < c->n; i++) free(c->steps[i].args);
    free(c->jobs);
    free(c);
}

static void chain_cb(redisReply *r, const char *err, void *priv)
{
    chain *c = priv;
    sched *sc = c->sc;
    sc->pending--;
    /* An error reply (a write refused: OOM, NOPERM, a slot mid-migration past
     * the redis timeout) is a step not taken, like a lost connection: the
     * chain must not go on to the next step, which may drop the lease that
     * is all that still leads back to the task. */
    if (!r || r->type == REDIS_REPLY_ERROR) {
        if (r) err = r->str;
        if (++c->tries >= SETTLE_TRIES) {
            /* the lease in Redis will expire and the task run again */
            log_error("task %s%s: giving up recording attempt %d: %s", c->jobs[0]->id,
                      c->njobs > 1 ? " and others" : "", c->jobs[0]->attempt, err);
            chain_done(c);
            return;
        }
        if (c->tries == 1)
            sched_warn(sc, "task %s%s: recording attempt %d: %s (retrying)", c->jobs[0]->id,
                     c->njobs > 1 ? " and others" : "", c->jobs[0]->attempt, err);
        int64_t ms = 50LL << (c->tries < 6 ? c->tries : 6);
        if (ms > SETTLE_BACKOFF_MAX_MS) ms = SETTLE_BACKOFF_MAX_MS;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        if (!c->retry_ev) c->retry_ev = evtimer_new(sc->base, chain_retry_cb, c);
        evtimer_add(c->retry_ev, &tv);
        return;
    }
    c->tries = 0;
    if (++c->at < c->n) chain_run(c);
    else chain_done(c);
}

static void chain_run(chain *c)
{
    step *st = &c->steps[c->at];
    const char *keys[5];
    const char **args = xmalloc(sizeof(*args) * (size_t)st->nargs);
    for (int i = 0; i < st->nkeys; i++) keys[i] = st->keys[i];
    for (int i = 0, at = 0; i < st->nargs; i++) {
        args[i] = st->args + at;
        at += (int)strlen(args[i]) + 1;
    }
    c->sc->pending++;
    store_eval(c->sc->s, st->sc, st->nkeys, keys, st->nargs, args, chain_cb, c);
    free(args);
}

static step *chain_add(chain *c, store_script script, const char *slice, const int *which,
                       int nkeys)
{
    step *st = &c->steps[c->n++];
    slice_keys k;
    store_slice_keys(c->sc->s, slice, &k);
    st->sc = script;
    st->nkeys = nkeys;
    for (int i = 0; i < nkeys; i++) memcpy(st->keys[i], k.k[which[i]], sizeof(st->keys[i]));
    return st;
}

static void step_arg(step *st, const char *a, size_t n)
{
    if (st->len + n + 1 > st->cap) {
        st->cap = (st->len + n + 1) * 2 + 64;
        st->args = xrealloc(st->args, st->cap);
    }
    memcpy(st->args + st->len, a, n);
    st->args[st->len + n] = '\0';
    st->len += n + 1;
    st->nargs++;
}

static void step_str(step *st, const char *s)
{
    step_arg(st, s, strlen(s));
}

static void step_int(step *st, long long v)
{
    char buf[24], *p = buf + sizeof(buf);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do *--p = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) *--p = '-';
    step_arg(st, p, (size_t)(buf + sizeof(buf) - p));
}

static const int KEYS_SETTLE[] = {0, 1, 2, 3};
static const int KEYS_PTR[] = {0, 3, 4};

/* The settle step's record of job j (settle.lua takes groups of 8). */
static void step_settle_job(step *st, const job *j, const char *outcome, int64_t next_due,
                            const char *next_slice)
{
    step_str(st, j->id);
    step_str(st, outcome);
    step_int(st, j->attempt);
    /* a success keeps its status only when something went wrong after it
     * (the body cut off): the rest need not cost Redis the bytes */
    if (j->status_code && (!j->ok || j->err[0])) step_int(st, j->status_code);
    else step_str(st, "");
    step_str(st, j->err);
    step_int(st, next_due);
    step_int(st, strcmp(j->src, j->home) == 0);
    step_str(st, next_slice);
}

static step *chain_settle_step(chain *c)
{
    step *st = chain_add(c, SCRIPT_SETTLE, c->jobs[0]->home, KEYS_SETTLE, 4);
    step_int(st, c->sc->cfg->retention_ms);
    return st;
}

static void chain_settle(chain *c, const char *outcome, int64_t next_due, const char *next_slice)
{
    step_settle_job(chain_settle_step(c), c->jobs[0], outcome, next_due, next_slice);
}

static void chain_ptr(chain *c, const char *slice, const char *op, int64_t due, int64_t to)
{
    step *st = chain_add(c, SCRIPT_PTR, slice, KEYS_PTR, 3);
    step_str(st, c->jobs[0]->id);
    step_str(st, op);
    step_int(st, due);
    step_int(st, to);
}

static chain *chain_new(sched *sc, job *j)
{
    chain *c = xcalloc(1, sizeof(*c));
    c->sc = sc;
    c->jobs = xmalloc(sizeof(job *));
    c->jobs[0] = j;
    c->njobs = 1;
    return c;
}

/* Final outcomes of attempts leased in their home slice are one settle step
 * each: those finishing within SETTLE_GATHER_MS go to Redis as one call per
 * home slice (sent by sched_flush_cb). Under a burst that is tens of outcomes
 * a call rather than a few; the outcome is recorded a few ms later, and the
 * lease (lease_margin_ms past the attempt's timeout) covers the wait. */
static void sched_batch_settle(sched *sc, job *j, const char *outcome)
{
    chain *c;
    for (c = sc->batches; c; c = c->next)
        if (strcmp(c->jobs[0]->home, j->home) == 0 && c->njobs < SETTLE_BATCH) break;
    if (!c) {
        c = chain_new(sc, j);
        chain_settle_step(c);
        c->next = sc->batches;
        sc->batches = c;
        c->njobs = 0;
        if (!event_pending(sc->flush_ev, EV_TIMEOUT, NULL)) {
            struct timeval tv = {0, SETTLE_GATHER_MS * 1000};
            event_add(sc->flush_ev, &tv);
        }
    }
    c->jobs = xrealloc(c->jobs, sizeof(job *) * (size_t)(c->njobs + 1));
    c->jobs[c->njobs++] = j;
    step_settle_job(&c->steps[0], j, outcome, 0, "");
}

static void sched_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    sched *sc = arg;
    chain *list = sc->batches;
    (void)fd, (void)what;
    sc->batches = NULL;
    while (list) {
        chain *c = list;
        list = c->next;
        c->next = NULL;
        chain_run(c);
    }
}

/* An attempt finished: record it, as ordered steps on one slice each. A crash
 * between steps can repeat an attempt, never lose one: the retry's pointer is
 * written before the home record says so, and the lease is dropped last. */
void sched_on_done(sched *sc, job *j)
{
    sc->calling--;
    if (j->aborted) {
        /* stopped mid-call: the lease stays, so it runs again after expiry */
        sched_job_gone(sc, j);
        return;
    }
    int local = strcmp(j->src, j->home) == 0;
    int64_t now = store_now_ms(sc->s);
    int64_t delay_ms;
    if (j->uncounted) {
        /* tickd's own failure (out of descriptors...): the receiver was never
         * called, so this was no attempt; the count stays, and it goes again
         * in a second or two */
        j->attempt--;
        delay_ms = UNCOUNTED_RETRY_MS + random() % UNCOUNTED_RETRY_MS;
        sched_warn(sc, "task %s: callback not made (%s); trying again in %lld ms without counting an "
                 "attempt", j->id, j->err, (long long)delay_ms);
    } else if (j->ok || j->permanent || j->attempt >= j->max_attempts) {
        log_debug("task %s attempt %d: %s", j->id, j->attempt, j->ok ? "ok" : j->err);
        if (!j->ok) log_info("task %s failed after %d attempts: %s", j->id, j->attempt, j->err);
        if (local) {
            sched_batch_settle(sc, j, j->ok ? "ok" : "fail");
            return;
        }
        chain *c = chain_new(sc, j);
        chain_settle(c, j->ok ? "ok" : "fail", 0, "");
        chain_ptr(c, j->src, "done", 0, 0);
        chain_run(c);
        return;
    } else {
        double jitter = (double)(random() % 1000) / 1000.0;
        delay_ms = task_backoff_ms(j->backoff_ms, j->attempt, jitter);
    }
    chain *c = chain_new(sc, j);
    int64_t next = now + delay_ms;
    char slice[TASK_SLICE_MAX];
    task_slice_name(next, sched_bucket_of(j->home), slice);
    log_debug("task %s attempt %d: %s; retry at %lld", j->id, j->attempt, j->err,
              (long long)next);
    c->retry_due_ms = next;
    if (local && strcmp(slice, j->home) == 0) {
        chain_settle(c, "retry", next, "");
    } else {
        chain_ptr(c, slice, "add", next, j->timeout_ms);
        chain_settle(c, "retry", next, slice);
        if (!local && strcmp(slice, j->src) != 0) chain_ptr(c, j->src, "done", 0, 0);
    }
    chain_run(c);
}

/* Give an unfired claim back: due again where it was. */
static void sched_release(sched *sc, job *j)
{
    chain *c = chain_new(sc, j);
    chain_settle(c, "release", 0, "");
    if (strcmp(j->src, j->home) != 0) chain_ptr(c, j->src, "requeue", j->due_ms, 0);
    chain_run(c);
}

/* ---- claiming ---------------------------------------------------------- */

static void scan_claim(bucket_scan *bs);
static void scan_finish(bucket_scan *bs);

typedef struct fetch_ctx {
    sched *sc;
    job *j;
} fetch_ctx;

static void sched_drop_ptr(sched *sc, job *j)
{
    chain *c = chain_new(sc, j);
    chain_ptr(c, j->src, "done", 0, 0);
    chain_run(c);
}

static void sched_fetch_cb(redisReply *r, const char *err, void *priv)
{
    fetch_ctx *f = priv;
    sched *sc = f->sc;
    job *j = f->j;
    free(f);
    sc->pending--;
    sched_unhold(sc, j);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        /* the lease on the pointer expires and it is claimed again */
        sched_warn(sc, "task %s: fetch failed: %s", j->id,
                   r && r->type == REDIS_REPLY_ERROR ? r->str : err);
        sched_job_gone(sc, j);
        return;
    }
    if (strcmp(r->element[0]->str, "ok") != 0 || r->elements != 3 ||
        r->element[2]->type != REDIS_REPLY_STRING) {
        /* cancelled, or settled by a duplicate: the pointer is spent */
        sched_drop_ptr(sc, j);
        return;
    }
    j->attempt = (int)r->element[1]->integer;
    j->spec = xstrndup(r->element[2]->str, r->element[2]->len);
    if (sc->stopping) {
        sched_release(sc, j);
        return;
    }
    sched_hold(sc, j);
    sched_wait(sc, j);
}

static void sched_take(sched *sc, const char *slice, redisReply **e)
{
    job *j = xcalloc(1, sizeof(*j));
    snprintf(j->id, sizeof(j->id), "%.*s", (int)e[0]->len, e[0]->str);
    snprintf(j->src, sizeof(j->src), "%s", slice);
    j->due_ms = e[1]->integer;
    j->attempt = (int)e[2]->integer;
    wheel_timer_init(&j->timer, sched_fire, sc);
    sc->held++;
    sc->claimed++;
    char key[TASK_KEY_MAX + 1];
    int64_t at;
    if (task_id_parse(j->id, j->home, &at, key) != 0) {
        log_error("claimed an id tickd did not make: %s (left leased)", j->id);
        sched_job_gone(sc, j);
        return;
    }
    sched_hold(sc, j);
    if (e[3]->type != REDIS_REPLY_STRING) {
        /* a retry pointer: the record is in the home slice */
        fetch_ctx *f = xmalloc(sizeof(*f));
        slice_keys k;
        f->sc = sc;
        f->j = j;
        store_slice_keys(sc->s, j->home, &k);
        const char *keys[] = {k.k[1]};
        const char *args[] = {j->id};
        sc->pending++;
        store_eval(sc->s, SCRIPT_FETCH, 1, keys, 1, args, sched_fetch_cb, f);
        return;
    }
    j->spec = xstrndup(e[3]->str, e[3]->len);
    if (sc->stopping) {
        sched_unhold(sc, j);
        sched_release(sc, j);
        return;
    }
    sched_wait(sc, j);
}

static void scan_claim_cb(redisReply *r, const char *err, void *priv)
{
    bucket_scan *bs = priv;
    sched *sc = bs->sc;
    char slice[TASK_SLICE_MAX];
    sc->pending--;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 || (r->elements - 3) % 4) {
        sched_warn(sc, "claim bucket %d: %s", bs->b,
                 r ? (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply") : err);
        if (bs->first_open < 0) bs->first_open = bs->minute;
        scan_finish(bs);
        return;
    }
    task_slice_name(bs->minute * 60000, bs->b, slice);
    for (size_t i = 3; i < r->elements; i += 4) sched_take(sc, slice, &r->element[i]);
    long long due_left = r->element[0]->integer, run_left = r->element[1]->integer;
    long long taken = r->element[2]->integer;
    if (taken >= bs->limit && !sc->stopping) {
        scan_claim(bs); /* the slice had more than one batch */
        return;
    }
    int64_t now = store_now_ms(sc->s);
    int passable = due_left == 0 && run_left == 0 &&
                   (bs->minute + 1) * 60000 + sc->cfg->slice_grace_ms <= now;
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
    char slice[TASK_SLICE_MAX], lookahead[24], limit[24], margin[24];
    slice_keys k;
    int room = sched_room(sc);
    if (room == 0 || sc->stopping) {
        if (room == 0) sc->starved = 1;
        if (bs->first_open < 0) bs->first_open = bs->minute;
        scan_finish(bs);
        return;
    }
    bs->limit = room < sc->cfg->batch ? room : (int)sc->cfg->batch;
    task_slice_name(bs->minute * 60000, bs->b, slice);
    store_slice_keys(sc->s, slice, &k);
    snprintf(lookahead, sizeof(lookahead), "%lld", (long long)sc->cfg->lookahead_ms);
    snprintf(limit, sizeof(limit), "%d", bs->limit);
    snprintf(margin, sizeof(margin), "%lld", (long long)sc->cfg->lease_margin_ms);
    const char *keys[] = {k.k[0], k.k[1], k.k[2], k.k[3], k.k[4]};
    const char *args[] = {lookahead, limit, margin};
    sc->pending++;
    store_eval(sc->s, SCRIPT_CLAIM, 5, keys, 3, args, scan_claim_cb, bs);
}

static void scan_start(bucket_scan *bs);

static void scan_wm_cb(redisReply *r, const char *err, void *priv)
{
    bucket_scan *bs = priv;
    bs->sc->pending--;
    if (!r || r->type == REDIS_REPLY_ERROR)
        sched_warn(bs->sc, "watermark bucket %d: %s", bs->b, r ? r->str : err);
    bs->active = 0;
    if (bs->again && !bs->sc->stopping) scan_start(bs);
}

static void scan_finish(bucket_scan *bs)
{
    sched *sc = bs->sc;
    int64_t to = bs->first_open >= 0 ? bs->first_open : bs->end_minute + 1;
    if (to > bs->wm) {
        char from_s[24], to_s[24];
        snprintf(from_s, sizeof(from_s), "%lld", (long long)bs->wm);
        snprintf(to_s, sizeof(to_s), "%lld", (long long)to);
        const char *keys[] = {bs->wmkey};
        const char *args[] = {from_s, to_s};
        sc->pending++;
        store_eval(sc->s, SCRIPT_WM, 1, keys, 2, args, scan_wm_cb, bs);
        return;
    }
    bs->active = 0;
    if (bs->again && !sc->stopping) scan_start(bs);
}

static void sched_ignore_cb(redisReply *r, const char *err, void *priv)
{
    (void)r, (void)err;
    ((sched *)priv)->pending--;
}

static void scan_get_cb(redisReply *r, const char *err, void *priv)
{
    bucket_scan *bs = priv;
    sched *sc = bs->sc;
    sc->pending--;
    int64_t now = store_now_ms(sc->s);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        sched_warn(sc, "watermark bucket %d: %s", bs->b, r ? r->str : err);
        bs->active = 0;
        return;
    }
    if (r->type == REDIS_REPLY_STRING) {
        bs->wm = strtoll(r->str, NULL, 10);
    } else {
        /* deleted under us (sched_create set it): start again a minute back */
        char v[24];
        bs->wm = now / 60000 - 1;
        log_error("%s is missing; scanning from minute %lld on", bs->wmkey, (long long)bs->wm);
        snprintf(v, sizeof(v), "%lld", (long long)bs->wm);
        const char *argv[] = {"SET", bs->wmkey, v, "NX"};
        sc->pending++;
        rc_command(sc->s->rc, bs->wmkey, sched_ignore_cb, sc, 4, argv, NULL);
    }
    bs->minute = bs->wm;
    bs->end_minute = (now + sc->cfg->lookahead_ms) / 60000;
    bs->first_open = -1;
    if (bs->minute > bs->end_minute) bs->minute = bs->end_minute;
    scan_claim(bs);
}

static void scan_start(bucket_scan *bs)
{
    sched *sc = bs->sc;
    bs->active = 1;
    bs->again = 0;
    const char *argv[] = {"GET", bs->wmkey};
    sc->pending++;
    rc_command(sc->s->rc, bs->wmkey, scan_get_cb, bs, 2, argv, NULL);
}

void sched_kick(sched *sc, int bucket)
{
    bucket_scan *bs = &sc->bk[bucket];
    if (sc->stopping) return;
    if (bs->active) bs->again = 1;
    else scan_start(bs);
}

static void sched_time_cb(redisReply *r, const char *err, void *priv)
{
    sched *sc = priv;
    (void)err;
    sc->pending--;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t local = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        int64_t redis_ms = strtoll(r->element[0]->str, NULL, 10) * 1000 +
                           strtoll(r->element[1]->str, NULL, 10) / 1000;
        /* the reply took a loopback round trip at most: good to the ms */
        sc->s->clock_offset_ms = redis_ms - local;
    }
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
    const char *argv[] = {"TIME"};
    sc->pending++;
    rc_node_command(sc->s->rc, 0, sched_time_cb, sc, 1, argv, NULL);
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
    int64_t minute = store_now_ms(s) / 60000 - 1;
    for (int b = 0; b < sc->nb; b++) {
        bucket_scan *bs = &sc->bk[b];
        bs->sc = sc;
        bs->b = b;
        snprintf(bs->wmkey, sizeof(bs->wmkey), "%s:wm:{%d}", s->prefix, b);
        /* A new keyspace starts scanning a minute back; an existing one keeps
         * its watermark, however old: that is the catch-up. */
        redisReply *r = rc_sync_command(s->rc, bs->wmkey, err, errlen, "SET %s %lld NX",
                                        bs->wmkey, (long long)minute);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            if (r) {
                snprintf(err, errlen, "%s: %s", bs->wmkey, r->str);
                freeReplyObject(r);
            }
            sched_free(sc);
            return NULL;
        }
        freeReplyObject(r);
    }
    return sc;
}

void sched_set_dispatch(sched *sc, dispatch *d) { sc->d = d; }

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
        if (!wheel_pending(&j->timer)) continue; /* being fetched: released on reply */
        wheel_cancel(sc->w, &j->timer);
        sched_unhold(sc, j);
        sched_release(sc, j);
    }
    log_info("scheduler stopped: %d claimed task%s handed back or settling, %d calling",
             sc->held - sc->calling, sc->held - sc->calling == 1 ? "" : "s", sc->calling);
}

int sched_calling(const sched *sc) { return sc->calling; }

void sched_stats(const sched *sc, cJSON *obj)
{
    cJSON_AddNumberToObject(obj, "claimed", (double)sc->claimed);
    cJSON_AddNumberToObject(obj, "fired", (double)sc->fired);
    cJSON_AddNumberToObject(obj, "settled", (double)sc->settled);
    cJSON_AddNumberToObject(obj, "held", sc->held);
    cJSON_AddNumberToObject(obj, "calling", sc->calling);
    if (sc->d) cJSON_AddNumberToObject(obj, "hosts", (double)dispatch_hosts(sc->d));
}

int sched_idle(const sched *sc) { return sc->held == 0 && sc->pending == 0; }

void sched_free(sched *sc)
{
    if (!sc) return;
    for (job *j = sc->waiting, *n; j; j = n) {
        n = j->wnext;
        job_free(j);
    }
    if (sc->w) wheel_free(sc->w);
    if (sc->tick_ev) event_free(sc->tick_ev);
    if (sc->wheel_ev) event_free(sc->wheel_ev);
    if (sc->flush_ev) event_free(sc->flush_ev);
    free(sc->bk);
    free(sc);
}
