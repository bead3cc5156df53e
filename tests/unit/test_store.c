/* test_store.c -- one suite, run on both stores of store.h: the memory store
 * and the Redis store against a real redis-server that the suite starts on
 * a free port in a temp dir (skipped, with a message, when redis-server is
 * not installed). Both must give the same answers: this is the contract the
 * scheduler and the API rely on. */
#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/flow.h"
#include "model/schedule.h"
#include "store/store.h"
#include "base/util.h"

#include "testutil.h"

typedef struct fixture {
    struct event_base *base;
    config cfg;
    store *s;
    int answers;                 /* callbacks run */
    /* the last answer */
    store_status st;
    char id[TASK_ID_MAX], state[1024], spec[1024], detail[256];
    int ok;
    int64_t wm;
    store_claim claim;
    store_lease leases[16];
    char lease_ids[16][TASK_ID_MAX];
    int settled;
    int added_bucket;
    int64_t added_due;
    int64_t t0;                  /* the store's time at setup */
    int64_t fake_now_ms;         /* the memory store's clock (the Redis store's is Redis's) */
    /* schedules: the last answer */
    char sdef[512], sstate[1024], sprev[1024];
    int nsched;
    char sids[8][SCHED_ID_MAX];
    char lids[16][TASK_ID_MAX];
    int nlist;
    char cursor[STORE_CURSOR_MAX];
    char sstates[8][1024];
    char flow[256];              /* the last flow settings read */
} fixture;

static pid_t redis_pid;
static int redis_port;
static char redis_dir[64];

/* ---- a real redis-server ------------------------------------------------ */

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static int redis_up(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)redis_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

static int redis_start(void)
{
    char port[16];
    if (system("command -v redis-server >/dev/null 2>&1") != 0) return -1;
    snprintf(redis_dir, sizeof(redis_dir), "/tmp/tickd-test-store-XXXXXX");
    if (!mkdtemp(redis_dir) || (redis_port = free_port()) < 0) return -1;
    snprintf(port, sizeof(port), "%d", redis_port);
    redis_pid = fork();
    if (redis_pid == 0) {
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", "--dir", redis_dir, "--loglevel", "warning",
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        if (redis_up()) return 0;
        usleep(10000);
    }
    return -1;
}

static void redis_stop(void)
{
    char cmd[128];
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        waitpid(redis_pid, NULL, 0);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", redis_dir);
    if (redis_dir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", redis_dir);
}

/* ---- fixture ----------------------------------------------------------- */

static void on_added(int bucket, int64_t due_ms, void *priv)
{
    fixture *f = priv;
    f->added_bucket = bucket;
    f->added_due = due_ms;
}

static int64_t fake_clock(void *priv)
{
    return ((fixture *)priv)->fake_now_ms;
}

static int setup(void **state, int redis)
{
    static int n;
    fixture *f = xcalloc(1, sizeof(*f));
    char err[256];
    f->base = event_base_new();
    config_defaults(&f->cfg);
    f->cfg.buckets = 1;
    f->cfg.lease_margin_ms = 20;
    f->cfg.retention_ms = 60000;
    snprintf(f->cfg.prefix, sizeof(f->cfg.prefix), "t%d", ++n); /* a fresh keyspace */
    if (redis) {
        if (!redis_port) {
            skip();
        }
        snprintf(f->cfg.nodes, sizeof(f->cfg.nodes), "127.0.0.1:%d", redis_port);
        int fatal;
        f->s = store_redis_create(f->base, &f->cfg, "lua", &fatal, err, sizeof(err));
        if (!f->s) fail_msg("redis store: %s", err);
        /* Tests add tasks due now and claim the minute of now: one begun in
         * a minute's last seconds, or its first ms, would see them fall in
         * two slices, or the claim in the next. Redis's clock is real:
         * wait until well inside a minute. */
        int64_t in_minute;
        while ((in_minute = store_now_ms(f->s) % 60000) < 300 || in_minute >= 55000) usleep(20000);
    } else {
        f->s = store_memory_create(f->base, &f->cfg);
        /* the fake clock starts half way through the present minute (as
         * above, away from its edges) */
        f->fake_now_ms = util_realtime_ms() / 60000 * 60000 + 30000;
        store_memory_set_clock(f->s, fake_clock, f);
    }
    f->added_bucket = -1;
    f->t0 = store_now_ms(f->s);
    store_listen(f->s, on_added, f);
    *state = f;
    return 0;
}

static int setup_memory(void **state) { return setup(state, 0); }
static int setup_redis(void **state) { return setup(state, 1); }

static int teardown(void **state)
{
    fixture *f = *state;
    store_close(f->s);
    store_free(f->s);
    event_base_free(f->base);
    free(f);
    return 0;
}

/* Let ms pass on the store's clock: the memory store's fake one moves at
 * once; Redis's is real time. */
static void let_pass(fixture *f, int64_t ms)
{
    if (f->fake_now_ms) f->fake_now_ms += ms;
    else usleep((useconds_t)ms * 1000);
}

/* Run the loop until `n` more answers came (or 5 s passed: a failure). */
static void wait_answers(fixture *f, int n)
{
    int want = f->answers + n;
    int64_t end = util_mono_ms() + 5000;
    while (f->answers < want) {
        assert_true(util_mono_ms() < end);
        event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (f->answers < want) usleep(200);
    }
}

static void add_cb(store_status st, const char *id, const char *state, const char *err,
                   void *priv)
{
    fixture *f = priv;
    (void)err;
    f->st = st;
    snprintf(f->id, sizeof(f->id), "%s", id ? id : "");
    snprintf(f->state, sizeof(f->state), "%s", state ? state : "");
    f->answers++;
}

static void get_cb(store_status st, const char *spec, const char *state, const char *err,
                   void *priv)
{
    fixture *f = priv;
    (void)err;
    f->st = st;
    snprintf(f->spec, sizeof(f->spec), "%s", spec ? spec : "");
    snprintf(f->state, sizeof(f->state), "%s", state ? state : "");
    f->answers++;
}

static void cancel_cb(store_status st, const char *detail, void *priv)
{
    fixture *f = priv;
    f->st = st;
    snprintf(f->detail, sizeof(f->detail), "%s", detail ? detail : "");
    f->answers++;
}

static void health_cb(int ok, const char *err, void *priv)
{
    fixture *f = priv;
    (void)err;
    f->ok = ok;
    f->answers++;
}

static void claim_cb(const store_claim *res, void *priv)
{
    fixture *f = priv;
    f->claim = *res;
    assert_true(res->n <= 16);
    for (int i = 0; i < res->n; i++) {
        f->leases[i] = res->leases[i];
        snprintf(f->lease_ids[i], sizeof(f->lease_ids[i]), "%s", res->leases[i].id);
        f->leases[i].id = f->lease_ids[i];
        task_spec_free(res->leases[i].spec); /* the callback owns it */
        f->leases[i].spec = NULL;
    }
    f->answers++;
}

static void settled_cb(void *owner, const char *err, void *priv)
{
    fixture *f = priv;
    (void)owner;
    assert_null(err);
    f->settled++;
    f->answers++;
}

static void wm_cb(int64_t minute, const char *err, void *priv)
{
    fixture *f = priv;
    assert_null(err);
    f->wm = minute;
    f->answers++;
}

/* Add a task with `key` (NULL: one the store's caller makes), due
 * `delay_ms` after setup, as the API would; its id into f->id. */
static void add(fixture *f, const char *key, int64_t delay_ms, int64_t timeout_ms)
{
    task_input t;
    char err[256], json[512];
    snprintf(json, sizeof(json),
             "{%s%s%s\"callback_url\":\"http://127.0.0.1:1/\",\"execute_at\":%lld,"
             "\"timeout_ms\":%lld,\"retry\":{\"max_attempts\":3}}",
             key ? "\"key\":\"" : "", key ? key : "", key ? "\"," : "",
             (long long)(f->t0 + delay_ms), (long long)timeout_ms);
    cJSON *o = cJSON_Parse(json);
    assert_int_equal(task_input_parse(o, store_now_ms(f->s), &t, err, sizeof(err)), 0);
    cJSON_Delete(o);
    int before = f->answers;
    store_add(f->s, &t, add_cb, f);
    assert_int_equal(f->answers, before); /* never answered inside the call */
    wait_answers(f, 1);
    task_input_free(&t);
}

static const char *status_of(fixture *f, const char *id)
{
    static char s[32];
    store_get(f->s, id, get_cb, f);
    wait_answers(f, 1);
    if (f->st != ST_OK) return "none";
    const char *p = strstr(f->state, "\"s\":\"");
    assert_non_null(p);
    snprintf(s, sizeof(s), "%.*s", (int)strcspn(p + 5, "\""), p + 5);
    return s;
}

/* Claim what is due in minute's slice within the lookahead, as the
 * scheduler does while its room is not short. */
static void claim_slice(fixture *f, int64_t minute, int limit)
{
    store_claim_ask ask = {f->cfg.lookahead_ms, f->cfg.lookahead_ms, limit, limit, 1};
    store_claim_slice(f->s, 0, minute, &ask, claim_cb, f);
}

static void claim_now(fixture *f, int limit)
{
    claim_slice(f, store_now_ms(f->s) / 60000, limit);
    wait_answers(f, 1);
    assert_null(f->claim.err);
}

static void settle(fixture *f, const char *id, store_outcome o, int attempt, int64_t due_ms)
{
    char slice[TASK_SLICE_MAX];
    snprintf(slice, sizeof(slice), "%.*s", (int)(strchr(strchr(id, '.') + 1, '.') - id), id);
    store_attempt a = {.id = id, .src = slice, .outcome = o, .attempt = attempt,
                       .status_code = o == OUT_OK ? 0 : 500, .err = o == OUT_OK ? "" : "HTTP 500",
                       .due_ms = due_ms, .timeout_ms = 1000, .owner = f};
    store_settle(f->s, &a, 1, settled_cb, f);
    wait_answers(f, 1);
}

/* ---- the suite --------------------------------------------------------- */

static void test_add_get_idempotent(void **state)
{
    fixture *f = *state;
    add(f, "a1", 60000, 1000);
    assert_int_equal(f->st, ST_OK);
    assert_int_equal(f->added_bucket, 0);
    char id[TASK_ID_MAX];
    snprintf(id, sizeof(id), "%s", f->id);
    assert_string_equal(f->state, ""); /* stored: scheduled, no state sent back */
    add(f, "a1", 60000, 1000);
    assert_int_equal(f->st, ST_EXISTS);
    assert_string_equal(f->id, id);
    assert_non_null(strstr(f->state, "\"s\":\"scheduled\"")); /* the state found */
    store_get(f->s, id, get_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    cJSON *spec = cJSON_Parse(f->spec);
    assert_string_equal(cJSON_GetObjectItem(spec, "key")->valuestring, "a1");
    assert_string_equal(cJSON_GetObjectItem(spec, "callback_url")->valuestring,
                        "http://127.0.0.1:1/");
    assert_int_equal(cJSON_GetObjectItem(spec, "execute_at")->valuedouble, f->t0 + 60000);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "retry"), "max_attempts")
                         ->valuedouble, 3);
    cJSON_Delete(spec);
    store_get(f->s, "202611220000.0.1.nokey", get_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_NOTFOUND);
    store_get(f->s, "garbage", get_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_NOTFOUND);
    store_health(f->s, health_cb, f);
    wait_answers(f, 1);
    assert_true(f->ok);
}

static void test_cancel(void **state)
{
    fixture *f = *state;
    add(f, "c1", 60000, 1000);
    char id[TASK_ID_MAX];
    snprintf(id, sizeof(id), "%s", f->id);
    store_cancel(f->s, id, cancel_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    store_cancel(f->s, id, cancel_cb, f); /* twice is fine */
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    assert_string_equal(status_of(f, id), "cancelled");
    store_cancel(f->s, "202611220000.0.1.nokey", cancel_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_NOTFOUND);
}

static void count_cb(int64_t n, const char *err, void *priv)
{
    fixture *f = priv;
    f->wm = err ? -2 : n;
    f->answers++;
}

static int64_t count_of(fixture *f)
{
    store_count(f->s, count_cb, f);
    wait_answers(f, 1);
    return f->wm;
}

/* The count of scheduled tasks: every slice, cancelled ones left out. */
static void test_count(void **state)
{
    fixture *f = *state;
    assert_int_equal(count_of(f), 0);
    add(f, "n1", 60000, 1000);
    char id[TASK_ID_MAX];
    snprintf(id, sizeof(id), "%s", f->id);
    add(f, "n2", 61000, 1000);
    add(f, "n3", 3 * 3600000, 1000);
    add(f, "n4", 30LL * 86400000, 1000);
    add(f, "n4", 30LL * 86400000, 1000); /* the same task */
    assert_int_equal(count_of(f), 4);
    store_cancel(f->s, id, cancel_cb, f);
    wait_answers(f, 1);
    assert_int_equal(count_of(f), 3);
}

static void test_claim_settle_ok(void **state)
{
    fixture *f = *state;
    add(f, "k1", 0, 1000);
    add(f, "k2", -10, 1000);
    add(f, "far", 10 * 60000, 1000); /* another slice */
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 2);
    assert_int_equal(f->claim.taken, 2);
    assert_int_equal(f->claim.due_left, 0);
    assert_int_equal(f->claim.run_left, 2);
    /* oldest first */
    assert_true(f->leases[0].due_ms <= f->leases[1].due_ms);
    assert_int_equal(f->leases[0].attempt, 1);
    char id[TASK_ID_MAX];
    snprintf(id, sizeof(id), "%s", f->lease_ids[0]);
    assert_string_equal(status_of(f, id), "running");
    /* a running task cannot be cancelled */
    store_cancel(f->s, id, cancel_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_CONFLICT);
    assert_string_equal(f->detail, "running");
    settle(f, id, OUT_OK, 1, 0);
    assert_string_equal(status_of(f, id), "succeeded");
    assert_non_null(strstr(f->state, "\"a\":1"));
    /* a duplicate outcome changes nothing */
    settle(f, id, OUT_FAIL, 1, 0);
    assert_string_equal(status_of(f, id), "succeeded");
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 0);
    assert_int_equal(f->claim.run_left, 1);
}

static void test_retry_and_release(void **state)
{
    fixture *f = *state;
    add(f, "r1", 0, 1000);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1);
    char id[TASK_ID_MAX];
    snprintf(id, sizeof(id), "%s", f->lease_ids[0]);
    int64_t next = store_now_ms(f->s) + 100;
    settle(f, id, OUT_RETRY, 1, next);
    assert_string_equal(status_of(f, id), "scheduled");
    assert_non_null(strstr(f->state, "\"code\":500"));
    assert_non_null(strstr(f->state, "HTTP 500"));
    /* the retry is claimed from the slice of its due time, as attempt 2 */
    claim_slice(f, next / 60000, 10);
    wait_answers(f, 1);
    assert_null(f->claim.err);
    assert_int_equal(f->claim.n, 1);
    assert_string_equal(f->lease_ids[0], id);
    assert_int_equal(f->leases[0].attempt, 2);
    assert_int_equal(f->leases[0].due_ms, next);
    /* handed back unfired: due again, the same attempt */
    char src[TASK_SLICE_MAX];
    task_slice_name(next, 0, src);
    store_attempt a = {.id = id, .src = src, .outcome = OUT_RELEASE, .attempt = 2, .err = "",
                       .due_ms = next, .owner = f};
    store_settle(f->s, &a, 1, settled_cb, f);
    wait_answers(f, 1);
    assert_string_equal(status_of(f, id), "scheduled");
    claim_slice(f, next / 60000, 10);
    wait_answers(f, 1);
    assert_int_equal(f->claim.n, 1);
    assert_int_equal(f->leases[0].attempt, 2);
}

static void test_lease_expiry(void **state)
{
    fixture *f = *state;
    add(f, "e1", 0, 1); /* timeout 1 ms + margin 20 ms */
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 0); /* still leased */
    let_pass(f, 60);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1); /* its holder died: claimed again */
    assert_int_equal(f->leases[0].attempt, 1);
}

static void test_cancelled_is_not_claimed(void **state)
{
    fixture *f = *state;
    add(f, "x1", 0, 1000);
    store_cancel(f->s, f->id, cancel_cb, f);
    wait_answers(f, 1);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 0);
    assert_int_equal(f->claim.due_left, 0);
}

static void test_claim_limit(void **state)
{
    fixture *f = *state;
    char key[16];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "l%d", i);
        add(f, key, -i, 1000);
    }
    claim_now(f, 3);
    assert_int_equal(f->claim.n, 3);
    assert_int_equal(f->claim.taken, 3);
    assert_int_equal(f->claim.due_left, 2);
    claim_now(f, 3);
    assert_int_equal(f->claim.n, 2);
}

/* Of the tasks due at or after now + near_ms, a claim takes at most
 * far_limit; those due before, up to the limit. */
static void test_claim_far_limit(void **state)
{
    fixture *f = *state;
    char key[16];
    /* two due soon, three later, in one minute's slice */
    int64_t base = f->t0 + 300;
    if ((base + 300) / 60000 != base / 60000) base += 600;
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "f%d", i);
        add(f, key, base - f->t0 + (i < 2 ? 0 : 300), 1000);
    }
    store_claim_ask ask = {5000, base + 150 - store_now_ms(f->s), 10, 1, 1};
    store_claim_slice(f->s, 0, base / 60000, &ask, claim_cb, f);
    wait_answers(f, 1);
    assert_null(f->claim.err);
    assert_int_equal(f->claim.n, 3);
    assert_int_equal(f->claim.due_left, 2);
    assert_int_equal(f->leases[0].due_ms, base);
    assert_int_equal(f->leases[1].due_ms, base);
    assert_int_equal(f->leases[2].due_ms, base + 300);
    /* none far: only what is due soon, and nothing is left of that */
    ask.far_limit = 0;
    store_claim_slice(f->s, 0, base / 60000, &ask, claim_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->claim.n, 0);
    assert_int_equal(f->claim.due_left, 2);
    ask.far_limit = 10;
    store_claim_slice(f->s, 0, base / 60000, &ask, claim_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->claim.n, 2);
}

static void test_watermarks(void **state)
{
    fixture *f = *state;
    char err[256];
    assert_int_equal(store_wm_init(f->s, 1000, err, sizeof(err)), 0);
    assert_int_equal(store_wm_init(f->s, 5, err, sizeof(err)), 0); /* kept */
    store_wm_get(f->s, 0, wm_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->wm, 1000);
    store_wm_advance(f->s, 0, 1000, 1003, wm_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->wm, 1003);
    /* from a stale read: nothing moves */
    store_wm_advance(f->s, 0, 1000, 1010, wm_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->wm, 1003);
    /* never backwards */
    store_wm_advance(f->s, 0, 1003, 1001, wm_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->wm, 1003);
}

/* ---- listing and moves --------------------------------------------------- */

static void list_cb(const char *const *ids, int n, const char *next, const char *err, void *priv)
{
    fixture *f = priv;
    assert_null(err);
    assert_true(n <= 16);
    f->nlist = n;
    for (int i = 0; i < n; i++) snprintf(f->lids[i], sizeof(f->lids[i]), "%s", ids[i]);
    snprintf(f->cursor, sizeof(f->cursor), "%s", next ? next : "");
    f->answers++;
}

/* List `status`, `limit` a page, from the cursor in f (cursor "" = start). */
static void list(fixture *f, const char *status, int limit, int desc)
{
    store_list_query q = {.status = status, .desc = desc, .cursor = f->cursor, .limit = limit,
                          .from_ms = -1, .to_ms = -1, .key_prefix = ""};
    char cur[STORE_CURSOR_MAX];
    snprintf(cur, sizeof(cur), "%s", f->cursor);
    q.cursor = cur;
    store_list(f->s, &q, list_cb, f);
    wait_answers(f, 1);
}

static void move(fixture *f, const char *id, store_move_kind kind, int64_t due)
{
    store_move(f->s, id, kind, due, cancel_cb, f);
    wait_answers(f, 1);
}

static void test_list_pages(void **state)
{
    fixture *f = *state;
    char ids[5][TASK_ID_MAX];
    for (int i = 0; i < 5; i++) {
        char key[8];
        snprintf(key, sizeof(key), "l%d", i);
        add(f, key, 60000 + i * 10, 1000);
        snprintf(ids[i], sizeof(ids[i]), "%s", f->id);
    }
    store_cancel(f->s, ids[2], cancel_cb, f);
    wait_answers(f, 1);
    /* oldest first, two a page, each once */
    f->cursor[0] = '\0';
    list(f, "scheduled", 2, 0);
    assert_int_equal(f->nlist, 2);
    assert_string_equal(f->lids[0], ids[0]);
    assert_string_equal(f->lids[1], ids[1]);
    assert_true(f->cursor[0]);
    list(f, "scheduled", 2, 0);
    assert_int_equal(f->nlist, 2);
    assert_string_equal(f->lids[0], ids[3]);
    assert_string_equal(f->lids[1], ids[4]);
    list(f, "scheduled", 2, 0);
    assert_int_equal(f->nlist, 0);
    assert_string_equal(f->cursor, "");
    /* newest first */
    list(f, "scheduled", 3, 1);
    assert_int_equal(f->nlist, 3);
    assert_string_equal(f->lids[0], ids[4]);
    assert_string_equal(f->lids[2], ids[1]);
    f->cursor[0] = '\0';
    list(f, "cancelled", 10, 0);
    assert_int_equal(f->nlist, 1);
    assert_string_equal(f->lids[0], ids[2]);
    /* filters: key prefix, execute_at window */
    store_list_query q = {.status = "scheduled", .cursor = "", .limit = 10, .from_ms = -1,
                          .to_ms = -1, .key_prefix = "l4"};
    store_list(f->s, &q, list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nlist, 1);
    assert_string_equal(f->lids[0], ids[4]);
    q.key_prefix = "";
    q.from_ms = f->t0 + 60010;
    q.to_ms = f->t0 + 60040;
    store_list(f->s, &q, list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nlist, 2); /* l1, l3 (l2 is cancelled) */
}

static void test_retry_and_run_now(void **state)
{
    fixture *f = *state;
    /* a task that failed for good, run again */
    add(f, "d1", 0, 1000);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1);
    char id[TASK_ID_MAX];
    snprintf(id, sizeof(id), "%s", f->lease_ids[0]);
    settle(f, id, OUT_FAIL, 1, 0);
    assert_string_equal(status_of(f, id), "failed");
    f->cursor[0] = '\0';
    list(f, "failed", 10, 0);
    assert_int_equal(f->nlist, 1);
    move(f, id, MOVE_RUN, 0);
    assert_int_equal(f->st, ST_CONFLICT); /* run: scheduled tasks only */
    assert_string_equal(f->detail, "failed");
    move(f, id, MOVE_RETRY, 0);
    assert_int_equal(f->st, ST_OK);
    assert_string_equal(status_of(f, id), "scheduled");
    assert_non_null(strstr(f->state, "\"a\":0"));
    assert_non_null(strstr(f->state, "HTTP 500")); /* its history kept */
    list(f, "failed", 10, 0);
    assert_int_equal(f->nlist, 0);
    move(f, id, MOVE_RETRY, 0);
    assert_int_equal(f->st, ST_CONFLICT);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1);
    assert_string_equal(f->lease_ids[0], id);
    assert_int_equal(f->leases[0].attempt, 1);

    /* a task due in ten minutes, run now: claimed from this minute's slice */
    add(f, "n1", 600000, 1000);
    snprintf(id, sizeof(id), "%s", f->id);
    move(f, id, MOVE_RUN, 0);
    assert_int_equal(f->st, ST_OK);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1);
    assert_string_equal(f->lease_ids[0], id);
    /* its old entry does not run it again */
    claim_slice(f, (f->t0 + 600000) / 60000, 10);
    wait_answers(f, 1);
    assert_int_equal(f->claim.n, 0);
    move(f, "202611220000.0.1.nokey", MOVE_RETRY, 0);
    assert_int_equal(f->st, ST_NOTFOUND);
}

/* Tasks whose key the store's caller made (the Redis store keeps them fresh:
 * one :due member, no state) behave as any other. */
static void test_keyless_tasks(void **state)
{
    fixture *f = *state;
    char id1[TASK_ID_MAX], id2[TASK_ID_MAX], id3[TASK_ID_MAX], key[TASK_KEY_MAX + 1];
    add(f, NULL, 60000, 1000);
    assert_int_equal(f->st, ST_OK);
    snprintf(id1, sizeof(id1), "%s", f->id);
    assert_string_equal(status_of(f, id1), "scheduled");
    cJSON *spec = cJSON_Parse(f->spec);
    assert_non_null(spec);
    snprintf(key, sizeof(key), "%s", cJSON_GetObjectItem(spec, "key")->valuestring);
    assert_true(task_key_looks_random(key));
    assert_int_equal(cJSON_GetObjectItem(spec, "execute_at")->valuedouble, f->t0 + 60000);
    assert_int_equal(cJSON_GetObjectItem(spec, "timeout_ms")->valuedouble, 1000);
    cJSON_Delete(spec);
    /* the same key and time given: the same task, not a second one */
    add(f, key, 60000, 1000);
    assert_int_equal(f->st, ST_EXISTS);
    assert_string_equal(f->id, id1);

    f->cursor[0] = '\0';
    list(f, "scheduled", 10, 0);
    assert_int_equal(f->nlist, 1);
    assert_string_equal(f->lids[0], id1);

    add(f, NULL, 60000, 1000);
    snprintf(id2, sizeof(id2), "%s", f->id);
    store_cancel(f->s, id2, cancel_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    assert_string_equal(status_of(f, id2), "cancelled");
    assert_non_null(strstr(f->spec, "http://127.0.0.1:1/"));

    add(f, NULL, 600000, 1000);
    snprintf(id3, sizeof(id3), "%s", f->id);
    move(f, id3, MOVE_RUN, 0);
    assert_int_equal(f->st, ST_OK);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1);
    assert_string_equal(f->lease_ids[0], id3);
    assert_int_equal(f->leases[0].attempt, 1);
    settle(f, id3, OUT_OK, 1, 0);
    assert_string_equal(status_of(f, id3), "succeeded");

    /* one due soon, claimed when it is: polled, each claim answered at once */
    add(f, NULL, store_now_ms(f->s) - f->t0 + 150, 1000);
    snprintf(id3, sizeof(id3), "%s", f->id);
    int64_t until = store_now_ms(f->s) + 5000;
    do {
        claim_now(f, 10);
        if (f->claim.n == 0) let_pass(f, 10);
    } while (f->claim.n == 0 && store_now_ms(f->s) < until);
    assert_int_equal(f->claim.n, 1);
    assert_string_equal(f->lease_ids[0], id3);
    assert_string_equal(status_of(f, id3), "running");
    settle(f, id3, OUT_OK, 1, 0);
    assert_string_equal(status_of(f, id3), "succeeded");
    /* the first is untouched; the cancelled one is never claimed */
    assert_string_equal(status_of(f, id1), "scheduled");
    claim_slice(f, (f->t0 + 60000) / 60000, 10);
    wait_answers(f, 1);
    assert_int_equal(f->claim.n, 0);
}

/* ---- schedules ---------------------------------------------------------- */

static void sch_cb(store_status st, const store_schedule *sc, const char *err, void *priv)
{
    fixture *f = priv;
    (void)err;
    f->st = st;
    snprintf(f->sdef, sizeof(f->sdef), "%s", sc && sc->def ? sc->def : "");
    snprintf(f->sstate, sizeof(f->sstate), "%s", sc && sc->state ? sc->state : "");
    snprintf(f->sprev, sizeof(f->sprev), "%s", sc && sc->prev ? sc->prev : "");
    f->answers++;
}

static void sch_list_cb(const store_schedule *items, int n, const char *err, void *priv)
{
    fixture *f = priv;
    assert_null(err);
    assert_true(n <= 8);
    f->nsched = n;
    for (int i = 0; i < n; i++) {
        snprintf(f->sids[i], sizeof(f->sids[i]), "%s", items[i].id);
        snprintf(f->sstates[i], sizeof(f->sstates[i]), "%s", items[i].state);
    }
    f->answers++;
}

static void sch_write(fixture *f, store_sch_op op, const char *id, const char *def, int64_t next)
{
    store_sch_write(f->s, op, id, def, next, sch_cb, f);
    wait_answers(f, 1);
}

static int64_t num_of(const char *json, const char *k)
{
    cJSON *o = cJSON_Parse(json);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    int64_t n = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -999;
    cJSON_Delete(o);
    return n;
}

static void test_schedule_write_get_list(void **state)
{
    fixture *f = *state;
    int64_t next = f->t0 + 60000;
    sch_write(f, SCH_CREATE, "sch.b", "{\"d\":1}", next);
    assert_int_equal(f->st, ST_OK);
    assert_non_null(strstr(f->sstate, "\"st\":\"active\""));
    assert_int_equal(num_of(f->sstate, "next"), next);
    sch_write(f, SCH_CREATE, "sch.b", "{\"d\":1}", next + 1);
    assert_int_equal(f->st, ST_EXISTS);
    assert_int_equal(num_of(f->sstate, "next"), next);
    sch_write(f, SCH_CREATE, "sch.b", "{\"d\":2}", next);
    assert_int_equal(f->st, ST_CONFLICT);
    assert_string_equal(f->sdef, "{\"d\":1}");
    sch_write(f, SCH_CREATE, "sch.a", "{\"d\":3}", next);
    sch_write(f, SCH_CREATE, "sch.c", "{\"d\":4}", -1);
    assert_non_null(strstr(f->sstate, "\"st\":\"completed\""));

    store_sch_list(f->s, 0, "", 2, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 2);
    assert_string_equal(f->sids[0], "sch.a");
    assert_string_equal(f->sids[1], "sch.b");
    store_sch_list(f->s, 0, "sch.b", 5, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 1);
    assert_string_equal(f->sids[0], "sch.c");

    /* replace keeps runs, bumps the version */
    sch_write(f, SCH_REPLACE, "sch.b", "{\"d\":5}", next + 5);
    assert_int_equal(f->st, ST_OK);
    assert_int_equal(num_of(f->sstate, "v"), 2);
    assert_int_equal(num_of(f->sprev, "v"), 1);
    store_sch_get(f->s, "sch.b", sch_cb, f);
    wait_answers(f, 1);
    assert_string_equal(f->sdef, "{\"d\":5}");
    sch_write(f, SCH_PAUSE, "sch.b", NULL, -1);
    assert_non_null(strstr(f->sstate, "\"st\":\"paused\""));
    sch_write(f, SCH_PAUSE, "sch.c", NULL, -1);
    assert_int_equal(f->st, ST_CONFLICT);           /* completed */
    sch_write(f, SCH_RESUME, "sch.b", NULL, next + 9);
    assert_int_equal(num_of(f->sstate, "next"), next + 9);
    assert_non_null(strstr(f->sstate, "\"st\":\"active\""));
    sch_write(f, SCH_DELETE, "sch.b", NULL, -1);
    assert_int_equal(f->st, ST_OK);
    store_sch_get(f->s, "sch.b", sch_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_NOTFOUND);
    sch_write(f, SCH_DELETE, "sch.b", NULL, -1);
    assert_int_equal(f->st, ST_NOTFOUND);
}

static void test_schedule_claim_lease_advance(void **state)
{
    fixture *f = *state;
    int64_t now = store_now_ms(f->s);
    sch_write(f, SCH_CREATE, "sch.due", "{}", now + 1000);
    sch_write(f, SCH_CREATE, "sch.later", "{}", now + 600000);
    sch_write(f, SCH_CREATE, "sch.paused", "{}", now);
    sch_write(f, SCH_PAUSE, "sch.paused", NULL, -1);
    /* only what is due before `until`, and active */
    store_sch_claim(f->s, 0, now + 1500, 10, 1600, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 1);
    assert_string_equal(f->sids[0], "sch.due");
    int64_t ct = num_of(f->sstates[0], "ct");
    assert_true(ct >= now);
    /* leased (a lease is longer than the claim's reach): not claimed again
     * while the lease runs */
    store_sch_claim(f->s, 0, now + 1500, 10, 1600, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 0);
    /* the lease expires: claimed again with the same clock (kept while
     * the runs it homed can still get the same ids) */
    let_pass(f, 1700);
    store_sch_claim(f->s, 0, store_now_ms(f->s) + 1500, 10, 1600, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 1);
    assert_int_equal(num_of(f->sstates[0], "ct"), ct);
    /* advance records the pass and ends the lease */
    const char *fut[] = {"202611220000.0.4102444800000.s:due:1"};
    store_sch_pass p = {.ct = ct, .v = 1, .made = 2, .skipped = 1, .last_at = now + 1000,
                        .last_id = "x1", .next = now + 120000, .fut = fut, .nfut = 1};
    store_sch_advance(f->s, "sch.due", &p, sch_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    assert_int_equal(num_of(f->sstate, "runs"), 2);
    assert_int_equal(num_of(f->sstate, "skipped"), 1);
    assert_int_equal(num_of(f->sstate, "next"), now + 120000);
    assert_int_equal(num_of(f->sstate, "ct"), -999);
    assert_non_null(strstr(f->sstate, fut[0]));
    /* a stale lease's advance is refused */
    store_sch_advance(f->s, "sch.due", &p, sch_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_CONFLICT);
    /* next is indexed: claimed when due */
    store_sch_claim(f->s, 0, now + 119000, 10, 300, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 0);
    store_sch_claim(f->s, 0, now + 121000, 10, 300, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 1);
    /* a PUT during the pass: the advance records the runs, keeps PUT's next */
    ct = num_of(f->sstates[0], "ct");
    sch_write(f, SCH_REPLACE, "sch.due", "{\"new\":1}", now + 777000);
    p.ct = ct;
    p.next = -1;
    store_sch_advance(f->s, "sch.due", &p, sch_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    assert_int_equal(num_of(f->sstate, "runs"), 4);
    assert_int_equal(num_of(f->sstate, "next"), now + 777000);
    assert_non_null(strstr(f->sstate, "\"st\":\"active\""));
    /* the last run made: completed, and no longer claimed */
    store_sch_claim(f->s, 0, now + 800000, 10, 300, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 2); /* sch.due and sch.later */
    for (int i = 0; i < 2; i++) {
        store_sch_pass q = {.ct = num_of(f->sstates[i], "ct"), .v = num_of(f->sstates[i], "v"),
                            .next = -1};
        store_sch_advance(f->s, f->sids[i], &q, sch_cb, f);
        wait_answers(f, 1);
        assert_non_null(strstr(f->sstate, "\"st\":\"completed\""));
    }
    store_sch_claim(f->s, 0, now + 10000000, 10, 300, sch_list_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->nsched, 0);
}

/* ---- every record reads back ---------------------------------------- */

static void flow_done_cb(int n, const char *err, void *priv)
{
    fixture *f = priv;
    (void)n;
    assert_null(err);
    f->answers++;
}

static void flow_info_cb(const store_flow_info *items, int n, const char *err, void *priv)
{
    fixture *f = priv;
    assert_null(err);
    snprintf(f->flow, sizeof(f->flow), "%s", n > 0 && items[0].settings ? items[0].settings : "");
    f->answers++;
}

/* The spec read back is want (the task as given, every default explicit):
 * the same members, the same values. */
static void spec_same(fixture *f, const char *id, const char *want)
{
    store_get(f->s, id, get_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    cJSON *a = cJSON_Parse(want), *b = cJSON_Parse(f->spec);
    if (!a || !b || !cJSON_Compare(a, b, 1)) fail_msg("stored:\n%s\nread back:\n%s", want, f->spec);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* Records written with the extreme values the API takes read back the same:
 * the latest times (a task ten years ahead and retried there, a schedule's
 * run in 9999), the most attempts, the longest backoff and timeout, numbers
 * of req at a double's edges, rates and limits at their bounds. */
static void test_round_trip_extremes(void **state)
{
    fixture *f = *state;
    char json[1024], err[300], id[TASK_ID_MAX];
    int64_t at = store_now_ms(f->s) + TASK_MAX_AHEAD_MS;
    snprintf(json, sizeof(json),
             "{\"key\":\"x1\",\"callback_url\":\"http://127.0.0.1:1/\",\"method\":\"POST\","
             "\"execute_at\":%lld,\"timeout_ms\":300000,\"retry\":{\"max_attempts\":100,\"backoff_ms\":86400000},"
             "\"req\":{\"int\":999999999999999,\"neg\":-999999999999999,"
             "\"max\":1.79769313486231e308,\"min\":-2.2250738585072e-308,\"sub\":4.94065645841247e-324,"
             "\"frac\":0.123456789012345,\"big\":1e300,\"zero\":-0.0,\"a\":[1e-300,123456789012345]}}",
             (long long)at);
    cJSON *o = cJSON_Parse(json);
    task_input t;
    if (task_input_parse(o, store_now_ms(f->s), &t, err, sizeof(err)) != 0) fail_msg("%s", err);
    cJSON_Delete(o);
    store_add(f->s, &t, add_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    snprintf(id, sizeof(id), "%s", f->id);
    spec_same(f, id, json);
    assert_int_equal(num_of(f->state, "due"), at);
    /* cancelled, then retried at the farthest time a retry may have */
    store_cancel(f->s, id, cancel_cb, f);
    wait_answers(f, 1);
    assert_int_equal(f->st, ST_OK);
    move(f, id, MOVE_RETRY, at);
    assert_int_equal(f->st, ST_OK);
    assert_string_equal(status_of(f, id), "scheduled");
    assert_int_equal(num_of(f->state, "due"), at);
    spec_same(f, id, json);
    task_input_free(&t);

    /* a schedule whose run is the last ms of 9999 */
    schedule_def d;
    o = cJSON_Parse("{\"key\":\"late\",\"every_ms\":316224000000,"
                    "\"start_at\":\"9999-12-31T23:59:59.999Z\",\"times\":4503599627370496,"
                    "\"task\":{\"callback_url\":\"http://127.0.0.1:1/\","
                    "\"retry\":{\"max_attempts\":100}}}");
    if (schedule_def_parse(o, store_now_ms(f->s), &d, err, sizeof(err)) != 0) fail_msg("%s", err);
    cJSON_Delete(o);
    sch_write(f, SCH_CREATE, "sch.late", d.json, TASK_TIME_MAX_MS);
    assert_int_equal(f->st, ST_OK);
    assert_int_equal(num_of(f->sstate, "next"), TASK_TIME_MAX_MS);
    store_sch_get(f->s, "sch.late", sch_cb, f);
    wait_answers(f, 1);
    assert_string_equal(f->sdef, d.json);
    assert_int_equal(num_of(f->sstate, "next"), TASK_TIME_MAX_MS);
    sch_write(f, SCH_PAUSE, "sch.late", NULL, -1);
    sch_write(f, SCH_RESUME, "sch.late", NULL, TASK_TIME_MAX_MS);
    assert_int_equal(num_of(f->sstate, "next"), TASK_TIME_MAX_MS);
    assert_int_equal(num_of(f->sprev, "next"), TASK_TIME_MAX_MS);
    schedule_def_free(&d);

    /* flow settings at their bounds, written again by a pause */
    if (!store_has_flow(f->s)) return;
    const char *bodies[] = {"{\"rate\":0.0001,\"burst\":1000000,\"max_concurrency\":1000000}",
                            "{\"rate\":1000000}", "{\"rate\":0.12345678901234,\"burst\":7}"};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(*bodies); i++) {
        flow_settings fs, back;
        o = cJSON_Parse(bodies[i]);
        assert_int_equal(flow_settings_parse(o, 1, &fs, err, sizeof(err)), 0);
        cJSON_Delete(o);
        char *js = flow_settings_json(&fs, 1);
        store_flow_put(f->s, "q:rt", js, flow_done_cb, f);
        wait_answers(f, 1);
        free(js);
        store_flow_put(f->s, "q:rt", "+paused", flow_done_cb, f);
        wait_answers(f, 1);
        store_flow_get(f->s, "q:rt", flow_info_cb, f);
        wait_answers(f, 1);
        o = cJSON_Parse(f->flow);
        assert_int_equal(flow_settings_parse(o, 1, &back, err, sizeof(err)), 0);
        cJSON_Delete(o);
        if (back.rate != fs.rate || back.burst != (fs.burst ? fs.burst : 1) ||
            back.max_concurrency != fs.max_concurrency || !back.paused)
            fail_msg("%s read back as %s", bodies[i], f->flow);
    }
}


/* ---- the console: history and replicas ---------------------------------- */

typedef struct console_answers {
    fixture *f;
    char err[256];
    int n;
    store_hist mins[8];
    store_hist_queue queues[8][STORE_HIST_QUEUES + 2];
    char rep_ids[4][64], rep_listen[4][64];
    store_replica reps[4];
} console_answers;

static void done_cb(const char *err, void *priv)
{
    console_answers *c = priv;
    assert_null(err);
    c->f->answers++;
}

static void hist_cb(const store_hist *m, int n, const char *err, void *priv)
{
    console_answers *c = priv;
    assert_null(err);
    assert_true(n <= 8);
    c->n = n;
    for (int i = 0; i < n; i++) {
        c->mins[i] = m[i];
        assert_true(m[i].nqueues <= STORE_HIST_QUEUES + 1);
        if (m[i].nqueues)
            memcpy(c->queues[i], m[i].queues, sizeof(*m[i].queues) * (size_t)m[i].nqueues);
        c->mins[i].queues = c->queues[i];
    }
    c->f->answers++;
}

static int64_t queue_failed(const store_hist *h, const char *q)
{
    for (int i = 0; i < h->nqueues; i++)
        if (strcmp(h->queues[i].name, q) == 0) return h->queues[i].failed;
    return -1;
}

/* Two replicas' counts of one minute are summed; minutes outside the range
 * and minutes never written are not answered; queues past the bound are
 * counted as the rest. */
static void test_history_sum(void **state)
{
    fixture *f = *state;
    console_answers *c = xcalloc(1, sizeof(*c));
    c->f = f;
    int64_t m0 = store_now_ms(f->s) / 60000 - 3;
    store_hist_queue qa[2] = {{"mail", 2}, {"sms", 1}}, qb[1] = {{"mail", 5}};
    store_hist a = {.minute = m0, .succeeded = 10, .attempts_failed = 4, .retried = 1,
                    .failed = 3, .expired = 1, .nqueues = 2, .queues = qa};
    store_hist b = {.minute = m0, .succeeded = 7, .attempts_failed = 5, .failed = 5,
                    .nqueues = 1, .queues = qb};
    a.lateness[0] = 8, a.lateness[STORE_HIST_BUCKETS - 1] = 1;
    b.lateness[0] = 2, b.lateness[3] = 5;
    store_hist later = {.minute = m0 + 2, .succeeded = 1};
    int before = f->answers;
    store_hist_add(f->s, &a, 3600000, done_cb, c);
    store_hist_add(f->s, &b, 3600000, done_cb, c);
    store_hist_add(f->s, &later, 3600000, done_cb, c);
    assert_int_equal(f->answers, before); /* never answered inside the call */
    wait_answers(f, 3);

    store_hist_read(f->s, m0 - 1, m0 + 3, hist_cb, c);
    wait_answers(f, 1);
    assert_int_equal(c->n, 2);
    const store_hist *h = &c->mins[0];
    assert_int_equal(h->minute, m0);
    assert_int_equal(h->succeeded, 17);
    assert_int_equal(h->attempts_failed, 9);
    assert_int_equal(h->retried, 1);
    assert_int_equal(h->failed, 8);
    assert_int_equal(h->expired, 1);
    assert_int_equal(h->lateness[0], 10);
    assert_int_equal(h->lateness[3], 5);
    assert_int_equal(h->lateness[STORE_HIST_BUCKETS - 1], 1);
    assert_int_equal(h->nqueues, 2);
    assert_int_equal(queue_failed(h, "mail"), 7);
    assert_int_equal(queue_failed(h, "sms"), 1);
    assert_int_equal(c->mins[1].minute, m0 + 2);
    assert_int_equal(c->mins[1].succeeded, 1);

    /* a range that ends before the later minute leaves it out */
    store_hist_read(f->s, m0 + 1, m0 + 2, hist_cb, c);
    wait_answers(f, 1);
    assert_int_equal(c->n, 0);

    /* a range across an hour's end (two calls on Redis) */
    int64_t h0 = (m0 / 60) * 60 - 61; /* the last minute of an hour, before m0's hour */
    store_hist x = {.minute = h0, .retried = 2}, y = {.minute = h0 + 1, .retried = 3};
    store_hist_add(f->s, &x, 86400000, done_cb, c);
    store_hist_add(f->s, &y, 86400000, done_cb, c);
    wait_answers(f, 2);
    store_hist_read(f->s, h0, h0 + 2, hist_cb, c);
    wait_answers(f, 1);
    assert_int_equal(c->n, 2);
    assert_int_equal(c->mins[0].minute, h0);
    assert_int_equal(c->mins[0].retried, 2);
    assert_int_equal(c->mins[1].retried, 3);

    /* the bound: STORE_HIST_QUEUES queues apart per minute, whoever wrote
     * them, the rest together */
    store_hist_queue many[STORE_HIST_QUEUES + 3];
    for (int i = 0; i < STORE_HIST_QUEUES + 3; i++) {
        snprintf(many[i].name, sizeof(many[i].name), "q%d", i);
        many[i].failed = 1;
    }
    store_hist first = {.minute = m0 + 1, .nqueues = STORE_HIST_QUEUES, .queues = many};
    store_hist rest = {.minute = m0 + 1, .nqueues = 4, .queues = many + STORE_HIST_QUEUES - 1};
    store_hist_add(f->s, &first, 3600000, done_cb, c);
    store_hist_add(f->s, &rest, 3600000, done_cb, c);
    wait_answers(f, 2);
    store_hist_read(f->s, m0 + 1, m0 + 2, hist_cb, c);
    wait_answers(f, 1);
    assert_int_equal(c->n, 1);
    assert_int_equal(c->mins[0].nqueues, STORE_HIST_QUEUES + 1);
    assert_int_equal(queue_failed(&c->mins[0], "q0"), 1);
    assert_int_equal(queue_failed(&c->mins[0], "q31"), 2);
    assert_int_equal(queue_failed(&c->mins[0], STORE_HIST_OTHER), 3);
    free(c);
}

static void replicas_cb(const store_replica *r, int n, const char *err, void *priv)
{
    console_answers *c = priv;
    assert_null(err);
    assert_true(n <= 4);
    c->n = n;
    for (int i = 0; i < n; i++) {
        c->reps[i] = r[i];
        snprintf(c->rep_ids[i], sizeof(c->rep_ids[i]), "%s", r[i].id);
        snprintf(c->rep_listen[i], sizeof(c->rep_listen[i]), "%s", r[i].listen);
        c->reps[i].id = c->rep_ids[i];
        c->reps[i].listen = c->rep_listen[i];
        c->reps[i].version = NULL;
    }
    c->f->answers++;
}

static int replica_index(const console_answers *c, const char *id)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->reps[i].id, id) == 0) return i;
    return -1;
}

/* Reports are read back until their ttl ends or their replica leaves. */
static void test_replicas(void **state)
{
    fixture *f = *state;
    console_answers *c = xcalloc(1, sizeof(*c));
    c->f = f;
    store_replica a = {"host-a:1", "127.0.0.1:8080", "1.0.0", f->t0 - 5000, 0, 3, 7};
    store_replica b = {"host-b:2", "127.0.0.1:8081", "1.0.0", f->t0, 0, 0, 0};
    store_replica_put(f->s, &a, 60000, done_cb, c);
    store_replica_put(f->s, &b, 150, done_cb, c);
    wait_answers(f, 2);
    store_replicas(f->s, replicas_cb, c);
    wait_answers(f, 1);
    assert_int_equal(c->n, 2);
    int i = replica_index(c, "host-a:1");
    assert_true(i >= 0);
    assert_string_equal(c->reps[i].listen, "127.0.0.1:8080");
    assert_int_equal(c->reps[i].started_at_ms, f->t0 - 5000);
    assert_int_equal(c->reps[i].inflight, 3);
    assert_int_equal(c->reps[i].held, 7);
    assert_true(c->reps[i].seen_ms >= f->t0);

    /* b's ttl ends: it is gone, a stays */
    let_pass(f, 200);
    store_replicas(f->s, replicas_cb, c);
    wait_answers(f, 1);
    assert_int_equal(c->n, 1);
    assert_true(replica_index(c, "host-a:1") == 0);

    /* a leaves */
    store_replica_del(f->s, "host-a:1", done_cb, c);
    wait_answers(f, 1);
    store_replicas(f->s, replicas_cb, c);
    wait_answers(f, 1);
    assert_int_equal(c->n, 0);
    free(c);
}

/* The memory store reads every "now" from its clock: a task's time, its
 * lease, and the retention of a finished one all follow a fake clock that
 * no wall clock moves. */
static void test_memory_store_follows_its_clock(void **state)
{
    fixture *f = *state;
    assert_int_equal(store_now_ms(f->s), f->fake_now_ms);
    f->fake_now_ms += 3 * 86400000LL;
    assert_int_equal(store_now_ms(f->s), f->fake_now_ms);
    f->t0 = store_now_ms(f->s);
    add(f, "c1", 0, 1000);
    char home[TASK_SLICE_MAX];
    task_slice_name(f->t0, 0, home); /* its id names the fake clock's minute */
    assert_prefix(f->id, home);
    claim_now(f, 10);
    assert_int_equal(f->claim.n, 1);
    char id[TASK_ID_MAX];
    snprintf(id, sizeof(id), "%s", f->lease_ids[0]);
    assert_int_equal(f->leases[0].due_ms, f->t0);
    settle(f, id, OUT_OK, 1, 0);
    assert_string_equal(status_of(f, id), "succeeded");
    let_pass(f, f->cfg.retention_ms - 1000);
    assert_string_equal(status_of(f, id), "succeeded");
    let_pass(f, 2000);
    assert_string_equal(status_of(f, id), "none"); /* past its retention */
}

#define BOTH(t) cmocka_unit_test_setup_teardown(t, setup_memory, teardown), \
                cmocka_unit_test_setup_teardown(t, setup_redis, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(test_add_get_idempotent), BOTH(test_cancel), BOTH(test_count), BOTH(test_claim_settle_ok),
        BOTH(test_retry_and_release), BOTH(test_lease_expiry),
        BOTH(test_cancelled_is_not_claimed), BOTH(test_claim_limit), BOTH(test_claim_far_limit),
        BOTH(test_watermarks),
        BOTH(test_schedule_write_get_list), BOTH(test_schedule_claim_lease_advance),
        BOTH(test_list_pages), BOTH(test_retry_and_run_now), BOTH(test_keyless_tasks),
        BOTH(test_round_trip_extremes), BOTH(test_history_sum), BOTH(test_replicas),
        cmocka_unit_test_setup_teardown(test_memory_store_follows_its_clock, setup_memory,
                                        teardown),
    };
    if (redis_start() != 0) {
        fprintf(stderr, "test_store: no redis-server: the Redis store's runs are skipped\n");
        redis_port = 0;
    }
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    redis_stop();
    return failed;
}
