/* test_wheel.c -- unit tests for the hierarchical timing wheel.
 *
 * The last test drives the wheel with over a million random operations and
 * checks every firing against a reference model that is a plain array
 * scanned linearly. TICKD_TEST_SEED=<n> replays a given seed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/wheel.h"

#include "testutil.h"

/* ---- helpers ----------------------------------------------------------- */

#define LOG_MAX 4096

/* Every callback in the simple tests appends (id, now) here. */
static struct {
    int id[LOG_MAX];
    size_t n;
} fired_log;

static void log_reset(void)
{
    fired_log.n = 0;
}

static void log_cb(wheel *w, wheel_timer *t, void *arg)
{
    (void)w;
    (void)t;
    assert_true(fired_log.n < LOG_MAX);
    fired_log.id[fired_log.n++] = (int)(intptr_t)arg;
}

static void init_ids(wheel_timer *t, size_t n, wheel_cb *cb)
{
    for (size_t i = 0; i < n; i++)
        wheel_timer_init(&t[i], cb, (void *)(intptr_t)i);
}

static uint64_t rng_state;

static uint64_t rnd(void) { return testutil_rnd(&rng_state); }

static uint64_t rnd_below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

static uint64_t round_up(uint64_t due, uint64_t res)
{
    uint64_t k = due / res + (due % res != 0);
    return k > UINT64_MAX / res ? UINT64_MAX : k * res;
}

/* ---- basic ------------------------------------------------------------- */

static void test_basic(void **state)
{
    (void)state;
    wheel *w = wheel_create(1, 1000);
    assert_non_null(w);
    assert_null(wheel_create(0, 0));
    assert_null(wheel_create(1001, 0));
    wheel_timer t[4];
    init_ids(t, 4, log_cb);
    log_reset();

    assert_int_equal(wheel_next_due(w), WHEEL_NEVER);
    assert_int_equal(wheel_pending(&t[0]), 0);
    wheel_add(w, &t[1], NULL, 1010, 0, 1);
    wheel_add(w, &t[2], NULL, 1005, 0, 1);
    assert_int_equal(wheel_count(w), 2);
    assert_true(wheel_pending(&t[1]) && wheel_pending(&t[2]));
    assert_true(wheel_next_due(w) <= 1005);
    assert_int_equal(wheel_check(w), 0);

    assert_int_equal(wheel_advance(w, 1004), 0);
    assert_int_equal(wheel_advance(w, 1005), 1);
    assert_int_equal(fired_log.id[0], 2);
    assert_false(wheel_pending(&t[2]));
    assert_int_equal(wheel_cancel(w, &t[2]), 0);
    /* now earlier than the cursor does nothing */
    assert_int_equal(wheel_advance(w, 900), 0);
    assert_int_equal(wheel_advance(w, 1100), 1);
    assert_int_equal(fired_log.id[1], 1);
    assert_int_equal(wheel_count(w), 0);

    /* cancel */
    wheel_add(w, &t[3], NULL, 1200, 0, 1);
    assert_int_equal(wheel_cancel(w, &t[3]), 1);
    assert_int_equal(wheel_cancel(w, &t[3]), 0);
    assert_int_equal(wheel_advance(w, 5000), 0);
    assert_int_equal(wheel_count(w), 0);

    /* a past due fires on the next advance, even at the same now */
    wheel_add(w, &t[0], NULL, 10, 0, 1);
    assert_true(wheel_next_due(w) <= 10);
    assert_int_equal(wheel_advance(w, 5000), 1);
    assert_int_equal(fired_log.id[2], 0);

    /* re-adding a pending timer moves it */
    wheel_add(w, &t[0], NULL, 6000, 0, 1);
    wheel_add(w, &t[0], NULL, 7000, 0, 1);
    assert_int_equal(wheel_count(w), 1);
    assert_int_equal(wheel_advance(w, 6999), 0);
    assert_int_equal(wheel_advance(w, 7000), 1);

    /* same due: add order */
    log_reset();
    for (int i = 3; i >= 0; i--)
        wheel_add(w, &t[i], NULL, 8000, 0, 1);
    assert_int_equal(wheel_advance(w, 9000), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(fired_log.id[i], 3 - i);
    assert_int_equal(wheel_check(w), 0);
    wheel_free(w);
}

/* ---- keys -------------------------------------------------------------- */

static void test_key_replace(void **state)
{
    (void)state;
    wheel *w = wheel_create(1, 0);
    wheel_timer t[3];
    init_ids(t, 3, log_cb);
    log_reset();
    char k1[] = "job-1", k2[] = "job-1"; /* equal content, other memory */

    wheel_add(w, &t[0], k1, 10, 0, 1);
    assert_ptr_equal(wheel_find(w, "job-1"), &t[0]);
    wheel_add(w, &t[1], k2, 20, 0, 1);
    assert_false(wheel_pending(&t[0]));
    assert_ptr_equal(wheel_find(w, k1), &t[1]);
    assert_int_equal(wheel_count(w), 1);
    assert_int_equal(wheel_check(w), 0);
    /* re-adding the key holder itself under the same key */
    wheel_add(w, &t[1], k1, 15, 0, 1);
    assert_ptr_equal(wheel_find(w, k2), &t[1]);
    /* a keyed timer re-added without a key drops out of the index */
    wheel_add(w, &t[2], "other", 12, 0, 1);
    wheel_add(w, &t[2], NULL, 12, 0, 1);
    assert_null(wheel_find(w, "other"));
    assert_int_equal(wheel_check(w), 0);

    assert_int_equal(wheel_advance(w, 100), 2);
    assert_int_equal(fired_log.n, 2);
    assert_int_equal(fired_log.id[0], 2);
    assert_int_equal(fired_log.id[1], 1);
    assert_null(wheel_find(w, "job-1"));
    assert_int_equal(wheel_check(w), 0);
    wheel_free(w);
}

static void test_cancel_key(void **state)
{
    (void)state;
    enum { N = 5000 };
    wheel *w = wheel_create(1, 0);
    static wheel_timer t[N];
    static char keys[N][16];
    init_ids(t, N, log_cb);
    log_reset();
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "key:%d", i);
        wheel_add(w, &t[i], keys[i], 1000 + (uint64_t)i, 0, 1);
    }
    assert_int_equal(wheel_count(w), N);
    assert_int_equal(wheel_check(w), 0); /* the index grew many times */
    for (int i = 0; i < N; i++)
        assert_ptr_equal(wheel_find(w, keys[i]), &t[i]);
    assert_null(wheel_find(w, "key:-1"));
    for (int i = 0; i < N; i += 2)
        assert_int_equal(wheel_cancel_key(w, keys[i]), 1);
    assert_int_equal(wheel_cancel_key(w, keys[0]), 0);
    assert_int_equal(wheel_cancel_key(w, "nope"), 0);
    assert_int_equal(wheel_count(w), N / 2);
    assert_int_equal(wheel_check(w), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(wheel_pending(&t[i]), i % 2);
    wheel_free(w);
}

/* ---- repeats ----------------------------------------------------------- */

static int rep_runs;
static uint64_t rep_now;
static uint64_t rep_at[16];

static void rep_cb(wheel *w, wheel_timer *t, void *arg)
{
    (void)arg;
    assert_true(rep_runs < 16);
    rep_at[rep_runs++] = rep_now;
    assert_int_equal(wheel_check(w), 0);
    (void)t;
}

static void cancel_self_cb(wheel *w, wheel_timer *t, void *arg)
{
    (void)arg;
    rep_at[rep_runs++] = rep_now;
    assert_true(wheel_pending(t)); /* forever: already re-armed */
    if (rep_runs == 4)
        assert_int_equal(wheel_cancel(w, t), 1);
}

static void test_repeat(void **state)
{
    (void)state;
    wheel *w = wheel_create(1, 0);
    wheel_timer t;
    wheel_timer_init(&t, rep_cb, NULL);

    /* times = 3: at 10, 20, 30, then done */
    rep_runs = 0;
    wheel_add(w, &t, "rep", 10, 10, 3);
    for (rep_now = 1; rep_now <= 100; rep_now++)
        wheel_advance(w, rep_now);
    assert_int_equal(rep_runs, 3);
    assert_int_equal(rep_at[0], 10);
    assert_int_equal(rep_at[1], 20);
    assert_int_equal(rep_at[2], 30);
    assert_false(wheel_pending(&t));
    assert_null(wheel_find(w, "rep"));

    /* forever, cancelled from inside its own callback on run 4 */
    wheel_timer_init(&t, cancel_self_cb, NULL);
    rep_runs = 0;
    wheel_add(w, &t, "forever", 105, 7, -1);
    for (rep_now = 101; rep_now <= 1000; rep_now++)
        wheel_advance(w, rep_now);
    assert_int_equal(rep_runs, 4);
    assert_int_equal(rep_at[0], 105);
    assert_int_equal(rep_at[3], 126);
    assert_false(wheel_pending(&t));
    assert_null(wheel_find(w, "forever"));
    assert_int_equal(wheel_count(w), 0);

    /* a jump over several periods fires once per advance, keeping phase
     * (the re-armed run is past due, so it fires on the next advance) */
    wheel_timer_init(&t, rep_cb, NULL);
    rep_runs = 0;
    wheel_add(w, &t, NULL, 1010, 10, 5);
    rep_now = 1055;
    assert_int_equal(wheel_advance(w, rep_now), 1);
    assert_int_equal(wheel_advance(w, rep_now), 1);
    assert_true(wheel_next_due(w) <= 1030);
    assert_int_equal(wheel_advance(w, rep_now), 1);
    assert_int_equal(wheel_advance(w, rep_now), 1);
    assert_int_equal(wheel_advance(w, rep_now), 1); /* 1050: the fifth */
    assert_int_equal(wheel_advance(w, rep_now), 0);
    assert_false(wheel_pending(&t));
    assert_int_equal(wheel_check(w), 0);
    wheel_free(w);
}

/* ---- re-entrancy ------------------------------------------------------- */

struct reent {
    wheel_timer t[8];
    wheel_timer *heap; /* freed by its own callback */
    int order[32];
    int n;
};
static struct reent re;

static void reent_cb(wheel *w, wheel_timer *t, void *arg)
{
    int id = (int)(intptr_t)arg;
    re.order[re.n++] = id;
    assert_int_equal(wheel_check(w), 0);
    switch (id == 0 && re.n > 1 ? -1 : id) { /* t0 fires again: act once */
    case 0:
        /* cancel a timer due later in this same advance: it must not fire */
        assert_int_equal(wheel_cancel(w, &re.t[1]), 1);
        /* a past due added now fires on the next advance, not this one */
        wheel_add(w, &re.t[2], NULL, 0, 0, 1);
        /* re-arm myself (a one-shot, so not pending any more) */
        assert_false(wheel_pending(t));
        wheel_add(w, t, NULL, 200, 0, 1);
        /* replace, by key, a timer due later in this advance */
        wheel_add(w, &re.t[4], "k3", 300, 0, 1);
        /* push a later-due timer of this advance further out */
        wheel_add(w, &re.t[5], NULL, 400, 0, 1);
        /* nested advance is refused */
        assert_int_equal(wheel_advance(w, 1000), 0);
        break;
    case 6:
        /* free my own memory: I am a one-shot, so no longer pending */
        assert_false(wheel_pending(t));
        free(t);
        re.heap = NULL;
        break;
    default:
        break;
    }
}

static void test_reentrancy(void **state)
{
    (void)state;
    wheel *w = wheel_create(1, 0);
    memset(&re, 0, sizeof re);
    init_ids(re.t, 8, reent_cb);
    re.heap = malloc(sizeof *re.heap);
    assert_non_null(re.heap);
    wheel_timer_init(re.heap, reent_cb, (void *)(intptr_t)6);

    wheel_add(w, &re.t[0], NULL, 10, 0, 1);
    wheel_add(w, &re.t[1], NULL, 20, 0, 1);
    wheel_add(w, &re.t[3], "k3", 30, 0, 1);
    wheel_add(w, &re.t[5], NULL, 40, 0, 1);
    wheel_add(w, &re.t[7], NULL, 50, 0, 1);
    wheel_add(w, re.heap, NULL, 45, 0, 1);
    assert_int_equal(wheel_advance(w, 100), 3); /* 0, heap(6), 7 */
    assert_int_equal(re.n, 3);
    assert_int_equal(re.order[0], 0);
    assert_int_equal(re.order[1], 6);
    assert_int_equal(re.order[2], 7);
    assert_null(re.heap);
    assert_false(wheel_pending(&re.t[1]));
    assert_false(wheel_pending(&re.t[3]));
    assert_ptr_equal(wheel_find(w, "k3"), &re.t[4]);
    assert_int_equal(wheel_check(w), 0);
    /* t2 (past due) fires on this next advance, even at the same now */
    assert_int_equal(wheel_advance(w, 100), 1);
    assert_int_equal(re.order[3], 2);
    assert_int_equal(wheel_advance(w, 1000), 3); /* 0 at 200, 4, 5 */
    assert_int_equal(re.order[4], 0);
    assert_int_equal(re.order[5], 4);
    assert_int_equal(re.order[6], 5);
    assert_int_equal(wheel_count(w), 0);
    assert_int_equal(wheel_check(w), 0);
    wheel_free(w);
}

/* ---- far future -------------------------------------------------------- */

struct far {
    wheel_timer t;
    uint64_t due;
    uint64_t fired_at;
};
static uint64_t far_now;

static void far_cb(wheel *w, wheel_timer *t, void *arg)
{
    (void)w;
    (void)t;
    struct far *f = arg;
    assert_int_equal(f->fired_at, 0);
    f->fired_at = far_now;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_far_future(void **state)
{
    (void)state;
    enum { N = 3000 };
    const uint64_t year = UINT64_C(365) * 24 * 3600 * 1000;
    const uint64_t start = UINT64_C(1700000000000); /* an epoch ms "now" */
    static struct far f[N];
    static uint64_t dues[N];
    wheel *w = wheel_create(1, start);
    rng_state = 42;
    for (int i = 0; i < N; i++) {
        uint64_t d;
        if (i < 10)
            d = (uint64_t)(i + 1) * year; /* 1..10 years */
        else if (i < 20)
            d = (UINT64_C(1) << 48) + (uint64_t)i * year; /* past the span */
        else if (i < 25)
            d = UINT64_MAX - start - (uint64_t)i; /* the end of time */
        else /* log-uniform, 1 ms .. ~140 years */
            d = rnd_below(UINT64_C(1) << rnd_below(43)) + 1;
        f[i].due = start + d;
        f[i].fired_at = 0;
        dues[i] = f[i].due;
        wheel_timer_init(&f[i].t, far_cb, &f[i]);
        wheel_add(w, &f[i].t, NULL, f[i].due, 0, 1);
    }
    assert_int_equal(wheel_check(w), 0);
    qsort(dues, N, sizeof dues[0], cmp_u64);
    /* for each due in order: one ms before it nothing of it fires, at it
     * everything due then fires */
    size_t done = 0;
    for (int i = 0; i < N; i++) {
        if (i && dues[i] == dues[i - 1])
            continue;
        uint64_t next_due = wheel_next_due(w);
        assert_true(next_due <= dues[i]);
        far_now = dues[i] - 1;
        size_t n1 = wheel_advance(w, far_now);
        assert_int_equal(n1, 0);
        far_now = dues[i];
        done += wheel_advance(w, far_now);
        assert_int_equal(wheel_check(w), 0);
        for (int j = 0; j < N; j++)
            if (f[j].due == dues[i])
                assert_int_equal(f[j].fired_at, dues[i]);
    }
    assert_int_equal(done, N);
    assert_int_equal(wheel_count(w), 0);
    for (int j = 0; j < N; j++)
        assert_int_equal(f[j].fired_at, f[j].due);
    wheel_free(w);

    /* one huge jump fires everything, in due order */
    w = wheel_create(1, 0);
    log_reset();
    wheel_timer t[64];
    init_ids(t, 64, log_cb);
    for (int i = 0; i < 64; i++)
        wheel_add(w, &t[i], NULL, (uint64_t)(63 - i) * (year / 3) + 1, 0, 1);
    assert_int_equal(wheel_advance(w, 64 * year), 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(fired_log.id[i], 63 - i);
    wheel_free(w);
}

/* ---- resolution > 1 ms ------------------------------------------------- */

static uint64_t res_now;
static uint64_t res_fired[512];

static void res_cb(wheel *w, wheel_timer *t, void *arg)
{
    (void)w;
    (void)t;
    res_fired[(intptr_t)arg] = res_now;
}

static void test_resolution(void **state)
{
    (void)state;
    static const uint64_t resolutions[] = { 2, 7, 10, 1000 };
    rng_state = 7;
    for (size_t r = 0; r < sizeof resolutions / sizeof resolutions[0]; r++) {
        uint64_t res = resolutions[r];
        uint64_t t0 = 123457;
        wheel *w = wheel_create(res, t0);
        static wheel_timer t[512];
        init_ids(t, 512, res_cb);
        uint64_t due[512];
        for (int i = 0; i < 512; i++) {
            due[i] = t0 + rnd_below(100 * res);
            res_fired[i] = 0;
            wheel_add(w, &t[i], NULL, due[i], 0, 1);
        }
        /* step through 1 ms at a time: each fires exactly at its due
         * rounded up to the resolution; never before its due */
        for (res_now = t0; res_now < t0 + 102 * res; res_now++) {
            wheel_advance(w, res_now);
            assert_int_equal(wheel_check(w), 0);
        }
        for (int i = 0; i < 512; i++) {
            assert_true(res_fired[i] >= due[i]);
            assert_int_equal(res_fired[i], round_up(due[i], res));
        }
        wheel_free(w);
    }
}

/* ---- next_due ---------------------------------------------------------- */

static void test_next_due(void **state)
{
    (void)state;
    static const uint64_t resolutions[] = { 1, 10, 333 };
    rng_state = 99;
    for (size_t r = 0; r < sizeof resolutions / sizeof resolutions[0]; r++) {
        uint64_t res = resolutions[r];
        wheel *w = wheel_create(res, 5);
        static wheel_timer t[512];
        init_ids(t, 512, res_cb);
        uint64_t due[512];
        assert_int_equal(wheel_next_due(w), WHEEL_NEVER);
        for (int i = 0; i < 512; i++) {
            uint64_t span = UINT64_C(1) << rnd_below(36);
            due[i] = 6 + rnd_below(span);
            res_fired[i] = 0;
            wheel_add(w, &t[i], NULL, due[i], 0, 1);
        }
        /* an event loop that only ever advances to next_due() still fires
         * each timer exactly at its rounded due */
        size_t fired = 0;
        int loops = 0;
        while (wheel_count(w)) {
            uint64_t nd = wheel_next_due(w);
            uint64_t min = WHEEL_NEVER;
            for (int i = 0; i < 512; i++)
                if (wheel_pending(&t[i]) && round_up(due[i], res) < min)
                    min = round_up(due[i], res);
            assert_true(nd <= min);
            res_now = nd;
            fired += wheel_advance(w, nd);
            assert_true(++loops < 100000);
        }
        assert_int_equal(fired, 512);
        assert_int_equal(wheel_next_due(w), WHEEL_NEVER);
        for (int i = 0; i < 512; i++)
            assert_int_equal(res_fired[i], round_up(due[i], res));
        wheel_free(w);
    }
}

/* ---- randomized, against a reference model ----------------------------- */

#define RT 200 /* timers */
#define RK 48  /* keys */

struct mtimer {
    int pending, firing;
    uint64_t due, interval, seq;
    int64_t times;
    int key; /* -1: none */
};

static struct {
    wheel *w;
    uint64_t res, now, cur, seq;
    wheel_timer t[RT];
    struct mtimer m[RT];
    int key_owner[RK];
    char keys[2][RK][12]; /* two copies: lookups go by content */
    int expect[RT];
    size_t nexpect, pos, fired, total_fired;
    long op;
    uint64_t fire_now;
} R;

static void model_cancel(int i)
{
    if (!R.m[i].pending)
        return;
    if (R.m[i].key >= 0)
        R.key_owner[R.m[i].key] = -1;
    R.m[i].pending = R.m[i].firing = 0;
}

static size_t model_count(void)
{
    size_t n = 0;
    for (int i = 0; i < RT; i++)
        n += (size_t)R.m[i].pending;
    return n;
}

static uint64_t rand_delay(void)
{
    uint64_t r = rnd_below(100);
    if (r < 25)
        return rnd_below(100);
    if (r < 60)
        return rnd_below(5000);
    if (r < 85)
        return rnd_below(UINT64_C(1) << (12 + rnd_below(20)));
    if (r < 97)
        return rnd_below(UINT64_C(1) << 41);
    return (UINT64_C(1) << 48) + rnd_below(UINT64_C(1) << 50); /* > span */
}

static void rand_add(void)
{
    int i = (int)rnd_below(RT);
    int key = rnd_below(3) == 0 ? (int)rnd_below(RK) : -1;
    uint64_t due;
    if (rnd_below(20) == 0) /* in the past */
        due = R.now - rnd_below(R.now < 10000 ? R.now + 1 : 10000);
    else
        due = R.now + rand_delay();
    int64_t times = 1;
    uint64_t interval = 0, r = rnd_below(10);
    if (r == 0)
        times = -1;
    else if (r < 3)
        times = 2 + (int64_t)rnd_below(4);
    if (times != 1)
        interval = 1 + (rnd_below(2) ? rnd_below(50) : rnd_below(100000));

    model_cancel(i);
    if (key >= 0 && R.key_owner[key] >= 0)
        model_cancel(R.key_owner[key]);
    R.m[i] = (struct mtimer){ .pending = 1, .due = due, .interval = interval,
                              .times = times, .seq = R.seq++, .key = key };
    if (key >= 0)
        R.key_owner[key] = i;
    wheel_add(R.w, &R.t[i], key >= 0 ? R.keys[rnd_below(2)][key] : NULL, due,
              interval, times);
}

static void rand_cancel(void)
{
    int i = (int)rnd_below(RT);
    int was = R.m[i].pending;
    model_cancel(i);
    assert_int_equal(wheel_cancel(R.w, &R.t[i]), was);
}

static void rand_cancel_key(void)
{
    int k = (int)rnd_below(RK);
    int owner = R.key_owner[k];
    if (owner >= 0)
        model_cancel(owner);
    assert_int_equal(wheel_cancel_key(R.w, R.keys[rnd_below(2)][k]),
                     owner >= 0);
}

static void rand_find(void)
{
    int k = (int)rnd_below(RK);
    wheel_timer *t = wheel_find(R.w, R.keys[rnd_below(2)][k]);
    if (R.key_owner[k] < 0)
        assert_null(t);
    else
        assert_ptr_equal(t, &R.t[R.key_owner[k]]);
}

static void model_cb(wheel *w, wheel_timer *t, void *arg)
{
    int i = (int)(intptr_t)arg;
    assert_ptr_equal(t, &R.t[i]);
    /* the next expected timer that is still due in this advance */
    while (R.pos < R.nexpect && !R.m[R.expect[R.pos]].firing)
        R.pos++;
    assert_true(R.pos < R.nexpect);
    if (R.expect[R.pos] != i)
        fail_msg("fired timer %d, expected %d (seed replay: see top)", i,
                 R.expect[R.pos]);
    R.pos++;
    struct mtimer *m = &R.m[i];
    /* never early: fired at or after its due rounded up */
    assert_true(round_up(m->due, R.res) <= R.fire_now);
    m->firing = 0;
    if (m->times == 1) {
        model_cancel(i);
    } else {
        if (m->times > 0)
            m->times--;
        m->due = m->due > UINT64_MAX - m->interval ? UINT64_MAX
                                                   : m->due + m->interval;
    }
    assert_int_equal(wheel_pending(t), m->pending);
    /* mid-advance state (a half-consumed firing list) is sound too; checked
     * early in each run only, to keep the run short */
    if (R.op < 100000)
        assert_int_equal(wheel_check(w), 0);
    R.fired++;
    R.total_fired++;
    /* sometimes re-enter */
    uint64_t r = rnd_below(40);
    if (r == 0)
        rand_add();
    else if (r == 1)
        rand_cancel();
    else if (r == 2)
        rand_cancel_key();
    else if (r == 3) {
        /* cancel myself even if I repeat */
        model_cancel(i);
        wheel_cancel(w, t);
    }
}

static int cmp_expect(const void *a, const void *b)
{
    const struct mtimer *x = &R.m[*(const int *)a], *y = &R.m[*(const int *)b];
    if (x->due != y->due)
        return x->due < y->due ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void rand_advance(void)
{
    uint64_t r = rnd_below(100), now = R.now;
    if (r < 40)
        now += rnd_below(4);
    else if (r < 70)
        now += rnd_below(200);
    else if (r < 82)
        now += rnd_below(70000);
    else if (r < 88)
        now += rnd_below(UINT64_C(1) << 32);
    else if (r < 90)
        now += rnd_below(UINT64_C(1) << 42);
    else if (r < 91)
        now -= rnd_below(now < 5000 ? now + 1 : 5000); /* backwards */
    else {
        /* land exactly on (or one tick before) some pending timer's due */
        int i = (int)rnd_below(RT);
        if (R.m[i].pending) {
            uint64_t d = round_up(R.m[i].due, R.res);
            if (d > R.now && d - R.now < (UINT64_C(1) << 50))
                now = d - (rnd_below(2) ? 0 : 1);
        }
    }
    uint64_t nt = now / R.res;

    /* next_due is never later than the earliest rounded due */
    uint64_t min = WHEEL_NEVER;
    R.nexpect = 0;
    for (int i = 0; i < RT; i++) {
        struct mtimer *m = &R.m[i];
        if (!m->pending)
            continue;
        uint64_t d = round_up(m->due, R.res);
        if (d < min)
            min = d;
        if (nt >= R.cur && d / R.res <= nt) {
            m->firing = 1;
            R.expect[R.nexpect++] = i;
        }
    }
    assert_true(wheel_next_due(R.w) <= min);
    qsort(R.expect, R.nexpect, sizeof R.expect[0], cmp_expect);
    if (nt >= R.cur) {
        R.cur = nt;
        R.now = now;
    }
    R.pos = 0;
    R.fired = 0;
    R.fire_now = now;
    size_t n = wheel_advance(R.w, now);
    assert_int_equal(n, R.fired);
    /* everything due fired: none left marked firing */
    for (size_t j = 0; j < R.nexpect; j++)
        if (R.m[R.expect[j]].firing)
            fail_msg("timer %d due at %" PRIu64 " did not fire at %" PRIu64,
                     R.expect[j], R.m[R.expect[j]].due, now);
}

static uint64_t test_seed(void)
{
    const char *s = getenv("TICKD_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : UINT64_C(20240601);
}

static void run_random(uint64_t res, long ops, uint64_t seed)
{
    memset(&R, 0, sizeof R);
    rng_state = seed;
    R.res = res;
    R.now = UINT64_C(1700000000000) + rnd_below(1000);
    R.cur = R.now / res;
    R.w = wheel_create(res, R.now);
    assert_non_null(R.w);
    init_ids(R.t, RT, model_cb);
    for (int k = 0; k < RK; k++) {
        R.key_owner[k] = -1;
        snprintf(R.keys[0][k], sizeof R.keys[0][k], "k%d", k);
        memcpy(R.keys[1][k], R.keys[0][k], sizeof R.keys[1][k]);
    }
    for (long op = 0; op < ops; op++) {
        R.op = op;
        uint64_t r = rnd_below(100);
        if (r < 38)
            rand_add();
        else if (r < 46)
            rand_cancel();
        else if (r < 51)
            rand_cancel_key();
        else if (r < 54)
            rand_find();
        else
            rand_advance();
        assert_int_equal(wheel_count(R.w), model_count());
        /* cheap enough (about 4 us under ASan) to run after every op */
        if (wheel_check(R.w) != 0)
            fail_msg("wheel_check failed at op %ld (res %" PRIu64 ")", op, res);
    }
    assert_int_equal(wheel_check(R.w), 0);
    wheel_free(R.w);
}

static void test_random_model(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    printf("test_random_model: seed %" PRIu64 " (set TICKD_TEST_SEED to "
           "replay)\n", seed);
    size_t fired = 0;
    run_random(1, 700000, seed);
    fired += R.total_fired;
    run_random(7, 200000, seed + 1);
    fired += R.total_fired;
    run_random(1000, 150000, seed + 2);
    fired += R.total_fired;
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("test_random_model: 1050000 ops, %zu firings checked, %.2f s\n",
           fired,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_key_replace),
        cmocka_unit_test(test_cancel_key),
        cmocka_unit_test(test_repeat),
        cmocka_unit_test(test_reentrancy),
        cmocka_unit_test(test_far_future),
        cmocka_unit_test(test_resolution),
        cmocka_unit_test(test_next_due),
        cmocka_unit_test(test_random_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
