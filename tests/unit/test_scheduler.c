/* test_sched.c -- the scheduler against a fake store and a fake clock (as
 * wahern/timeout tests its wheel): the store answers what each test scripts,
 * records what the scheduler asks of it, and its clock moves only when the
 * test moves it. Fired jobs go to a fake pool; the test ends their attempts. */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/scheduler.h"
#include "base/util.h"

#include "testutil.h"

#define MAXL 64
/* what every fake lease holds: three attempts a second apart, 10 s each */
#define FAKE_SPEC "{\"callback_url\":\"http://cb.test/\",\"method\":\"POST\",\"retry\":{\"max_attempts\":3,\"backoff_ms\":1000},\"timeout_ms\":10000}"

typedef struct flease {
    int bucket;
    int64_t minute;
    char id[TASK_ID_MAX];
    int64_t due_ms;
    int attempt;
    int taken;
} flease;

typedef struct fake {
    store base;
    struct event_base *ev;
    int64_t now;                 /* the fake clock */
    int64_t wm[4];
    flease l[MAXL];
    int nl;
    int64_t fail_minute;         /* claims of this minute fail (-1: none) */
    int64_t claimed[256];        /* minutes claimed, in order */
    int cbucket[256], climit[256]; /* their buckets and limits */
    int ccounts[256];              /* and whether they asked for the counts */
    int64_t creach[256];         /* and how far ahead they looked */
    int nclaimed;
    int wm_gets;                 /* watermark reads */
    int settle_calls, settle_size[64];
    store_attempt settled[MAXL]; /* strings copied: the jobs go once settled */
    char sid[MAXL][TASK_ID_MAX], serr[MAXL][256];
    int nsettled;
    int64_t wm_to;               /* the last watermark advance asked for */
    job *fired[MAXL];            /* the fake pool */
    int nfired;
    int hold_settles;            /* settles are answered when the test says */
    void *held_owner[MAXL];
    store_settled_fn *held_cb;
    void *held_priv;
    int nheld;
} fake;

#define FK(s) container_of(s, fake, base)

/* ---- answers from the loop --------------------------------------------- */

typedef struct ans {
    fake *f;
    int kind;
    void *cb, *priv;
    store_claim claim;
    int64_t v;
    void *owner;
} ans;

enum { A_CLAIM, A_WM, A_SETTLED };

static void ans_cb(evutil_socket_t fd, short what, void *arg)
{
    ans *a = arg;
    (void)fd, (void)what;
    if (a->kind == A_CLAIM) {
        ((store_claim_fn *)a->cb)(&a->claim, a->priv);
        free(a->claim.leases);
    } else if (a->kind == A_WM) {
        ((store_wm_fn *)a->cb)(a->v, NULL, a->priv);
    } else {
        ((store_settled_fn *)a->cb)(a->owner, NULL, a->priv);
    }
    free(a);
}

static ans *answer(fake *f, int kind, void *cb, void *priv)
{
    ans *a = xcalloc(1, sizeof(*a));
    struct timeval tv = {0, 0};
    a->f = f;
    a->kind = kind;
    a->cb = cb;
    a->priv = priv;
    assert_int_equal(event_base_once(f->ev, -1, EV_TIMEOUT, ans_cb, a, &tv), 0);
    return a;
}

/* ---- the fake store ---------------------------------------------------- */

static void fk_claim(store *s, int bucket, int64_t minute, const store_claim_ask *ask,
                     store_claim_fn *cb, void *priv)
{
    fake *f = FK(s);
    int limit = ask->limit, far = 0;
    ans *a = answer(f, A_CLAIM, (void *)cb, priv);
    assert_true(f->nclaimed < 256);
    f->cbucket[f->nclaimed] = bucket;
    f->climit[f->nclaimed] = limit;
    f->creach[f->nclaimed] = ask->reach_ms;
    f->ccounts[f->nclaimed] = ask->counts;
    f->claimed[f->nclaimed++] = minute;
    if (minute == f->fail_minute) {
        a->claim.err = "ERR this slice cannot be claimed";
        return;
    }
    a->claim.leases = xcalloc(MAXL, sizeof(store_lease));
    for (int i = 0; i < f->nl; i++) {
        flease *l = &f->l[i];
        if (l->taken || l->bucket != bucket || l->minute != minute) continue;
        if (l->due_ms >= f->now + ask->reach_ms) continue;
        if (l->due_ms >= f->now + ask->near_ms && far == ask->far_limit) {
            a->claim.due_left++;
            continue;
        }
        far += l->due_ms >= f->now + ask->near_ms;
        if (a->claim.n == limit) {
            a->claim.due_left++;
            continue;
        }
        l->taken = 1;
        store_lease *o = &a->claim.leases[a->claim.n++];
        o->id = l->id;
        o->due_ms = l->due_ms;
        o->attempt = l->attempt;
        o->spec = task_spec_read(FAKE_SPEC, strlen(FAKE_SPEC));
    }
    a->claim.taken = a->claim.n;
}

static void fk_settle(store *s, const store_attempt *as, int n, store_settled_fn *cb, void *priv)
{
    fake *f = FK(s);
    f->settle_size[f->settle_calls++] = n;
    for (int i = 0; i < n; i++) {
        int k = f->nsettled++;
        f->settled[k] = as[i];
        snprintf(f->sid[k], sizeof(f->sid[k]), "%s", as[i].id);
        snprintf(f->serr[k], sizeof(f->serr[k]), "%s", as[i].err);
        f->settled[k].id = f->sid[k];
        f->settled[k].err = f->serr[k];
        f->settled[k].src = NULL;
        if (f->hold_settles) {
            f->held_cb = cb;
            f->held_priv = priv;
            f->held_owner[f->nheld++] = as[i].owner;
            continue;
        }
        answer(f, A_SETTLED, (void *)cb, priv)->owner = as[i].owner;
    }
}

/* The settles held back are answered (in the next loop pass). */
static void release_settles(fake *f)
{
    f->hold_settles = 0;
    for (int i = 0; i < f->nheld; i++)
        answer(f, A_SETTLED, (void *)f->held_cb, f->held_priv)->owner = f->held_owner[i];
    f->nheld = 0;
}

static int fk_wm_init(store *s, int64_t minute, char *err, size_t errlen)
{
    fake *f = FK(s);
    (void)err, (void)errlen;
    for (int b = 0; b < 4; b++)
        if (f->wm[b] < 0) f->wm[b] = minute;
    return 0;
}

static void fk_wm_get(store *s, int bucket, store_wm_fn *cb, void *priv)
{
    FK(s)->wm_gets++;
    answer(FK(s), A_WM, (void *)cb, priv)->v = FK(s)->wm[bucket];
}

static void fk_wm_advance(store *s, int bucket, int64_t from, int64_t to, store_wm_fn *cb,
                          void *priv)
{
    fake *f = FK(s);
    f->wm_to = to;
    if (f->wm[bucket] == from && to > from) f->wm[bucket] = to;
    answer(f, A_WM, (void *)cb, priv)->v = f->wm[bucket];
}

static int64_t fk_now_us(const store *s) { return FK(s)->now * 1000; }
static void fk_nothing(store *s) { (void)s; }
static void fk_stats(const store *s, cJSON *o) { (void)s, (void)o; }

static const store_type fake_type = {
    .name = "fake", .claim = fk_claim, .settle = fk_settle, .wm_init = fk_wm_init,
    .wm_get = fk_wm_get, .wm_advance = fk_wm_advance, .now_us = fk_now_us,
    .sync_clock = fk_nothing, .stats = fk_stats, .close = fk_nothing, .free = fk_nothing,
};

/* ---- fixture ----------------------------------------------------------- */

typedef struct fixture {
    fake f;
    config cfg;
    sched *sc;
    int64_t m;                   /* the minute of now */
} fixture;

static void submit(job *j, void *priv)
{
    fake *f = priv;
    assert_true(f->nfired < MAXL);
    f->fired[f->nfired++] = j;
}

static int setup_with(void **state, int buckets, int max_inflight, int batch)
{
    fixture *x = xcalloc(1, sizeof(*x));
    char err[256];
    fake *f = &x->f;
    f->base.type = &fake_type;
    f->base.cfg = &x->cfg;
    f->ev = event_base_new();
    f->now = 1795000000000LL + 30000; /* 2026-11-18, mid-minute */
    f->fail_minute = -1;
    for (int b = 0; b < 4; b++) f->wm[b] = -1;
    config_defaults(&x->cfg);
    x->cfg.buckets = buckets;
    if (max_inflight) x->cfg.max_inflight = max_inflight;
    if (batch) x->cfg.batch = batch;
    x->m = f->now / 60000;
    x->sc = sched_create(f->ev, &f->base, &x->cfg, err, sizeof(err));
    assert_non_null(x->sc);
    assert_int_equal(f->wm[0], x->m - 1); /* a new keyspace starts a minute back */
    sched_set_submit(x->sc, submit, f);
    *state = x;
    return 0;
}

static int setup(void **state) { return setup_with(state, 1, 0, 0); }
/* room for 8 claimed tasks, claimed 4 at a time */
static int setup_small(void **state) { return setup_with(state, 1, 8, 4); }
static int setup_small4(void **state) { return setup_with(state, 4, 8, 4); }
static int setup_wide4(void **state) { return setup_with(state, 4, 16, 8); }

static void pump(fixture *x, int ms);

static int teardown(void **state)
{
    fixture *x = *state;
    sched_stop(x->sc); /* claims left on the wheel go back; no more are made */
    for (int i = 0; i < x->f.nfired; i++)
        if (x->f.fired[i]) { /* jobs the test left in the pool */
            x->f.fired[i]->cb.aborted = 1;
            sched_on_done(x->sc, x->f.fired[i]);
        }
    release_settles(&x->f);
    /* the outcomes still gathered go, and the store's answers come */
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    sched_free(x->sc);
    event_base_free(x->f.ev);
    free(x);
    return 0;
}

/* Run the loop for `ms` of real time (settles gather for 5 ms). */
static void pump(fixture *x, int ms)
{
    int64_t end = util_mono_ms() + ms;
    do {
        event_base_loop(x->f.ev, EVLOOP_NONBLOCK);
        usleep(500);
    } while (util_mono_ms() < end);
}

static void lease(fixture *x, int64_t minute, int64_t due_ms, const char *key, int attempt)
{
    assert_true(x->f.nl < MAXL);
    flease *l = &x->f.l[x->f.nl++];
    char slice[TASK_SLICE_MAX];
    task_slice_name(minute * 60000, 0, slice);
    task_id_make(slice, due_ms, key, l->id, sizeof(l->id));
    l->minute = minute;
    l->due_ms = due_ms;
    l->attempt = attempt;
}

/* n tasks due now in the minute of now, keys prefix0.. */
static void leases_due_now(fixture *x, int n, const char *prefix)
{
    char key[16];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s%d", prefix, i);
        lease(x, x->m, x->f.now, key, 1);
    }
}

/* End the attempt of fired job i. */
static void finish(fixture *x, int i, int ok)
{
    job *j = x->f.fired[i];
    x->f.fired[i] = NULL;
    j->cb.ok = ok;
    j->cb.status_code = ok ? 200 : 500;
    if (!ok) snprintf(j->cb.err, sizeof(j->cb.err), "HTTP 500");
    sched_on_done(x->sc, j);
}

/* Claim what is due now and fire it (to the fake pool). */
static void claim_and_fire(fixture *x)
{
    sched_kick(x->sc, 0);
    pump(x, 10);
    sched_poll(x->sc);
}

/* ---- tests ------------------------------------------------------------- */

/* After downtime: the scan starts at the watermark; overdue tasks of every
 * slice fire oldest first; the watermark moves past the drained slices. */
static void test_catch_up_order(void **state)
{
    fixture *x = *state;
    int64_t m = x->m, base = x->f.now;
    x->f.wm[0] = m - 5;
    lease(x, m, base - 100, "now", 1);
    lease(x, m - 2, base - 2 * 60000, "two", 1);
    lease(x, m - 5, base - 5 * 60000 + 10, "five-b", 1);
    lease(x, m - 5, base - 5 * 60000, "five-a", 1);
    lease(x, m - 4, base - 4 * 60000, "four", 1);
    sched_kick(x->sc, 0);
    pump(x, 20);
    /* every slice from the watermark up to now + lookahead, in order */
    assert_true(x->f.nclaimed >= 6);
    for (int i = 0; i < x->f.nclaimed; i++) assert_int_equal(x->f.claimed[i], m - 5 + i);
    x->f.now += 25; /* past the backlog's gathering */
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 5);
    for (int i = 1; i < 5; i++) assert_true(x->f.fired[i - 1]->cb.due_ms <= x->f.fired[i]->cb.due_ms);
    assert_non_null(strstr(x->f.fired[0]->cb.id, "five-a"));
    /* slices whose minute ended more than the grace ago are passed */
    int64_t passable = (x->f.now - x->cfg.slice_grace_ms) / 60000;
    assert_int_equal(x->f.wm[0], passable);
}

/* A slice whose claim fails holds the watermark back; the slices after it
 * are claimed in the same pass. */
static void test_failing_slice(void **state)
{
    fixture *x = *state;
    int64_t m = x->m, base = x->f.now;
    x->f.wm[0] = m - 5;
    x->f.fail_minute = m - 3;
    lease(x, m - 2, base - 2 * 60000, "after", 1);
    lease(x, m, base + 100, "now", 1);
    sched_kick(x->sc, 0);
    pump(x, 20);
    int saw_after = 0;
    for (int i = 0; i < x->f.nclaimed; i++) saw_after |= x->f.claimed[i] == m - 2;
    assert_true(saw_after);
    x->f.now += 200;
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 2);
    assert_int_equal(x->f.wm[0], m - 3);
    /* once it can be claimed, the bucket moves on */
    x->f.fail_minute = -1;
    sched_kick(x->sc, 0);
    pump(x, 20);
    assert_true(x->f.wm[0] > m - 3);
}

/* A failed attempt is recorded as a retry after the backoff (with up to
 * 20 % jitter off it); the pool's job goes once recorded. */
static void test_retry_timing(void **state)
{
    fixture *x = *state;
    lease(x, x->m, x->f.now + 50, "r", 1);
    sched_kick(x->sc, 0);
    pump(x, 10);
    x->f.now += 50;
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 1);
    assert_true(sched_calling(x->sc) == 1);
    int64_t t = x->f.now;
    finish(x, 0, 0);
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    assert_int_equal(x->f.settle_calls, 1);
    store_attempt *a = &x->f.settled[0];
    assert_int_equal(a->outcome, OUT_RETRY);
    assert_int_equal(a->attempt, 1);
    assert_int_equal(a->status_code, 500);
    assert_string_equal(a->err, "HTTP 500");
    assert_true(a->due_ms > t + 800 - 1 && a->due_ms <= t + 1000);
    assert_true(sched_idle(x->sc));
}

/* A failure no retry can change (a destination the policy refuses) is
 * final at its first attempt. */
static void test_permanent_failure(void **state)
{
    fixture *x = *state;
    lease(x, x->m, x->f.now, "p", 1);
    claim_and_fire(x);
    assert_int_equal(x->f.nfired, 1);
    x->f.fired[0]->cb.permanent = 1;
    finish(x, 0, 0);
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    assert_int_equal(x->f.nsettled, 1);
    assert_int_equal(x->f.settled[0].outcome, OUT_FAIL);
    assert_int_equal(x->f.settled[0].attempt, 1);
}

/* A job kept for the next claim comes back as a new one: what the pool and
 * the failure wrote in it is gone, its text buffers read empty (only their
 * first byte is cleared: the rest of each is not read). */
static void test_kept_job_comes_clean(void **state)
{
    fixture *x = *state;
    lease(x, x->m, x->f.now, "k1", 1);
    claim_and_fire(x);
    assert_int_equal(x->f.nfired, 1);
    job *j = x->f.fired[0];
#define FILL(buf, c) (memset((buf), (c), sizeof(buf) - 1), (buf)[sizeof(buf) - 1] = '\0')
    FILL(j->cb.err, 'e');
    FILL(j->flow_reason, 'r');
    FILL(j->queue, 'q');
    FILL(j->dest, 'd');
    FILL(j->park_slice, 'p');
#undef FILL
    j->cb.permanent = j->cb.timed_out = 1;
    j->cb.sent_at_ms = x->f.now;
    j->cb.took_ms = 1234;
    j->cb.retry_after_ms = 5000;
    j->flow_at_ms = j->flow_from_ms = x->f.now;
    j->retry_due_ms = x->f.now + 1000;
    j->far = 1;
    finish(x, 0, 0);
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    assert_int_equal(x->f.nsettled, 1);
    assert_int_equal(x->f.settled[0].outcome, OUT_FAIL);
    /* the next claim takes the kept job */
    lease(x, x->m, x->f.now, "k2", 1);
    claim_and_fire(x);
    assert_int_equal(x->f.nfired, 2);
    job *k = x->f.fired[1];
    assert_ptr_equal(k, j);
    assert_string_equal(k->cb.id, x->f.l[1].id);
    assert_int_equal(k->cb.attempt, 1);
    assert_string_equal(k->cb.err, "");
    assert_string_equal(k->flow_reason, "");
    assert_string_equal(k->queue, "");
    assert_string_equal(k->dest, "");
    assert_string_equal(k->park_slice, "");
    assert_int_equal(k->cb.permanent, 0);
    assert_int_equal(k->cb.timed_out, 0);
    assert_int_equal(k->cb.ok, 0);
    assert_int_equal(k->cb.status_code, 0);
    assert_int_equal(k->cb.sent_at_ms, 0);
    assert_int_equal(k->cb.took_ms, 0);
    assert_int_equal(k->cb.retry_after_ms, 0);
    assert_null(k->cb.answer);
    assert_int_equal(k->flow_at_ms, 0);
    assert_int_equal(k->flow_from_ms, 0);
    assert_int_equal(k->ended_failed, 0);
    assert_int_equal(k->retry_due_ms, 0);
    assert_int_equal(k->far, 0);
    finish(x, 1, 1);
}

/* A callback not made for tickd's own reason (out of descriptors) is no
 * attempt: recorded as a retry in a second or two, the count unchanged. */
static void test_uncounted_failure(void **state)
{
    fixture *x = *state;
    lease(x, x->m, x->f.now, "u", 2);
    claim_and_fire(x);
    assert_int_equal(x->f.nfired, 1);
    x->f.fired[0]->cb.uncounted = 1;
    int64_t t = x->f.now;
    finish(x, 0, 0);
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    assert_int_equal(x->f.nsettled, 1);
    store_attempt *a = &x->f.settled[0];
    assert_int_equal(a->outcome, OUT_RETRY);
    assert_int_equal(a->attempt, 1);
    assert_true(a->due_ms >= t + UNCOUNTED_RETRY_MS && a->due_ms < t + 2 * UNCOUNTED_RETRY_MS);
}

/* Outcomes that end in the same few ms reach the store as one call. */
static void test_settles_batched(void **state)
{
    fixture *x = *state;
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "b%d", i);
        lease(x, x->m, x->f.now + i, key, 1);
    }
    sched_kick(x->sc, 0);
    pump(x, 10);
    x->f.now += 20;
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 10);
    for (int i = 0; i < 10; i++) finish(x, i, 1);
    assert_int_equal(x->f.settle_calls, 0); /* gathering */
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    assert_int_equal(x->f.settle_calls, 1);
    assert_int_equal(x->f.settle_size[0], 10);
    for (int i = 0; i < 10; i++) assert_int_equal(x->f.settled[i].outcome, OUT_OK);
    assert_true(sched_idle(x->sc));
}

/* On stop, claims still waiting for their ms go back, due as they were. */
static void test_hand_back_on_stop(void **state)
{
    fixture *x = *state;
    lease(x, x->m, x->f.now + 1000, "h1", 1);
    lease(x, x->m, x->f.now + 1200, "h2", 2);
    claim_and_fire(x);
    assert_int_equal(x->f.nfired, 0);
    assert_false(sched_idle(x->sc));
    sched_stop(x->sc);
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    assert_int_equal(x->f.settle_calls, 1);
    assert_int_equal(x->f.nsettled, 2);
    for (int i = 0; i < 2; i++) {
        store_attempt *a = &x->f.settled[i];
        assert_int_equal(a->outcome, OUT_RELEASE);
        assert_int_equal(a->due_ms, strstr(a->id, "h1") ? x->f.now + 1000 : x->f.now + 1200);
    }
    assert_true(sched_idle(x->sc));
    /* no claim after stop */
    int n = x->f.nclaimed;
    sched_kick(x->sc, 0);
    pump(x, 5);
    assert_int_equal(x->f.nclaimed, n);
}

/* An attempt the pool aborted is not recorded: its lease expires in the
 * store, which offers the task again, and it is taken again. */
static void test_lease_left_to_expire(void **state)
{
    fixture *x = *state;
    lease(x, x->m, x->f.now, "x", 1);
    claim_and_fire(x);
    assert_int_equal(x->f.nfired, 1);
    job *j = x->f.fired[0];
    x->f.fired[0] = NULL;
    j->cb.aborted = 1;
    sched_on_done(x->sc, j);
    pump(x, 20);
    assert_int_equal(x->f.settle_calls, 0);
    assert_true(sched_idle(x->sc));
    /* the lease ran out: the store has it due again, same attempt */
    x->f.l[0].taken = 0;
    x->f.now += 1000;
    claim_and_fire(x);
    assert_int_equal(x->f.nfired, 2);
    assert_int_equal(x->f.fired[1]->cb.attempt, 1);
}

/* A claim asks for the counts of what is left only where they can pass
 * the slice: its minute and the grace after it are over. */
static void test_counts_asked_only_once_the_minute_is_over(void **state)
{
    fixture *x = *state;
    x->cfg.slice_grace_ms = 2000;
    lease(x, x->m, x->f.now, "now", 1);
    sched_kick(x->sc, 0);
    pump(x, 20);
    int seen = 0;
    for (int i = 0; i < x->f.nclaimed; i++) {
        assert_int_equal(x->f.ccounts[i], x->f.claimed[i] < x->m); /* m - 1: over */
        seen |= 1 << (x->f.claimed[i] == x->m);
    }
    assert_int_equal(seen, 3); /* a claim of each */
}

/* The claims of one kick go out together, one a bucket: together they
 * take no more than the room, not each the whole of it. */
static void test_claims_share_the_room(void **state)
{
    fixture *x = *state;
    leases_due_now(x, 24, "k");
    for (int i = 0; i < 24; i++) x->f.l[i].bucket = i % 4;
    for (int b = 0; b < 4; b++) sched_kick(x->sc, b);
    pump(x, 20);
    assert_int_equal(sched_held(x->sc), 8);
    int taken = 0;
    for (int i = 0; i < x->f.nl; i++) taken += x->f.l[i].taken;
    assert_int_equal(taken, 8);
}

/* A task's place frees when its callback ends, before the store has
 * recorded the outcome: claiming goes on while outcomes wait. Those waiting
 * take at most max_inflight places more. */
static void test_room_frees_when_callbacks_end(void **state)
{
    fixture *x = *state;
    leases_due_now(x, 30, "r");
    x->f.hold_settles = 1;
    claim_and_fire(x);
    assert_int_equal(sched_held(x->sc), 8);
    assert_int_equal(x->f.nfired, 8);
    /* 4 callbacks end; their outcomes are not recorded yet, and claiming
     * goes on */
    for (int i = 0; i < 4; i++) finish(x, i, 1);
    pump(x, SCHED_SETTLE_GATHER_MS + 20);
    assert_int_equal(x->f.nsettled, 4);
    assert_true(sched_held(x->sc) > 8);
    /* every callback ends, none recorded: claiming stops at 16 held (within
     * the least claim, half a batch + 1) */
    for (int round = 0; round < 8; round++) {
        sched_poll(x->sc);
        for (int i = 0; i < x->f.nfired; i++)
            if (x->f.fired[i]) finish(x, i, 1);
        pump(x, 20);
    }
    assert_true(sched_held(x->sc) <= 16 && sched_held(x->sc) > 16 - 3);
    assert_int_equal(x->f.nsettled, sched_held(x->sc));
    int before = 0;
    for (int i = 0; i < x->f.nl; i++) before += x->f.l[i].taken;
    assert_int_equal(before, sched_held(x->sc));
    /* once recorded, their places go to the next claims */
    release_settles(&x->f);
    pump(x, 20);
    assert_true(sched_held(x->sc) > 0);
    int taken = 0;
    for (int i = 0; i < x->f.nl; i++) taken += x->f.l[i].taken;
    assert_true(taken > before);
}

/* A pass that stopped for lack of room goes on from the slice where it
 * stopped once a place is free, without reading the watermark again or
 * claiming the drained slices before it. */
static void test_starved_pass_goes_on(void **state)
{
    fixture *x = *state;
    int64_t m = x->m;
    char key[16];
    x->f.wm[0] = m - 5;
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "b%d", i);
        lease(x, m - 3, x->f.now - 3 * 60000 + i, key, 1);
    }
    sched_kick(x->sc, 0);
    pump(x, 20);
    /* m-5, m-4, then m-3 a batch at a time until the room is gone */
    assert_int_equal(x->f.wm_gets, 1);
    assert_int_equal(sched_held(x->sc), 8);
    assert_int_equal(x->f.claimed[0], m - 5);
    assert_int_equal(x->f.wm[0], m - 3);
    int mark = x->f.nclaimed;
    x->f.now += 25; /* past the backlog's gathering */
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 8);
    /* 2 places free (half the reserve, the least a claim takes): the pass
     * goes on at m-3 */
    for (int i = 0; i < 2; i++) finish(x, i, 1);
    pump(x, 20);
    assert_true(x->f.nclaimed > mark);
    assert_int_equal(x->f.claimed[mark], m - 3);
    for (int i = mark; i < x->f.nclaimed; i++) assert_true(x->f.claimed[i] >= m - 3);
    assert_int_equal(x->f.wm_gets, 1);
    int taken = 0;
    for (int i = 0; i < x->f.nl; i++) taken += x->f.l[i].taken;
    assert_int_equal(taken, 10);
}

/* Starved buckets going on share the room evenly, so a backlog drains
 * side by side across them: with 16 places and 3 buckets, the first claim
 * of each asks for 5, not a whole batch for the first two and none for the
 * third. */
static void test_resumed_buckets_share_evenly(void **state)
{
    fixture *x = *state;
    /* bucket 0: one batch; buckets 1-3: a backlog each */
    leases_due_now(x, 56, "s");
    for (int i = 0; i < 56; i++) x->f.l[i].bucket = i < 8 ? 0 : 1 + i % 3;
    for (int b = 0; b < 4; b++) sched_kick(x->sc, b);
    pump(x, 20);
    assert_int_equal(sched_held(x->sc), 16);
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 16);
    /* every place frees while bucket 0's pass runs (it finds nothing):
     * the starved passes go on once it has ended */
    sched_kick(x->sc, 0);
    int mark = x->f.nclaimed;
    for (int i = 0; i < 16; i++) finish(x, i, 1);
    assert_int_equal(x->f.nclaimed, mark);
    pump(x, 30);
    int first[4] = {0, 0, 0, 0};
    for (int i = mark; i < x->f.nclaimed; i++) {
        int b = x->f.cbucket[i];
        if (b && !first[b]) first[b] = x->f.climit[i];
    }
    for (int b = 1; b < 4; b++) assert_int_equal(first[b], 16 / 3);
}

/* A resume asks no bucket for less than the least claim: with 4 places
 * free and 4 starved buckets, one bucket claims 4 (not each of them 1), and
 * the others go on at the next resumes, each in its turn. */
static void test_resumed_claims_ask_at_least_the_least(void **state)
{
    fixture *x = *state;
    leases_due_now(x, 48, "b");
    for (int i = 0; i < 48; i++) x->f.l[i].bucket = i % 4;
    for (int b = 0; b < 4; b++) sched_kick(x->sc, b);
    pump(x, 20);
    assert_int_equal(sched_held(x->sc), 16);
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 16);
    int mark = x->f.nclaimed;
    for (int i = 0; i < 16; i++) {
        finish(x, i, 1);
        pump(x, 5);
    }
    pump(x, 30);
    /* 4 resumes, one bucket's pass each (its claims in a row: a slice it
     * stopped in, then the next), each bucket in its turn */
    int turns[4] = {0, 0, 0, 0};
    for (int i = mark; i < x->f.nclaimed; i++) {
        assert_true(x->f.climit[i] >= 4); /* the least claim: min(8 / 2 + 1, 8 / 2) */
        if (i == mark || x->f.cbucket[i] != x->f.cbucket[i - 1]) turns[x->f.cbucket[i]]++;
    }
    for (int b = 0; b < 4; b++) assert_int_equal(turns[b], 1);
}

/* Tasks due later than half the reach take at most half the room: tasks
 * due now, found after them, are claimed at once and fire first. */
static void test_room_kept_for_due_soon(void **state)
{
    fixture *x = *state;
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "far%d", i);
        lease(x, x->m, x->f.now + 1400, key, 1);
    }
    sched_kick(x->sc, 0);
    pump(x, 20);
    assert_int_equal(sched_held(x->sc), 4);
    leases_due_now(x, 4, "now");
    sched_kick(x->sc, 0);
    pump(x, 20);
    assert_int_equal(sched_held(x->sc), 8);
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 4);
    for (int i = 0; i < 4; i++) assert_int_equal(x->f.fired[i]->cb.due_ms, x->f.now);
    for (int i = 0; i < x->f.nclaimed; i++) assert_int_equal(x->f.creach[i], x->cfg.lookahead_ms);
}

/* Claims look only as far ahead as a quarter of the room covers at the
 * rate callbacks fire: 8 callbacks in 250 ms, a room of 8, a reach of
 * 62 ms. */
static void test_reach_follows_the_rate(void **state)
{
    fixture *x = *state;
    leases_due_now(x, 8, "r");
    sched_kick(x->sc, 0);
    pump(x, 20);
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 8);
    for (int i = 0; i < 8; i++) finish(x, i, 1);
    pump(x, 20);
    assert_int_equal(x->f.creach[x->f.nclaimed - 1], x->cfg.lookahead_ms);
    x->f.now += 250;
    sched_kick(x->sc, 0);
    pump(x, 20);
    assert_int_equal(x->f.creach[x->f.nclaimed - 1], 62);
}

/* A first pass that found more than the room holds: bucket 0's tasks due
 * 1 s ahead took half the room, bucket 1's due at 100 ms the rest, and
 * bucket 3's due at 50 ms found none (bucket 2's are due at 600 ms). No
 * callback has fired yet to tell the rate; that pass tells it: the room
 * fills within a lookahead, so claims look a quarter of it ahead (375 ms).
 * When bucket 1's places free, the resumed passes take bucket 3's overdue
 * tasks, all 4, not 2 of them and 2 of bucket 2's due 500 ms later, which a
 * reach of the whole lookahead took. */
static void test_a_short_room_found_before_any_fire(void **state)
{
    fixture *x = *state;
    char key[16];
    int64_t t0 = x->f.now;
    struct { int bucket, n; int64_t at; } plan[] = {{0, 8, 1000}, {1, 4, 100}, {2, 4, 600},
                                                     {3, 4, 50}};
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < plan[p].n; i++) {
            snprintf(key, sizeof(key), "b%d_%d", plan[p].bucket, i);
            lease(x, x->m, t0 + plan[p].at, key, 1);
            x->f.l[x->f.nl - 1].bucket = plan[p].bucket;
        }
    for (int b = 0; b < 4; b++) {
        sched_kick(x->sc, b);
        pump(x, 10);
    }
    assert_int_equal(sched_held(x->sc), 8);
    int first = x->f.nclaimed;
    assert_int_equal(x->f.creach[0], x->cfg.lookahead_ms);
    /* bucket 1's tasks fire and end; no rate window has passed */
    x->f.now = t0 + 100;
    sched_poll(x->sc);
    assert_int_equal(x->f.nfired, 4);
    for (int i = 0; i < 4; i++) finish(x, i, 1);
    pump(x, 30);
    int taken[4] = {0, 0, 0, 0};
    for (int i = 0; i < x->f.nl; i++) taken[x->f.l[i].bucket] += x->f.l[i].taken;
    assert_int_equal(taken[3], 4);
    assert_int_equal(taken[2], 0);
    assert_true(x->f.nclaimed > first);
    assert_int_equal(x->f.creach[x->f.nclaimed - 1], x->cfg.lookahead_ms / 4);
    /* every task fires and ends; once a window has passed with no pass out
     * of room (and one with no fire: a room of 8 is short for any rate),
     * claims look the whole lookahead ahead again */
    for (int64_t at = 1100; at <= 1700; at += 300) {
        x->f.now = t0 + at;
        sched_poll(x->sc);
        for (int i = 0; i < x->f.nfired; i++)
            if (x->f.fired[i]) finish(x, i, 1);
        pump(x, 20);
        for (int b = 0; b < 4; b++) sched_kick(x->sc, b);
        pump(x, 20);
    }
    for (int i = 0; i < x->f.nl; i++) assert_true(x->f.l[i].taken);
    assert_int_equal(sched_held(x->sc), 0);
    assert_int_equal(x->f.creach[x->f.nclaimed - 1], x->cfg.lookahead_ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_catch_up_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_slice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_timing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settles_batched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_permanent_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_job_comes_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uncounted_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hand_back_on_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_left_to_expire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counts_asked_only_once_the_minute_is_over, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_claims_share_the_room, setup_small4, teardown),
        cmocka_unit_test_setup_teardown(test_room_kept_for_due_soon, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_reach_follows_the_rate, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_room_frees_when_callbacks_end, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_starved_pass_goes_on, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_resumed_buckets_share_evenly, setup_wide4, teardown),
        cmocka_unit_test_setup_teardown(test_resumed_claims_ask_at_least_the_least, setup_wide4,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_short_room_found_before_any_fire, setup_small4,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
