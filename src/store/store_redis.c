/* store_redis.c -- the Redis store (store.h): the Lua scripts of lua/, the
 * slice keys, and every reply read into the typed results of store.h.
 *
 * Key schema v1 is documented in lua/lib.lua; every key name is built here,
 * in rs_key and rs_wm_key. Every operation touches the keys of one slice (one
 * hash tag) per Redis call, so it runs on one node of a cluster. */
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "base/log.h"
#include "store/rcluster.h"
#include "store/script.h"
#include "model/schedule.h"
#include "base/tz.h"
#include "base/util.h"

typedef enum {
    SCRIPT_ADD, SCRIPT_CANCEL, SCRIPT_CLAIM, SCRIPT_FETCH, SCRIPT_SETTLE,
    SCRIPT_PTR, SCRIPT_WM, SCRIPT_SCHED, SCRIPT_MOVE, SCRIPT_LIST, SCRIPT_FLOW, SCRIPT_GET,
    SCRIPT_COUNT
} rs_script;

static const char *script_names[SCRIPT_COUNT] = {
    "add", "cancel", "claim", "fetch", "settle", "ptr", "wm", "sched", "move", "list", "flow",
    "get"};

/* The five keys of a slice, in the order the scripts take them. */
enum { K_DUE, K_TASK, K_DEL, K_RUN, K_PTR, K_OK, K_FAILED, K_CANCELLED, K_WAIT, K_EXPIRED,
       K_COUNT };
#define KEY_MAX 128

typedef struct store_add_batch store_add_batch;
#define REG_CACHE 1024

typedef struct rstore {
    store base;
    struct event_base *ev;
    rcluster *rc;
    const char *prefix;
    int buckets;
    char *src[SCRIPT_COUNT];   /* lib.lua's part the script uses + the script (script.h) */
    char sha[SCRIPT_COUNT][41];
    int64_t clock_offset_us;   /* Redis TIME - local monotonic clock */
    int64_t clock_asked_us;    /* when the last TIME in flight was asked; 0: none */
    int64_t clock_set_us;      /* when the offset was last taken */
    store_add_batch *adds;     /* adds gathered in this loop turn */
    int call_may_have_run;     /* for a script call's callback: it was sent and
                                * its answer lost at least once (rs_eval_cb) */
    int add_bucket;            /* this turn's bucket for tasks without a key */
    struct event *flush_ev;    /* sends them at the end of the turn */
    util_pool add_ops;         /* an add's store_op, made and freed a POST each */
    struct qcount *counts;     /* queue counts changed, not yet sent */
    log_limit warn;
    struct rs_watch *watch;    /* memory policy and data markers (rs_watch_*) */
    int meta_wm;               /* P:meta said at start the watermarks were written */
    /* slices this process put in the registry P:slices (a cache: a slot
     * overwritten only costs one more ZADD) */
    char registered[REG_CACHE][TASK_SLICE_MAX];
} rstore;

#define RS(s) container_of(s, rstore, base)
#define s_cfg(rs) ((rs)->base.cfg)

/* ---- key names: the only place they are built -------------------------- */

static void rs_key(const rstore *rs, const char *slice, int kind, char *out)
{
    static const char *suffix[K_COUNT] = {"due", "task", "del", "run", "ptr", "ok", "failed",
                                          "cancelled", "w", "expired"};
    /* made for every claim, settle and add call: no format to parse */
    util_buf b = {out, 0, KEY_MAX};
    util_buf_str(&b, rs->prefix);
    util_buf_add(&b, ":{", 2);
    util_buf_str(&b, slice);
    util_buf_add(&b, "}:", 2);
    util_buf_str(&b, suffix[kind]);
}

static void rs_wm_key(const rstore *rs, int bucket, char *out)
{
    snprintf(out, KEY_MAX, "%s:wm:{%d}", rs->prefix, bucket);
}

/* The schedules of bucket b: definitions and states, the next-run index, the
 * listing index. */
static void rs_sch_keys(const rstore *rs, int bucket, char out[3][KEY_MAX])
{
    static const char *suffix[3] = {"sdef", "snext", "sall"};
    for (int i = 0; i < 3; i++)
        snprintf(out[i], KEY_MAX, "%s:{sc.%d}:%s", rs->prefix, bucket, suffix[i]);
}

static void rs_slices_key(const rstore *rs, char *out)
{
    snprintf(out, KEY_MAX, "%s:slices", rs->prefix);
}

static void rs_meta_key(const rstore *rs, char *out)
{
    snprintf(out, KEY_MAX, "%s:meta", rs->prefix);
}


/* The keys `which` of a slice, into k (as argv pointers in kp). */
typedef struct rs_keys {
    char k[K_COUNT][KEY_MAX];
    const char *p[K_COUNT];
} rs_keys;

static void rs_keys_of(const rstore *rs, const char *slice, const int *which, int n, rs_keys *k)
{
    for (int i = 0; i < n; i++) {
        rs_key(rs, slice, which[i], k->k[i]);
        k->p[i] = k->k[i];
    }
}

static const int KEYS_CLAIM[] = {K_DUE, K_TASK, K_DEL, K_RUN, K_PTR};
static const int KEYS_SETTLE[] = {K_DUE, K_TASK, K_DEL, K_RUN, K_OK, K_FAILED, K_CANCELLED,
                                  K_EXPIRED};
static const int KEYS_PTR[] = {K_DUE, K_RUN, K_PTR};
static const int KEYS_ADD[] = {K_DUE, K_TASK, K_DEL};
/* fetch and move: the home slice */
static const int KEYS_HOME[] = {K_DUE, K_TASK, K_DEL, K_OK, K_FAILED, K_CANCELLED, K_EXPIRED};
static const int KEYS_LIST[] = {K_DUE, K_RUN, K_OK, K_FAILED, K_CANCELLED, K_DEL, K_TASK,
                                K_EXPIRED};

/* The error text of a failed call: the error reply's, or rcluster's. */
static const char *rs_err(const redisReply *r, const char *err)
{
    if (r && r->type == REDIS_REPLY_ERROR) return r->str;
    if (r) return "unexpected reply";
    return err ? err : "unavailable";
}

/* Redis TIME carried forward by the monotonic clock between two readings
 * of it (each tick): a step of the wall clock (NTP, an operator) moves
 * nothing, where carried by the wall clock it moved "now" by the step until
 * the next reading, and tasks on the wheel fired up to lookahead_ms early. */
static int64_t rs_now_us(const store *s)
{
    return util_mono_us() + RS(s)->clock_offset_us;
}

static int64_t rs_now_ms(const store *s)
{
    return rs_now_us(s) / 1000;
}

/* ---- eval with NOSCRIPT fallback --------------------------------------- */

/* A script call. Its command is written once, in RESP, in the same block:
 * room for the head, then the tail (keys and arguments), which the NOSCRIPT
 * resend puts behind a head of its own. */
#define RS_HEAD_MAX 128
typedef struct rs_call {
    rstore *rs;
    rs_script sc;
    int argc;
    char route[KEY_MAX];
    rc_reply_fn *cb;
    void *priv;
    int lane;
    char *tail;          /* the keys and arguments, after the head's room */
    size_t tail_len;
    char *eval;          /* the NOSCRIPT resend's command, malloc'd; NULL before */
    char *again;         /* in the command sent last (tail or eval), the byte
                          * rcluster sets on a resend; NULL: none */
} rs_call;

/* The head of c's command, for `name` ("EVALSHA" or "EVAL") and `body`
 * (the sha or the source), into out: its length. */
static size_t rs_eval_head(const rs_call *c, const char *name, const char *body, char *out)
{
    char *p = rc_resp_count(out, (size_t)c->argc);
    p = rc_resp_arg(p, name, strlen(name));
    p = rc_resp_arg(p, body, strlen(body));
    return (size_t)(p - out);
}

static void rs_eval_cb(redisReply *r, const char *err, void *priv)
{
    rs_call *c = priv;
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0 && !c->eval) {
        /* The node lost its scripts (flush, failover): send the source once. */
        const char *src = c->rs->src[c->sc];
        c->eval = xmalloc(RC_RESP_HEAD + RC_RESP_ARG(4) + RC_RESP_ARG(strlen(src)) + c->tail_len);
        size_t h = rs_eval_head(c, "EVAL", src, c->eval);
        memcpy(c->eval + h, c->tail, c->tail_len);
        /* (the byte as it was: set if the EVALSHA was sent again) */
        if (c->again) c->again = c->eval + h + (c->again - c->tail);
        rc_command_resp(c->rs->rc, c->route, c->lane, rs_eval_cb, c, c->eval, h + c->tail_len,
                        c->again);
        return;
    }
    /* a call whose again byte is set was sent before and not answered; one
     * given no answer now may have run too */
    c->rs->call_may_have_run = (c->again && *c->again == '1') || (!r && rc_reply_sent(c->rs->rc));
    c->cb(r, err, c->priv);
    free(c->eval);
    free(c); /* the command lives in the same block */
}

/* The fence of key's slot: P:{tag}:fence, a key no one writes, named last
 * in the KEYS of every script rs_eval and rs_console_eval run (the marker's
 * goes without: it reads and writes the one key it names, which Redis's
 * own rule serves as it does a plain command). A slot that moves between two masters (a reshard)
 * lets a call run on either only where all the keys it names are: the
 * fence is never there, so both answer TRYAGAIN (or ASK, then TRYAGAIN) and
 * the call is sent again until the slot has moved. Without it a script ran
 * on the master taking the slot while keys it names from others (flow.lua)
 * or drops and writes again (a set emptied) were still, or no longer, where
 * it looked: it wrote a second copy of a key there, or stopped half done on
 * "non local key". Outside a move Redis does not look for the keys named.
 * Returns 0 when key has no hash tag: the key is then its own slot. */
static int rs_fence(const char *key, char *out)
{
    const char *open = strchr(key, '{'), *close = open ? strchr(open + 1, '}') : NULL;
    if (!close || close == open + 1 || (size_t)(close - key) + 8 >= KEY_MAX) return 0;
    size_t n = (size_t)(close - key) + 1;
    memcpy(out, key, n);
    memcpy(out + n, ":fence", 7);
    return 1;
}

/* rs_eval's argument i: the keys, the fence when there is one, the args */
static inline const char *rs_eval_arg(int i, int nkeys, int fenced, const char **keys,
                                      const char *fence, const char **args)
{
    return i < nkeys ? keys[i] : i == nkeys && fenced ? fence : args[i - nkeys - fenced];
}

/* Run a script on `lane` (see rc_command_lane); routed by the first key,
 * with its slot's fence (rs_fence) as one more key. keys and args are
 * copied (into the command, written once). args[again] (when >= 0) is a
 * one-byte argument, "0", that becomes "1" if the call is sent again
 * (rc_command_resp): the script then knows it may have run before. */
static void rs_eval_again(rstore *rs, int lane, rs_script sc, int nkeys, const char **keys,
                          int nargs, const char **args, int again, rc_reply_fn *cb, void *priv)
{
    char fence[KEY_MAX], nk[UTIL_INT_MAX];
    int fenced = rs_fence(keys[0], fence), n = nkeys + fenced + nargs;
    size_t nkl = (size_t)util_fmt_int(nk, nkeys + fenced);
    /* each argument's length found once: a batch's are hundreds */
    size_t lens_here[64], *lens = n <= 64 ? lens_here : xmalloc((size_t)n * sizeof(*lens));
    size_t bytes = RS_HEAD_MAX + RC_RESP_ARG(nkl);
    for (int i = 0; i < n; i++) {
        lens[i] = strlen(rs_eval_arg(i, nkeys, fenced, keys, fence, args));
        bytes += RC_RESP_ARG(lens[i]);
    }
    /* only the header is zeroed: the command is written whole */
    rs_call *c = xmalloc(sizeof(*c) + bytes);
    memset(c, 0, sizeof(*c));
    c->lane = lane;
    c->rs = rs;
    c->sc = sc;
    c->cb = cb;
    c->priv = priv;
    c->argc = 3 + n;
    c->tail = (char *)(c + 1) + RS_HEAD_MAX;
    int again_i = again >= 0 ? nkeys + fenced + again : -1;
    log_assert(again_i < 0 || lens[again_i] == 1);
    char *p = rc_resp_arg(c->tail, nk, nkl);
    for (int i = 0; i < n; i++) {
        p = rc_resp_arg(p, rs_eval_arg(i, nkeys, fenced, keys, fence, args), lens[i]);
        if (i == again_i) c->again = p - 3;   /* its byte, before the CRLF */
    }
    if (lens != lens_here) free(lens);
    c->tail_len = (size_t)(p - c->tail);
    /* the head, written just before the tail (a sha is 40 hex digits,
     * checked when the scripts load) */
    _Static_assert(RC_RESP_HEAD + RC_RESP_ARG(7) + RC_RESP_ARG(40) <= RS_HEAD_MAX,
                   "RS_HEAD_MAX holds an EVALSHA head");
    char head[RS_HEAD_MAX];
    size_t h = rs_eval_head(c, "EVALSHA", rs->sha[sc], head);
    memcpy(c->tail - h, head, h);
    util_copy(c->route, sizeof(c->route), keys[0]);
    rc_command_resp(rs->rc, c->route, lane, rs_eval_cb, c, c->tail - h, h + c->tail_len,
                    c->again);
}

static void rs_eval(rstore *rs, int lane, rs_script sc, int nkeys, const char **keys, int nargs,
                    const char **args, rc_reply_fn *cb, void *priv)
{
    rs_eval_again(rs, lane, sc, nkeys, keys, nargs, args, -1, cb, priv);
}

/* ---- tasks not yet ended, per queue (flow.lua's n) ---------------------- */

/* Counted apart from the tasks, in the flow slot: a task stored adds one to
 * its queue, one that ends (succeeded, failed, cancelled) takes one away, a
 * retry of an ended one adds it again. The changes of QCOUNT_MS go as one
 * HINCRBY a queue, not waited for; a crash between a task's write and its
 * count's leaves the count off by that task, and so does a task with a key
 * given whose add's answer was lost: sent again, the add finds it stored and
 * cannot tell its own first run from an earlier POST of the key, so it is
 * answered as found, not counted (a task without a key is: add.lua's 2). */
#define QCOUNT_MS 20
#define QCOUNT_QUEUES 16

typedef struct qcount {
    char q[QCOUNT_QUEUES][TASK_QUEUE_MAX];
    long long n[QCOUNT_QUEUES];
    int k;
    struct event *ev;
} qcount;

static void qcount_ignore_cb(redisReply *r, const char *err, void *priv)
{
    (void)r, (void)err, (void)priv;
}

static void qcount_flush(rstore *rs)
{
    qcount *c = rs->counts;
    if (!rs->rc) {
        c->k = 0;
        return;
    }
    /* one flow.lua count: a count back at 0 is dropped there, and the
     * queue leaves the listing once nothing else keeps it */
    char key[KEY_MAX], v[QCOUNT_QUEUES][UTIL_INT_MAX];
    const char *args[1 + 2 * QCOUNT_QUEUES] = {"count"}, *keys[] = {key};
    int n = 1;
    snprintf(key, sizeof(key), "%s:{flow}:cfg", rs->prefix);
    for (int i = 0; i < c->k; i++) {
        if (!c->n[i]) continue;
        util_fmt_int(v[i], c->n[i]);
        args[n++] = c->q[i];
        args[n++] = v[i];
    }
    if (n > 1) rs_eval(rs, 0, SCRIPT_FLOW, 1, keys, n, args, qcount_ignore_cb, NULL);
    c->k = 0;
}

static void qcount_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    qcount_flush(arg);
}

static void qcount_add(rstore *rs, const char *q, long long d)
{
    qcount *c = rs->counts;
    if (!q || !*q) q = TASK_QUEUE_DEFAULT;
    for (int i = 0; i < c->k; i++)
        if (strcmp(c->q[i], q) == 0) {
            c->n[i] += d;
            return;
        }
    if (c->k == QCOUNT_QUEUES) qcount_flush(rs);
    util_copy(c->q[c->k], TASK_QUEUE_MAX, q);
    c->n[c->k++] = d;
    if (!event_pending(c->ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {0, QCOUNT_MS * 1000};
        event_add(c->ev, &tv);
    }
}

/* ---- write chains with retry ------------------------------------------- */

/* ---- the slice registry (P:slices, for the listing) ------------------------ */

static char *rs_reg_slot(rstore *rs, const char *slice)
{
    return rs->registered[util_fnv1a(slice, strlen(slice)) % REG_CACHE];
}

typedef void rs_then_fn(void *priv);
typedef struct reg_ctx {
    rstore *rs;
    char slice[TASK_SLICE_MAX];
    rs_then_fn *then;
    void *priv;
} reg_ctx;

static void rs_registered_cb(redisReply *r, const char *err, void *priv)
{
    reg_ctx *c = priv;
    if (r && r->type == REDIS_REPLY_INTEGER)
        memcpy(rs_reg_slot(c->rs, c->slice), c->slice, TASK_SLICE_MAX);
    else
        log_warn_limited(&c->rs->warn, rs_now_ms(&c->rs->base),
                         "slice %s: not in the listing's registry: %s", c->slice, rs_err(r, err));
    /* the write goes on regardless: a slice missing from the registry loses
     * nothing but its place in listings */
    if (c->then) c->then(c->priv);
    free(c);
}

/* Put slice in the registry, then (when given) call then(priv): at once when
 * this process registered it before. */
static void rs_register(rstore *rs, const char *slice, rs_then_fn *then, void *priv)
{
    if (strcmp(rs_reg_slot(rs, slice), slice) == 0) {
        if (then) then(priv);
        return;
    }
    char key[KEY_MAX];
    reg_ctx *c = xcalloc(1, sizeof(*c));
    c->rs = rs;
    util_copy(c->slice, sizeof(c->slice), slice);
    c->then = then;
    c->priv = priv;
    rs_slices_key(rs, key);
    const char *argv[] = {"ZADD", key, "NX", "0", slice};
    rc_command(rs->rc, key, rs_registered_cb, c, 5, argv, NULL);
}

/* Up to `limit` names of the registry from `from` (a ZRANGEBYLEX bound:
 * "-", "+", "[name" or "(name") in time order, or (desc) the other way. */
static void rs_registry_range(rstore *rs, int desc, const char *from, int limit, rc_reply_fn *cb,
                              void *priv)
{
    char key[KEY_MAX], count[UTIL_INT_MAX];
    rs_slices_key(rs, key);
    util_fmt_int(count, limit);
    const char *argv[] = {desc ? "ZREVRANGEBYLEX" : "ZRANGEBYLEX", key, from, desc ? "-" : "+",
                          "LIMIT", "0", count};
    rc_command(rs->rc, key, cb, priv, 7, argv, NULL);
}

#define SETTLE_TRIES 40
#define SETTLE_BACKOFF_MAX_MS 2000
#define SETTLE_BATCH 256

/* One step of a chain: a script on one slice, retried when Redis cannot be
 * reached (every step is idempotent). */
typedef struct step {
    rs_script sc;
    const int *which;
    int nkeys, nargs;
    char slice[TASK_SLICE_MAX];
    char *args;             /* the arguments, each NUL-terminated (owned) */
    size_t len, cap;
} step;

/* The steps recording one attempt, or (a batch) one settle step recording
 * the attempts of several tasks of one home slice. */
typedef struct chain {
    rstore *rs;
    store_attempt *a;       /* `one`, or an array (a batch) */
    int n;
    store_attempt one;
    store_settled_fn *cb;   /* NULL: nobody waits (a spent pointer dropped) */
    void *priv;
    step steps[3];
    int nsteps, at, tries;
    struct event *retry_ev;
    struct chain *next;     /* open batches of one settle call */
} chain;

static void chain_run(chain *c);

static void chain_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    chain_run(arg);
}

static void chain_done(chain *c, const char *err)
{
    if (c->retry_ev) event_free(c->retry_ev);
    for (int i = 0; i < c->n; i++)
        if (c->cb) c->cb(c->a[i].owner, err, c->priv);
    for (int i = 0; i < c->nsteps; i++) free(c->steps[i].args);
    if (c->a != &c->one) free(c->a);
    free(c);
}

static void chain_cb(redisReply *r, const char *err, void *priv)
{
    chain *c = priv;
    rstore *rs = c->rs;
    /* An error reply (a write refused: OOM, NOPERM, a slot mid-migration past
     * the redis timeout) is a step not taken, like a lost connection: the
     * chain must not go on to the next step, which may drop the lease that
     * is all that still leads back to the task. */
    if (!r || r->type == REDIS_REPLY_ERROR) {
        err = rs_err(r, err);
        if (++c->tries >= SETTLE_TRIES) {
            /* the lease in Redis will expire and the task run again */
            log_error("task %s%s: giving up recording attempt %d: %s", c->a[0].id,
                      c->n > 1 ? " and others" : "", c->a[0].attempt, err);
            chain_done(c, err);
            return;
        }
        if (c->tries == 1)
            log_warn_limited(&rs->warn, rs_now_ms(&rs->base),
                             "task %s%s: recording attempt %d: %s (retrying)", c->a[0].id,
                             c->n > 1 ? " and others" : "", c->a[0].attempt, err);
        int64_t ms = 50LL << (c->tries < 6 ? c->tries : 6);
        if (ms > SETTLE_BACKOFF_MAX_MS) ms = SETTLE_BACKOFF_MAX_MS;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        if (!c->retry_ev) c->retry_ev = evtimer_new(rs->ev, chain_retry_cb, c);
        evtimer_add(c->retry_ev, &tv);
        return;
    }
    c->tries = 0;
    if (c->steps[c->at].sc == SCRIPT_SETTLE && r->type == REDIS_REPLY_ARRAY) {
        /* the tasks this step ended leave their queue's count: {queue, n, ...} */
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->type == REDIS_REPLY_STRING && r->element[i]->len &&
                r->element[i + 1]->type == REDIS_REPLY_INTEGER)
                qcount_add(rs, r->element[i]->str, -r->element[i + 1]->integer);
    }
    if (++c->at < c->nsteps) chain_run(c);
    else chain_done(c, NULL);
}

/* An id tickd never made names no slice: nothing to record. Answered from
 * the loop, as every callback is. */
static void chain_bad_id_cb(evutil_socket_t fd, short what, void *arg)
{
    chain *c = arg;
    (void)fd, (void)what;
    log_error("task %s: not an id tickd made (left leased)", c->a[0].id);
    chain_done(c, "not an id tickd made");
}

static void chain_run(chain *c)
{
    if (c->nsteps == 0) {
        struct timeval tv = {0, 0};
        log_assert(event_base_once(c->rs->ev, -1, EV_TIMEOUT, chain_bad_id_cb, c, &tv) == 0);
        return;
    }
    step *st = &c->steps[c->at];
    rs_keys k;
    const char *stack[64], **args = st->nargs <= 64 ? stack : xmalloc(sizeof(*args) * (size_t)st->nargs);
    rs_keys_of(c->rs, st->slice, st->which, st->nkeys, &k);
    for (int i = 0, at = 0; i < st->nargs; i++) {
        args[i] = st->args + at;
        at += (int)strlen(args[i]) + 1;
    }
    rs_eval(c->rs, 0, st->sc, st->nkeys, k.p, st->nargs, args, chain_cb, c);
    if (args != stack) free(args);
}

static step *chain_step(chain *c, rs_script script, const char *slice, const int *which,
                        int nkeys)
{
    step *st = &c->steps[c->nsteps++];
    st->sc = script;
    st->which = which;
    st->nkeys = nkeys;
    util_copy(st->slice, sizeof(st->slice), slice);
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
    char buf[UTIL_INT_MAX];
    step_arg(st, buf, (size_t)util_fmt_int(buf, v));
}

static chain *chain_new(rstore *rs, const store_attempt *a, store_settled_fn *cb, void *priv)
{
    chain *c = xcalloc(1, sizeof(*c));
    c->rs = rs;
    c->one = *a;
    c->a = &c->one;
    c->n = 1;
    c->cb = cb;
    c->priv = priv;
    return c;
}

static step *chain_settle_step(chain *c, const char *home)
{
    step *st = chain_step(c, SCRIPT_SETTLE, home, KEYS_SETTLE, 8);
    char token[40];
    step_int(st, c->rs->base.cfg->retention_ms);
    step_int(st, c->rs->base.cfg->failed_retention_ms);
    /* sent again unchanged when the answer is lost: settle.lua knows the
     * tasks it ended itself, to count them off once */
    snprintf(token, sizeof(token), "%lx%lx", (unsigned long)random(), (unsigned long)random());
    step_str(st, token);
    return st;
}

/* The settle step's record of attempt a (settle.lua's groups). */
static void step_settle(step *st, const store_attempt *a, int local, const char *next_slice)
{
    static const char *names[] = {"ok", "fail", "retry", "release", "park", "expire"};
    step_str(st, a->id);
    if (a->outcome == OUT_OK && !a->err[0] && local && !next_slice[0] &&
        (!a->answer || !a->answer_len) && a->attempt == 1 && a->sent_at_ms > 0 &&
        a->took_ms >= 0 && a->status_code > 0) {
        /* a first attempt's success: the short group, its history entry as
         * the state holds it */
        char buf[3 * UTIL_INT_MAX + 32], *p = buf;
        memcpy(p, "{\"t\":", 5), p += 5;
        p += util_fmt_int(p, a->sent_at_ms);
        memcpy(p, ",\"ms\":", 6), p += 6;
        p += util_fmt_int(p, a->took_ms);
        memcpy(p, ",\"c\":", 5), p += 5;
        p += util_fmt_int(p, a->status_code);
        *p++ = '}';
        step_arg(st, buf, (size_t)(p - buf));
        return;
    }
    step_str(st, names[a->outcome]);
    step_int(st, a->attempt);
    /* a success keeps its status only when something went wrong after it
     * (the body cut off): the rest need not cost Redis the bytes */
    if (a->status_code && (a->outcome != OUT_OK || a->err[0])) step_int(st, a->status_code);
    else step_str(st, "");
    step_str(st, a->err);
    step_int(st, a->outcome == OUT_RETRY || a->outcome == OUT_PARK ? a->due_ms : 0);
    step_int(st, local);
    step_str(st, next_slice);
    /* the history entry */
    step_int(st, a->outcome == OUT_RELEASE || a->outcome == OUT_PARK ? 0 : a->sent_at_ms);
    step_int(st, a->took_ms);
    step_int(st, a->status_code);
    step_arg(st, a->answer ? a->answer : "", a->answer ? a->answer_len : 0);
}

static void chain_ptr(chain *c, const char *slice, const char *op, int64_t due, int64_t to)
{
    /* a pointer added to a slice no add may have made: registered first
     * (not waited for: a crash in between costs the listing, not the task) */
    if (strcmp(op, "add") == 0) rs_register(c->rs, slice, NULL, NULL);
    step *st = chain_step(c, SCRIPT_PTR, slice, KEYS_PTR, 3);
    step_str(st, c->a[0].id);
    step_str(st, op);
    step_int(st, due);
    step_int(st, to);
}

/* The home slice of attempt a's task into home (TASK_SLICE_MAX): the
 * lease's own slice when the id begins with it (a task claimed where it
 * lives, as every first attempt is: nothing to parse), else read from the
 * id. Returns 0, or -1 for what is not an id tickd made. */
static int rs_home(const store_attempt *a, char *home)
{
    size_t n = strlen(a->src);
    if (n < TASK_SLICE_MAX && strncmp(a->id, a->src, n) == 0 && a->id[n] == '.') {
        memcpy(home, a->src, n + 1);
        return 0;
    }
    char key[TASK_KEY_MAX + 1];
    int64_t at;
    return task_id_parse(a->id, home, &at, key);
}

/* An attempt is recorded as ordered steps on one slice each. A crash between
 * steps can repeat an attempt, never lose one: the retry's pointer is written
 * before the home record says so, and the lease is dropped last. Outcomes
 * that are one settle step in their home slice go as one call per home slice
 * (at most SETTLE_BATCH each). */
static void rs_settle(store *s, const store_attempt *as, int n, store_settled_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    chain *open = NULL;
    for (int i = 0; i < n; i++) {
        const store_attempt *a = &as[i];
        char home[TASK_SLICE_MAX], next[TASK_SLICE_MAX] = "";
        if (rs_home(a, home) != 0) {
            chain_run(chain_new(rs, a, cb, priv));
            continue;
        }
        int local = strcmp(a->src, home) == 0;
        int moves = a->outcome == OUT_RETRY || a->outcome == OUT_PARK;
        /* a retry waits in the slice of its due; a parked task in the
         * present one, where the scan finds it when it may go (flow.h) */
        if (a->outcome == OUT_RETRY) task_slice_name(a->due_ms, task_slice_bucket(home), next);
        else if (moves) snprintf(next, sizeof(next), "%s", a->park_slice);
        int one_step = local && (!moves || strcmp(next, home) == 0);
        if (one_step) {
            chain *c;
            for (c = open; c; c = c->next)
                if (strcmp(c->steps[0].slice, home) == 0 && c->n < SETTLE_BATCH) break;
            if (!c) {
                c = chain_new(rs, a, cb, priv);
                c->a = xmalloc(sizeof(*c->a) * SETTLE_BATCH);
                c->n = 0;
                chain_settle_step(c, home);
                c->next = open;
                open = c;
            }
            c->a[c->n++] = *a;
            step_settle(&c->steps[0], a, 1, "");
            continue;
        }
        chain *c = chain_new(rs, a, cb, priv);
        switch (a->outcome) {
        case OUT_RETRY:
        case OUT_PARK:
            if (local && strcmp(next, home) == 0) {
                step_settle(chain_settle_step(c, home), a, 1, "");
            } else {
                chain_ptr(c, next, "add", a->due_ms, a->timeout_ms);
                step_settle(chain_settle_step(c, home), a, local, next);
                if (!local && strcmp(next, a->src) != 0) chain_ptr(c, a->src, "done", 0, 0);
            }
            break;
        case OUT_RELEASE:
            step_settle(chain_settle_step(c, home), a, local, "");
            if (!local) chain_ptr(c, a->src, "requeue", a->due_ms, 0);
            break;
        default:
            step_settle(chain_settle_step(c, home), a, local, "");
            if (!local) chain_ptr(c, a->src, "done", 0, 0);
        }
        chain_run(c);
    }
    while (open) {
        chain *c = open;
        open = c->next;
        c->next = NULL;
        chain_run(c);
    }
}

/* A retry pointer whose task must not run (cancelled, settled by a
 * duplicate): forget it, so the slice can drain. */
static void rs_drop_ptr(rstore *rs, const char *id, const char *slice)
{
    store_attempt a = {.id = id, .src = slice, .err = ""};
    chain *c = chain_new(rs, &a, NULL, NULL);
    chain_ptr(c, slice, "done", 0, 0);
    chain_run(c);
}

/* ---- claim ------------------------------------------------------------- */

/* A claim whose reply held retry pointers: their records are fetched from
 * the home slices before the claim is answered. */
typedef struct claim_ctx {
    rstore *rs;
    int bucket;
    int64_t minute;
    char slice[TASK_SLICE_MAX];
    store_claim_fn *cb;
    void *priv;
    store_claim res;
    int fetching;
    char *ids;              /* copies of the ids when fetching */
} claim_ctx;

typedef struct fetch_ctx {
    claim_ctx *cl;
    int i;
} fetch_ctx;

static void claim_answer(claim_ctx *cl)
{
    /* leases dropped while fetching are squeezed out */
    int n = 0;
    for (int i = 0; i < cl->res.n; i++)
        if (cl->res.leases[i].id) cl->res.leases[n++] = cl->res.leases[i];
    cl->res.n = n;
    cl->cb(&cl->res, cl->priv);
    free(cl->res.leases);
    free(cl->ids);
    free(cl);
}

/* A claimed task read once from its record (or its schema 1 spec)
 * (task_spec.h). One that cannot be read is handed on marked so: its
 * callback fails with that error, visibly. */
static task_spec *rs_spec(const redisReply *r)
{
    return task_spec_read(r->str, r->len);
}

static void rs_fetch_cb(redisReply *r, const char *err, void *priv)
{
    fetch_ctx *f = priv;
    claim_ctx *cl = f->cl;
    store_lease *l = &cl->res.leases[f->i];
    free(f);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        /* the lease on the pointer expires and it is claimed again */
        log_warn_limited(&cl->rs->warn, rs_now_ms(&cl->rs->base), "task %s: fetch failed: %s",
                         l->id, rs_err(r, err));
        l->id = NULL;
    } else if (strcmp(r->element[0]->str, "ok") != 0 || r->elements != 4 ||
               r->element[2]->type != REDIS_REPLY_STRING) {
        /* cancelled, or settled by a duplicate: the pointer is spent */
        rs_drop_ptr(cl->rs, l->id, cl->slice);
        l->id = NULL;
    } else {
        l->attempt = (int)r->element[1]->integer;
        l->spec = rs_spec(r->element[2]);
        if (r->element[3]->type == REDIS_REPLY_STRING && r->element[3]->len) {
            /* this fetch committed a retry: the task counts again */
            qcount_add(cl->rs, r->element[3]->str, 1);
        }
    }
    if (--cl->fetching == 0) claim_answer(cl);
}

/* 1 if a claim's reply after its three counts is all of claim.lua's forms:
 * a fresh task's member (a string holding a newline), or a group of four
 * (due, id, attempt, spec or nil). */
static int rs_claim_reply_ok(const redisReply *r)
{
    for (size_t i = 3; i < r->elements;) {
        redisReply **e = &r->element[i];
        if (e[0]->type == REDIS_REPLY_STRING) {
            if (!memchr(e[0]->str, '\n', e[0]->len)) return 0;
            i++;
        } else if (e[0]->type == REDIS_REPLY_INTEGER && i + 4 <= r->elements &&
                   e[1]->type == REDIS_REPLY_STRING && e[2]->type == REDIS_REPLY_INTEGER) {
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static void rs_claim_cb(redisReply *r, const char *err, void *priv)
{
    claim_ctx *cl = priv;
    rstore *rs = cl->rs;
    store_claim *res = &cl->res;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 || !rs_claim_reply_ok(r)) {
        res->err = rs_err(r, err);
        cl->cb(res, cl->priv);
        free(cl);
        return;
    }
    res->due_left = r->element[0]->integer;
    res->run_left = r->element[1]->integer;
    res->taken = (int)r->element[2]->integer;
    res->leases = xmalloc(sizeof(*res->leases) * (r->elements - 3 ? r->elements - 3 : 1));
    res->n = 0;
    int pointers = 0;
    size_t idbytes = 0;
    for (size_t i = 3; i < r->elements;) {
        redisReply **e = &r->element[i];
        store_lease *l = &res->leases[res->n++];
        if (e[0]->type == REDIS_REPLY_STRING) {
            /* a fresh task's member "id\nrecord": its first attempt, due
             * at the execute_at its id holds; the id ends where the record
             * begins (the reply is this callback's until it returns) */
            char *nl = memchr(e[0]->str, '\n', e[0]->len);
            *nl = '\0';
            l->id = e[0]->str;
            l->due_ms = task_id_at(l->id); /* claim.lua took its due from it */
            l->attempt = 1;
            l->spec = task_spec_read(nl + 1, e[0]->len - (size_t)(nl + 1 - e[0]->str));
            idbytes += (size_t)(nl - e[0]->str) + 1;
            i++;
            continue;
        }
        l->due_ms = e[0]->integer;
        l->id = e[1]->str;
        l->attempt = (int)e[2]->integer;
        l->spec = e[3]->type == REDIS_REPLY_STRING ? rs_spec(e[3]) : NULL;
        pointers += !l->spec;
        idbytes += e[1]->len + 1;
        i += 4;
    }
    if (!pointers) {
        claim_answer(cl);
        return;
    }
    /* the reply ends with this callback: the ids move to one block */
    char *p = cl->ids = xmalloc(idbytes);
    for (int i = 0; i < res->n; i++) {
        size_t len = strlen(res->leases[i].id);
        memcpy(p, res->leases[i].id, len + 1);
        res->leases[i].id = p;
        p += len + 1;
    }
    cl->fetching = pointers;
    for (int i = 0; i < res->n; i++) {
        store_lease *l = &res->leases[i];
        char home[TASK_SLICE_MAX], key[TASK_KEY_MAX + 1];
        int64_t at;
        if (l->spec) continue;
        if (task_id_parse(l->id, home, &at, key) != 0) {
            log_error("claimed an id tickd did not make: %s (left leased)", l->id);
            l->id = NULL;
            if (--cl->fetching == 0) claim_answer(cl);
            continue;
        }
        fetch_ctx *f = xmalloc(sizeof(*f));
        rs_keys k;
        f->cl = cl;
        f->i = i;
        char ret[UTIL_INT_MAX], fret[UTIL_INT_MAX];
        rs_keys_of(rs, home, KEYS_HOME, 7, &k);
        util_fmt_int(ret, s_cfg(rs)->retention_ms);
        util_fmt_int(fret, s_cfg(rs)->failed_retention_ms);
        const char *args[] = {l->id, cl->slice, ret, fret};
        rs_eval(rs, 0, SCRIPT_FETCH, 7, k.p, 4, args, rs_fetch_cb, f);
    }
}

static void rs_claim(store *s, int bucket, int64_t minute, const store_claim_ask *ask,
                     store_claim_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    char reach[UTIL_INT_MAX], lim[UTIL_INT_MAX], margin[UTIL_INT_MAX];
    char near[UTIL_INT_MAX], far[UTIL_INT_MAX];
    rs_keys k;
    claim_ctx *cl = xcalloc(1, sizeof(*cl));
    cl->rs = rs;
    cl->bucket = bucket;
    cl->minute = minute;
    cl->cb = cb;
    cl->priv = priv;
    task_slice_name(minute * 60000, bucket, cl->slice);
    rs_keys_of(rs, cl->slice, KEYS_CLAIM, 5, &k);
    util_fmt_int(reach, ask->reach_ms);
    util_fmt_int(lim, ask->limit);
    util_fmt_int(margin, s->cfg->lease_margin_ms);
    util_fmt_int(near, ask->near_ms);
    util_fmt_int(far, ask->far_limit);
    const char *args[] = {reach, lim, margin, near, far, ask->counts ? "1" : "0"};
    rs_eval(rs, 0, SCRIPT_CLAIM, 5, k.p, 6, args, rs_claim_cb, cl);
}

/* An error reply at start: 1 with err set (and *fatal when waiting cannot
 * mend it: a refused user or command), 0 for any other reply. A node
 * loading, a cluster failing over (CLUSTERDOWN, TRYAGAIN, MOVED to a node
 * not known yet, READONLY from a demoted master) or a script running pass. */
static int rs_reply_failed(const redisReply *r, const char *what, int *fatal, char *err,
                           size_t errlen)
{
    if (r->type != REDIS_REPLY_ERROR) return 0;
    /* not "ERR " as a whole: "ERR max number of clients reached" passes */
    static const char *const lasting[] = {"NOPERM", "NOAUTH", "WRONGPASS",
                                          "ERR unknown command", "ERR Error compiling"};
    for (size_t i = 0; i < sizeof(lasting) / sizeof(*lasting); i++)
        if (strncmp(r->str, lasting[i], strlen(lasting[i])) == 0) *fatal = 1;
    snprintf(err, errlen, "%s: %s", what, r->str);
    return 1;
}

/* ---- the backend's watch: eviction policy, memory, data markers --------- */

/* tickd's promise is "stored before 201": a Redis that may evict keys, or
 * that loses its data (restarted without persistence, flushed, failed over
 * to a replica that never had it), breaks it without a word from Redis.
 * Every redis.watch_ms each master is read:
 *  - INFO memory (not CONFIG GET, which managed services rename or forbid):
 *    a maxmemory-policy other than noeviction with maxmemory set may evict
 *    tasks, and so does volatile-*: finished tasks and dead letters carry a
 *    TTL. Unless redis.allow_eviction, adds are refused while one is found.
 *  - its data marker, P:marker:{m<n>}, a random value written once with a
 *    tag that hashes to one of the master's slots. It lives exactly as long
 *    as that node keeps tickd's data: found gone or changed, the data went
 *    with it. */
#define WATCH_MARKERS 64
#define WATCH_LOG_MS 60000
#define WATCH_MEMORY_WARN 0.9

typedef struct rs_node_mem {
    int known;
    int evicting;               /* policy may evict, and maxmemory is set */
    double ratio;               /* used / maxmemory; 0: no limit */
    char policy[32];
    long long maxmemory;
} rs_node_mem;

typedef struct rs_marker {
    char tag[16];               /* hash tag, "m<n>" */
    char value[48];             /* as read or written last; "": not known yet */
    int64_t seen_ms;            /* when value was last read back (wall clock) */
    int pending;                /* a read is on its way */
} rs_marker;

typedef struct rs_watch {
    struct event *ev;
    rs_node_mem *mem;
    int nmem;
    rs_marker markers[WATCH_MARKERS];
    int nmarkers;
    char refusing[480];         /* why adds are refused; "": they are not */
    int evicting;
    double ratio;
    uint64_t lost;
    char lost_last[600];
    int64_t lost_last_ms;
    int64_t refuse_logged_ms, memory_logged_ms;
} rs_watch;

/* Reads the value, writing `ARGV[1]` when there is none: one call either way. */
static const char marker_lua[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if not v then redis.call('SET', KEYS[1], ARGV[1]) end return v";

static void rs_marker_key(const rstore *rs, const char *tag, char *out)
{
    snprintf(out, KEY_MAX, "%s:marker:{%s}", rs->prefix, tag);
}

static void rs_marker_value(char *out, size_t outlen)
{
    snprintf(out, outlen, "%lld-%08lx%08lx", (long long)util_realtime_ms(),
             (unsigned long)random(), (unsigned long)random());
}

/* One marker per master serving slots: the first "m<n>" on its slots. */
static void rs_watch_tags(rstore *rs)
{
    rs_watch *w = rs->watch;
    int nodes = rc_node_count(rs->rc);
    for (int i = 0; i < nodes; i++) {
        if (!rc_node_serves(rs->rc, i)) continue;
        char tag[16], key[KEY_MAX];
        int found = 0;
        for (int n = 0; n < 200000 && !found; n++) {
            snprintf(tag, sizeof(tag), "m%d", n);
            rs_marker_key(rs, tag, key);
            found = rc_slot_node(rs->rc, rc_key_slot(key, strlen(key))) == i;
        }
        if (!found) continue;
        int have = 0;
        for (int m = 0; m < w->nmarkers && !have; m++) have = strcmp(w->markers[m].tag, tag) == 0;
        if (have || w->nmarkers == WATCH_MARKERS) continue;
        rs_marker *mk = &w->markers[w->nmarkers++];
        *mk = (rs_marker){0};
        util_copy(mk->tag, sizeof(mk->tag), tag);
    }
}

/* A master was found without tickd's data: said once, counted, shown. */
static void rs_data_lost(rstore *rs, const char *where, const char *what, int64_t seen_ms)
{
    rs_watch *w = rs->watch;
    char seen[TZ_RFC3339_MAX], now[TZ_RFC3339_MAX], why[256];
    const tz *utc = tz_get("UTC", why); /* built in */
    int64_t t = util_realtime_ms();
    tz_rfc3339(utc, t, now);
    if (seen_ms) tz_rfc3339(utc, seen_ms, seen);
    w->lost++;
    w->lost_last_ms = t;
    snprintf(w->lost_last, sizeof(w->lost_last),
             "%s: tickd's data there is gone (%s%s%s): Redis restarted without persistence, "
             "was flushed, or failed over to a replica that never had it; the tasks and "
             "schedules stored there before %s are lost",
             where, what, seen_ms ? "; last seen " : "", seen_ms ? seen : "", now);
    log_error("store lost data: %s", w->lost_last);
}

typedef struct marker_ctx {
    rstore *rs;
    char tag[16];
    char wrote[48];
    int64_t sent_ms;
} marker_ctx;

static rs_marker *rs_marker_find(rs_watch *w, const char *tag)
{
    for (int m = 0; m < w->nmarkers; m++)
        if (strcmp(w->markers[m].tag, tag) == 0) return &w->markers[m];
    return NULL;
}

static void rs_marker_cb(redisReply *r, const char *err, void *priv)
{
    marker_ctx *c = priv;
    rs_watch *w = c->rs->watch;
    rs_marker *mk = w ? rs_marker_find(w, c->tag) : NULL;
    (void)err;
    if (!mk) goto done;
    mk->pending = 0;
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) goto done;
    const char *now = r->type == REDIS_REPLY_STRING ? r->str : c->wrote;
    if (mk->value[0] && strcmp(mk->value, now) != 0) {
        char key[KEY_MAX], where[300], what[200];
        rs_marker_key(c->rs, mk->tag, key);
        int node = rc_slot_node(c->rs->rc, rc_key_slot(key, strlen(key)));
        snprintf(where, sizeof(where), "redis %s",
                 node >= 0 && node < rc_node_count(c->rs->rc) ? rc_node_name(c->rs->rc, node)
                                                             : "?");
        snprintf(what, sizeof(what), "its marker %s was %s", key,
                 r->type == REDIS_REPLY_NIL ? "missing" : "replaced");
        rs_data_lost(c->rs, where, what, mk->seen_ms);
    }
    util_copy(mk->value, sizeof(mk->value), now);
    mk->seen_ms = c->sent_ms;
done:
    free(c);
}

static void rs_marker_read(rstore *rs, rs_marker *mk)
{
    char key[KEY_MAX];
    marker_ctx *c = xcalloc(1, sizeof(*c));
    c->rs = rs;
    c->sent_ms = util_realtime_ms();
    util_copy(c->tag, sizeof(c->tag), mk->tag);
    rs_marker_value(c->wrote, sizeof(c->wrote));
    rs_marker_key(rs, mk->tag, key);
    const char *argv[] = {"EVAL", marker_lua, "1", key, c->wrote};
    mk->pending = 1;
    rc_command(rs->rc, key, rs_marker_cb, c, 5, argv, NULL);
}

/* Parses INFO memory's maxmemory, maxmemory_policy and used_memory. */
static void rs_node_mem_parse(const char *info, rs_node_mem *m)
{
    const char *p;
    long long used = 0;
    *m = (rs_node_mem){.known = 1};
    if ((p = strstr(info, "\nused_memory:"))) used = strtoll(p + 13, NULL, 10);
    if ((p = strstr(info, "\nmaxmemory:"))) m->maxmemory = strtoll(p + 11, NULL, 10);
    if ((p = strstr(info, "\nmaxmemory_policy:")))
        snprintf(m->policy, sizeof(m->policy), "%.*s", (int)strcspn(p + 18, "\r\n"), p + 18);
    m->evicting = m->maxmemory > 0 && m->policy[0] && strcmp(m->policy, "noeviction") != 0;
    m->ratio = m->maxmemory > 0 ? (double)used / (double)m->maxmemory : 0;
}

static void rs_evicting_msg(const char *node, const rs_node_mem *m, char *out, size_t outlen)
{
    snprintf(out, outlen,
             "redis %s: maxmemory-policy %s with maxmemory %lld may evict tasks tickd "
             "acknowledged; run CONFIG SET maxmemory-policy noeviction (and set it in "
             "redis.conf), or accept the loss with redis.allow_eviction = true",
             node, m->policy, m->maxmemory);
}

/* The masters' readings, taken together: what adds are refused for. */
static void rs_watch_sum(rstore *rs)
{
    rs_watch *w = rs->watch;
    const config *cfg = rs->base.cfg;
    char first[sizeof(w->refusing)] = "";
    int64_t now = util_realtime_ms();
    w->evicting = 0;
    w->ratio = 0;
    for (int i = 0; i < w->nmem && i < rc_node_count(rs->rc); i++) {
        rs_node_mem *m = &w->mem[i];
        if (!m->known || !rc_node_serves(rs->rc, i)) continue;
        if (m->ratio > w->ratio) w->ratio = m->ratio;
        if (!m->evicting) continue;
        if (!w->evicting++) rs_evicting_msg(rc_node_name(rs->rc, i), m, first, sizeof(first));
    }
    if (cfg->allow_eviction) first[0] = '\0';
    if (first[0] && (!w->refusing[0] || now - w->refuse_logged_ms >= WATCH_LOG_MS)) {
        log_error("adds refused: %s", first);
        w->refuse_logged_ms = now;
    } else if (!first[0] && w->refusing[0]) {
        log_info("adds accepted again: no Redis master may evict keys now");
    }
    util_copy(w->refusing, sizeof(w->refusing), first);
    if (w->ratio >= WATCH_MEMORY_WARN && now - w->memory_logged_ms >= WATCH_LOG_MS) {
        log_warn("redis memory at %.0f%% of maxmemory: adds will be refused when it is full",
                 w->ratio * 100);
        w->memory_logged_ms = now;
    }
}

typedef struct mem_ctx {
    rstore *rs;
    int node;
} mem_ctx;

static void rs_mem_cb(redisReply *r, const char *err, void *priv)
{
    mem_ctx *c = priv;
    rs_watch *w = c->rs->watch;
    (void)err;
    if (w && r && r->type == REDIS_REPLY_STRING) {
        if (c->node >= w->nmem) {
            int n = rc_node_count(c->rs->rc);
            if (n <= c->node) n = c->node + 1;
            w->mem = xrealloc(w->mem, (size_t)n * sizeof(*w->mem));
            memset(w->mem + w->nmem, 0, (size_t)(n - w->nmem) * sizeof(*w->mem));
            w->nmem = n;
        }
        rs_node_mem_parse(r->str, &w->mem[c->node]);
        rs_watch_sum(c->rs);
    }
    free(c);
}

static void rs_watch_cb(evutil_socket_t fd, short what, void *arg)
{
    rstore *rs = arg;
    rs_watch *w = rs->watch;
    (void)fd, (void)what;
    int nodes = rc_node_count(rs->rc);
    for (int i = 0; i < nodes; i++) {
        if (!rc_node_serves(rs->rc, i)) continue;
        mem_ctx *c = xmalloc(sizeof(*c));
        *c = (mem_ctx){rs, i};
        const char *argv[] = {"INFO", "memory"};
        rc_node_command(rs->rc, i, rs_mem_cb, c, 2, argv, NULL);
    }
    rs_watch_tags(rs);
    for (int m = 0; m < w->nmarkers; m++)
        if (!w->markers[m].pending) rs_marker_read(rs, &w->markers[m]);
}

/* At start, before anything is written: the policies (an evicting master
 * refuses the start unless allowed). */
static int rs_watch_init(rstore *rs, int *fatal, char *err, size_t errlen)
{
    rs_watch *w = rs->watch = xcalloc(1, sizeof(*rs->watch));
    const config *cfg = rs->base.cfg;
    *fatal = 0;
    int nodes = rc_node_count(rs->rc);
    w->mem = xcalloc((size_t)(nodes > 0 ? nodes : 1), sizeof(*w->mem));
    w->nmem = nodes;
    for (int i = 0; i < nodes; i++) {
        if (!rc_node_serves(rs->rc, i)) continue;
        redisReply *r = rc_sync_node_command(rs->rc, i, err, errlen, "INFO memory");
        if (!r) return -1; /* a master down: waiting may mend it */
        if (r->type != REDIS_REPLY_STRING) {
            char what[KEY_MAX + 32];
            snprintf(what, sizeof(what), "redis %s: INFO memory", rc_node_name(rs->rc, i));
            if (!rs_reply_failed(r, what, fatal, err, errlen))
                snprintf(err, errlen, "%s: unexpected reply", what);
            freeReplyObject(r);
            return -1;
        }
        rs_node_mem_parse(r->str, &w->mem[i]);
        freeReplyObject(r);
        rs_node_mem *m = &w->mem[i];
        char msg[480];
        if (m->evicting) {
            rs_evicting_msg(rc_node_name(rs->rc, i), m, msg, sizeof(msg));
            if (!cfg->allow_eviction) {
                *fatal = 1;
                util_copy(err, errlen, msg);
                return -1;
            }
            log_warn("redis.allow_eviction = true: %s", msg);
        } else if (m->maxmemory == 0 && strcmp(m->policy, "noeviction") != 0) {
            log_warn("redis %s: maxmemory-policy %s would evict tasks once maxmemory is set; "
                     "set noeviction", rc_node_name(rs->rc, i), m->policy);
        }
    }
    rs_watch_sum(rs);
    return 0;
}

/* At start, once the keyspace is checked: each master's marker, read or
 * written. */
static int rs_watch_markers(rstore *rs, char *err, size_t errlen)
{
    rs_watch *w = rs->watch;
    rs_watch_tags(rs);
    for (int m = 0; m < w->nmarkers; m++) {
        rs_marker *mk = &w->markers[m];
        char key[KEY_MAX], v[48];
        rs_marker_key(rs, mk->tag, key);
        rs_marker_value(v, sizeof(v));
        redisReply *r = rc_sync_command(rs->rc, key, err, errlen, "EVAL %s 1 %s %s", marker_lua,
                                        key, v);
        if (!r) return -1;
        if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL) {
            snprintf(err, errlen, "%s: %s", key,
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            freeReplyObject(r);
            return -1;
        }
        util_copy(mk->value, sizeof(mk->value), r->type == REDIS_REPLY_STRING ? r->str : v);
        mk->seen_ms = util_realtime_ms();
        freeReplyObject(r);
    }
    return 0;
}

static void rs_watch_start(rstore *rs)
{
    rs_watch *w = rs->watch;
    int64_t ms = rs->base.cfg->watch_ms;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    w->ev = event_new(rs->ev, -1, EV_PERSIST, rs_watch_cb, rs);
    log_assert(w->ev && event_add(w->ev, &tv) == 0);
}

/* Read everything now (a watermark found gone). */
static void rs_watch_kick(rstore *rs)
{
    if (rs->watch && rs->watch->ev) event_active(rs->watch->ev, EV_TIMEOUT, 0);
}

static void rs_watch_free(rstore *rs)
{
    rs_watch *w = rs->watch;
    if (!w) return;
    if (w->ev) event_free(w->ev);
    free(w->mem);
    free(w);
    rs->watch = NULL;
}

/* A write refused while a master may evict (schedules, moves, settings: as
 * adds are), answered from the loop as the store's contract wants. */
typedef enum { REFUSE_SCH, REFUSE_MOVE, REFUSE_FLOW } refuse_kind;
typedef struct refused {
    refuse_kind kind;
    void *cb, *priv;
    char why[sizeof(((rs_watch *)0)->refusing)];
} refused;

static void rs_refused_cb(evutil_socket_t fd, short what, void *arg)
{
    refused *r = arg;
    (void)fd, (void)what;
    switch (r->kind) {
    case REFUSE_SCH: ((store_sch_fn *)r->cb)(ST_UNAVAILABLE, NULL, r->why, r->priv); break;
    case REFUSE_MOVE: ((store_cancel_fn *)r->cb)(ST_UNAVAILABLE, r->why, r->priv); break;
    case REFUSE_FLOW: ((store_flow_done_fn *)r->cb)(0, r->why, r->priv); break;
    }
    free(r);
}

/* 1 (and the callback answered later) when writes are refused now. */
static int rs_refuse(rstore *rs, refuse_kind kind, void *cb, void *priv)
{
    if (!rs->watch || !rs->watch->refusing[0]) return 0;
    refused *r = xmalloc(sizeof(*r));
    *r = (refused){kind, cb, priv, ""};
    util_copy(r->why, sizeof(r->why), rs->watch->refusing);
    struct timeval tv = {0, 0};
    log_assert(event_base_once(rs->ev, -1, EV_TIMEOUT, rs_refused_cb, r, &tv) == 0);
    return 1;
}

static void rs_alerts(const store *s, store_alerts *out)
{
    const rs_watch *w = RS(s)->watch;
    if (!w) return;
    out->refusing = w->refusing[0] ? w->refusing : NULL;
    out->evicting = w->evicting;
    out->memory_ratio = w->ratio;
    out->data_lost = w->lost;
    out->data_lost_last = w->lost ? w->lost_last : NULL;
    out->data_lost_last_ms = w->lost_last_ms;
}

/* ---- watermarks -------------------------------------------------------- */

typedef struct wm_ctx {
    rstore *rs;
    int bucket;
    store_wm_fn *cb;
    void *priv;
} wm_ctx;

static wm_ctx *wm_ctx_new(rstore *rs, int bucket, store_wm_fn *cb, void *priv)
{
    wm_ctx *w = xmalloc(sizeof(*w));
    *w = (wm_ctx){rs, bucket, cb, priv};
    return w;
}

static void rs_ignore_cb(redisReply *r, const char *err, void *priv)
{
    (void)r, (void)err, (void)priv;
}

static void rs_wm_get_cb(redisReply *r, const char *err, void *priv)
{
    wm_ctx *w = priv;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        w->cb(-1, rs_err(r, err), w->priv);
    } else if (r->type == REDIS_REPLY_STRING) {
        w->cb(strtoll(r->str, NULL, 10), NULL, w->priv);
    } else {
        /* deleted under us (wm_init set it): start again a minute back */
        char key[KEY_MAX], v[UTIL_INT_MAX];
        int64_t wm = rs_now_ms(&w->rs->base) / 60000 - 1;
        rs_wm_key(w->rs, w->bucket, key);
        log_error("%s is missing; scanning from minute %lld on", key, (long long)wm);
        /* its node may have lost everything: the markers tell */
        rs_watch_kick(w->rs);
        util_fmt_int(v, wm);
        const char *argv[] = {"SET", key, v, "NX"};
        rc_command(w->rs->rc, key, rs_ignore_cb, NULL, 4, argv, NULL);
        w->cb(wm, NULL, w->priv);
    }
    free(w);
}

static void rs_wm_get(store *s, int bucket, store_wm_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    char key[KEY_MAX];
    rs_wm_key(rs, bucket, key);
    const char *argv[] = {"GET", key};
    rc_command(rs->rc, key, rs_wm_get_cb, wm_ctx_new(rs, bucket, cb, priv), 2, argv, NULL);
}

static void rs_wm_advance_cb(redisReply *r, const char *err, void *priv)
{
    wm_ctx *w = priv;
    if (!r || r->type != REDIS_REPLY_INTEGER) w->cb(-1, rs_err(r, err), w->priv);
    else w->cb(r->integer, NULL, w->priv);
    free(w);
}

static void rs_wm_advance(store *s, int bucket, int64_t from, int64_t to, store_wm_fn *cb,
                          void *priv)
{
    rstore *rs = RS(s);
    char key[KEY_MAX], from_s[UTIL_INT_MAX], to_s[UTIL_INT_MAX];
    rs_wm_key(rs, bucket, key);
    util_fmt_int(from_s, from);
    util_fmt_int(to_s, to);
    const char *keys[] = {key};
    const char *args[] = {from_s, to_s};
    rs_eval(rs, 0, SCRIPT_WM, 1, keys, 2, args, rs_wm_advance_cb, wm_ctx_new(rs, bucket, cb, priv));
}

/* A new keyspace starts scanning at `minute`; an existing one keeps its
 * watermark, however old: that is the catch-up. */
static int rs_wm_init(store *s, int64_t minute, char *err, size_t errlen)
{
    rstore *rs = RS(s);
    char key[KEY_MAX], metakey[KEY_MAX];
    int nodes = rc_node_count(rs->rc);
    char (*gone)[200] = xcalloc((size_t)(nodes > 0 ? nodes : 1), sizeof(*gone));
    int rc = -1;
    for (int b = 0; b < rs->buckets; b++) {
        rs_wm_key(rs, b, key);
        redisReply *r = rc_sync_command(rs->rc, key, err, errlen, "SET %s %lld NX", key,
                                        (long long)minute);
        if (!r) goto done;
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "%s: %s", key, r->str);
            freeReplyObject(r);
            goto done;
        }
        /* once a keyspace has its watermarks (P:meta's wm), none is ever
         * deleted: one missing went with its node's data */
        int node = rc_slot_node(rs->rc, rc_key_slot(key, strlen(key)));
        if (r->type == REDIS_REPLY_STATUS && rs->meta_wm && node >= 0 && node < nodes) {
            size_t n = strlen(gone[node]);
            snprintf(gone[node] + n, sizeof(gone[node]) - n, "%s%d", n ? ", " : "", b);
        }
        freeReplyObject(r);
    }
    rs_meta_key(rs, metakey);
    redisReply *r = rc_sync_command(rs->rc, metakey, err, errlen, "HSET %s wm 1", metakey);
    if (!r) goto done;
    rc = r->type == REDIS_REPLY_ERROR ? -1 : 0;
    if (rc) snprintf(err, errlen, "%s: %s", metakey, r->str);
    freeReplyObject(r);
done:
    /* said even when a later write failed: the ones written are not missing
     * any more at the next try */
    for (int i = 0; i < nodes; i++) {
        char what[300];
        if (!gone[i][0]) continue;
        snprintf(what, sizeof(what), "the watermarks of buckets %s were missing at start", gone[i]);
        rs_data_lost(rs, rc_node_name(rs->rc, i), what, 0);
    }
    free(gone);
    return rc;
}

/* ---- clock, health ----------------------------------------------------- */

/* A reading of Redis TIME asked at t0 and answered at t1 (monotonic, us).
 * Redis read its clock somewhere between, so the time line is taken from
 * t1: never ahead of Redis's clock (a task never fires early), behind by
 * as much as the reply waited. One that waited long (Redis running a long
 * script, this loop busy, a pipeline or a stalled link ahead of it) would
 * put every callback as late until the next reading: it moves the clock
 * only when no quick one came for CLOCK_STALE_US. (The midpoint of t0 and
 * t1 is no better: a request held on its way and answered at once puts it
 * ahead by half the wait.) */
#define CLOCK_QUICK_US 2000
#define CLOCK_STALE_US 10000000
static void rs_clock_take(rstore *rs, const redisReply *r, int64_t t0, int64_t t1)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return;
    int64_t redis_us = strtoll(r->element[0]->str, NULL, 10) * 1000000 +
                       strtoll(r->element[1]->str, NULL, 10);
    if (t1 - t0 > CLOCK_QUICK_US && rs->clock_set_us && t1 - rs->clock_set_us < CLOCK_STALE_US)
        return;
    rs->clock_offset_us = redis_us - t1;
    rs->clock_set_us = t1;
}

/* A reading in flight: the time it was asked goes with it. */
typedef struct clock_ask {
    rstore *rs;
    int64_t t0;
} clock_ask;

static void rs_time_cb(redisReply *r, const char *err, void *priv)
{
    clock_ask *a = priv;
    (void)err;
    rs_clock_take(a->rs, r, a->t0, util_mono_us());
    if (a->rs->clock_asked_us == a->t0) a->rs->clock_asked_us = 0;
    free(a);
}

static void rs_sync_clock(store *s)
{
    rstore *rs = RS(s);
    const char *argv[] = {"TIME"};
    int64_t now = util_mono_us();
    /* one at a time while the last is on its way (a reply that never came
     * holds the next back for CLOCK_STALE_US at most) */
    if (rs->clock_asked_us && now - rs->clock_asked_us < CLOCK_STALE_US) return;
    clock_ask *a = xmalloc(sizeof(*a));
    a->rs = rs;
    a->t0 = rs->clock_asked_us = now;
    rc_node_command(rs->rc, 0, rs_time_cb, a, 1, argv, NULL);
}

typedef struct health_ctx {
    store_health_fn *cb;
    void *priv;
    int pending;            /* replies still to come */
    int failed;
    char err[200];          /* the first failure */
} health_ctx;

static void rs_health_cb(redisReply *r, const char *err, void *priv)
{
    health_ctx *h = priv;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        if (!h->failed) snprintf(h->err, sizeof(h->err), "%s", rs_err(r, err));
        h->failed = 1;
    }
    if (--h->pending == 0) {
        h->cb(!h->failed, h->failed ? h->err : NULL, h->priv);
        free(h);
    }
}

static void rs_health(store *s, store_health_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    health_ctx *h = xcalloc(1, sizeof(*h));
    const char *argv[] = {"PING"};
    int n = rc_node_count(rs->rc);
    h->cb = cb;
    h->priv = priv;
    /* no answer runs before this returns (rcluster's contract), so the
     * count can grow while sending */
    for (int i = 0; i < n; i++) {
        if (!rc_node_serves(rs->rc, i)) continue;
        h->pending++;
        rc_node_command(rs->rc, i, rs_health_cb, h, 1, argv, NULL);
    }
    if (h->pending == 0) {
        h->pending = 1;
        rc_node_command(rs->rc, 0, rs_health_cb, h, 1, argv, NULL);
    }
}

/* ---- counting scheduled tasks ------------------------------------------ */

/* Every due entry lives in a slice at or after its bucket's watermark (the
 * oldest slice not drained): the count walks the registry from the oldest
 * watermark on, COUNT_CHUNK names at a time, and adds each slice's
 * ZCARD :due less SCARD :del (cancelled, not yet dropped). One command pair
 * per slice holding tasks, nothing per task. */
#define COUNT_CHUNK 512

typedef struct count_ctx {
    rstore *rs;
    store_count_fn *cb;
    void *priv;
    int64_t n, min_wm;             /* the oldest watermark (-1: a bucket has none) */
    int waiting, failed;
    char last[TASK_SLICE_MAX];     /* the walk is past this slice ("": at the start) */
    char err[200];
    int chunk_full;
} count_ctx;

static void count_chunk(count_ctx *c);

static void count_step_done(count_ctx *c)
{
    if (--c->waiting > 0) return;
    if (c->failed) {
        c->cb(-1, c->err, c->priv);
        free(c);
    } else if (c->chunk_full) {
        count_chunk(c);
    } else {
        c->cb(c->n, NULL, c->priv);
        free(c);
    }
}

static void count_fail(count_ctx *c, redisReply *r, const char *err)
{
    if (!c->failed) snprintf(c->err, sizeof(c->err), "%s", rs_err(r, err));
    c->failed = 1;
}

static void count_card_cb(redisReply *r, const char *err, void *priv)
{
    count_ctx *c = priv;
    if (!r || r->type != REDIS_REPLY_INTEGER) count_fail(c, r, err);
    else c->n += r->integer;
    count_step_done(c);
}

static void count_del_cb(redisReply *r, const char *err, void *priv)
{
    count_ctx *c = priv;
    if (!r || r->type != REDIS_REPLY_INTEGER) count_fail(c, r, err);
    else c->n -= r->integer;
    count_step_done(c);
}

static void count_names_cb(redisReply *r, const char *err, void *priv)
{
    count_ctx *c = priv;
    rstore *rs = c->rs;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        count_fail(c, r, err);
        c->waiting = 1;
        count_step_done(c);
        return;
    }
    c->chunk_full = r->elements == COUNT_CHUNK;
    c->waiting = 1; /* this callback's own, ended below */
    for (size_t i = 0; i < r->elements; i++) {
        const char *name = r->element[i]->str;
        if (!name || strlen(name) >= TASK_SLICE_MAX) continue;
        char due[KEY_MAX], del[KEY_MAX];
        rs_key(rs, name, K_DUE, due);
        rs_key(rs, name, K_DEL, del);
        const char *zc[] = {"ZCARD", due}, *sc[] = {"SCARD", del};
        c->waiting += 2;
        rc_command(rs->rc, due, count_card_cb, c, 2, zc, NULL);
        rc_command(rs->rc, del, count_del_cb, c, 2, sc, NULL);
        util_copy(c->last, sizeof(c->last), name);
    }
    count_step_done(c);
}

static void count_chunk(count_ctx *c)
{
    char from[TASK_SLICE_MAX + 2];
    if (c->last[0]) {
        snprintf(from, sizeof(from), "(%s", c->last);
    } else if (c->min_wm >= 0) {
        /* "YYYYMMDDHHMM": before every slice of that minute */
        char name[TASK_SLICE_MAX];
        task_slice_name(c->min_wm * 60000, 0, name);
        snprintf(from, sizeof(from), "[%.*s", (int)strcspn(name, "."), name);
    } else {
        snprintf(from, sizeof(from), "-");
    }
    c->waiting = 1;
    rs_registry_range(c->rs, 0, from, COUNT_CHUNK, count_names_cb, c);
}

static void count_wm_cb(redisReply *r, const char *err, void *priv)
{
    count_ctx *c = priv;
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
        count_fail(c, r, err);
    } else {
        /* a bucket with no watermark yet (-1): from the registry's start */
        int64_t wm = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
        if (wm < c->min_wm) c->min_wm = wm;
    }
    if (--c->waiting > 0) return;
    if (c->failed) {
        c->cb(-1, c->err, c->priv);
        free(c);
        return;
    }
    count_chunk(c);
}

static void rs_count(store *s, store_count_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    count_ctx *c = xcalloc(1, sizeof(*c));
    c->rs = rs;
    c->cb = cb;
    c->priv = priv;
    c->min_wm = INT64_MAX;
    c->waiting = rs->buckets;
    for (int b = 0; b < rs->buckets; b++) {
        char key[KEY_MAX];
        rs_wm_key(rs, b, key);
        const char *argv[] = {"GET", key};
        rc_command(rs->rc, key, count_wm_cb, c, 2, argv, NULL);
    }
}

static void rs_counters(const store *s, store_counters *out)
{
    rc_counters(RS(s)->rc, &out->errors, &out->reconnects);
}

static void rs_stats(const store *s, cJSON *obj)
{
    (void)s, (void)obj;
}

/* ---- API operations ---------------------------------------------------- */

typedef struct store_op {
    rstore *rs;
    struct store_op *next; /* add: the next op of its batch */
    task_input t;          /* add: borrowed spec */
    char id[TASK_ID_MAX];
    char slice[TASK_SLICE_MAX];
    char due[UTIL_INT_MAX], to[UTIL_INT_MAX]; /* add: due_ms and timeout_ms as the script takes them
                                               * (to: written only for the groups' layout) */
    int64_t end_ms;        /* add: end of the home slice's minute */
    int tries;
    int exists;            /* add: the id was stored before (ST_EXISTS) */
    int before;            /* add: written by an earlier call, this one's first
                            * run among them: not by this call's writes */
    int written;           /* add: the script answered (its WAIT may not) */
    void *cb;
    void *priv;
    char *state;           /* add: the state found under the id, kept for the WAIT */
} store_op;

/* ---- add: gathered per slice ------------------------------------------- */

/* The adds that reach the store in one loop turn go to Redis as one add.lua
 * call per home slice (and lane), at most STORE_ADD_MAX tasks each, sent
 * once the turn's requests have all been read (rs_add_flush_cb). Under
 * load that is one script call and one round trip for many tasks. */
#define STORE_ADD_MAX 256

struct store_add_batch {
    struct store_add_batch *next;   /* open batches of this turn */
    rstore *rs;
    char slice[TASK_SLICE_MAX];
    int lane;
    int n;
    store_op *ops, **tail;
    int touch_failed;               /* the write its WAIT was to cover failed */
    rc_conn conn;                   /* the connection its add was answered on */
};

static void rs_add_send(store_op *op);

/* Answer an add. An unavailable one names its id only when it was written
 * but not confirmed (err then says so in full). A fresh task is told to the
 * listener first. */
static void rs_add_done(store_op *op, store_status st, const char *state, const char *err)
{
    store *s = &op->rs->base;
    if (st == ST_OK && s->added) s->added(task_slice_bucket(op->slice), op->t.due_ms, s->added_priv);
    ((store_add_fn *)op->cb)(st, st == ST_UNAVAILABLE && !op->written ? NULL : op->id, state, err,
                             op->priv);
    free(op->state);
    util_pool_put(&op->rs->add_ops, op);
}

static void rs_add_fail_all(store_op *ops, const char *err)
{
    for (store_op *op = ops, *next; op; op = next) {
        next = op->next;
        rs_add_done(op, ST_UNAVAILABLE, NULL, err);
    }
}

static void rs_wait_cb(redisReply *r, const char *err, void *priv)
{
    store_add_batch *b = priv;
    const config *cfg = b->ops->rs->base.cfg;
    int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer >= cfg->wait_replicas;
    int ok_stored = ok && !b->touch_failed;
    char why[300];
    snprintf(why, sizeof(why), "stored on the master but not confirmed by %lld replica%s "
             "within %lld ms (%s); POST it again, the same key and execute_at is idempotent",
             (long long)cfg->wait_replicas, cfg->wait_replicas == 1 ? "" : "s",
             (long long)cfg->wait_timeout_ms,
             r && r->type == REDIS_REPLY_INTEGER ? "too few replicas" : rs_err(r, err));
    for (store_op *op = b->ops, *next; op; op = next) {
        next = op->next;
        if (op->before ? ok_stored : ok)
            rs_add_done(op, op->exists ? ST_EXISTS : ST_OK, op->state, NULL);
        else
            rs_add_done(op, ST_UNAVAILABLE, NULL, why);
    }
    free(b);
}

static void rs_wait_send(store_add_batch *b)
{
    rstore *rs = b->ops->rs;
    char n[UTIL_INT_MAX], ms[UTIL_INT_MAX];
    util_fmt_int(n, rs->base.cfg->wait_replicas);
    util_fmt_int(ms, rs->base.cfg->wait_timeout_ms);
    const char *argv[] = {"WAIT", n, ms};
    rc_command_on(rs->rc, b->conn, rs_wait_cb, b, 3, argv, NULL);
}

static void rs_touch_cb(redisReply *r, const char *err, void *priv)
{
    store_add_batch *b = priv;
    (void)err;
    if (!r || r->type == REDIS_REPLY_ERROR) b->touch_failed = 1;
    rs_wait_send(b);
}

/* add.lua's answer: one element a task, 1 when stored, 2 when stored by
 * this call's first run (it was sent again), the state found under its id
 * otherwise; or, for fresh tasks sent once, their number: each stored. */
static int rs_add_reply_ok(const redisReply *r, int n)
{
    if (r && r->type == REDIS_REPLY_INTEGER) return r->integer == n;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)n) return 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (!(e->type == REDIS_REPLY_INTEGER && (e->integer == 1 || e->integer == 2)) &&
            e->type != REDIS_REPLY_STRING)
            return 0;
    }
    return 1;
}

static void rs_add_batch_cb(redisReply *r, const char *err, void *priv)
{
    store_add_batch *b = priv;
    store_op *ops = b->ops;
    rstore *rs = ops->rs;

    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "STALE", 5) == 0) {
        /* the minute turned while the requests were on their way: re-slice */
        for (store_op *op = ops, *next; op; op = next) {
            next = op->next;
            if (++op->tries < 3) rs_add_send(op);
            else rs_add_done(op, ST_UNAVAILABLE, NULL, r->str);
        }
        free(b);
        return;
    }
    if (!rs_add_reply_ok(r, b->n)) {
        if (rs->call_may_have_run) {
            /* sent and never answered, or answered only after it was sent
             * again: it may have run, so each task is named (its id) and
             * not said to be unstored */
            char why[300];
            snprintf(why, sizeof(why), "redis: %s after the task was sent: it may have been "
                     "stored; GET it by its id to know, and POST it again only if that "
                     "answers 404", rs_err(r, err));
            for (store_op *op = ops; op; op = op->next) op->written = 1;
            rs_add_fail_all(ops, why);
        } else {
            rs_add_fail_all(ops, rs_err(r, err));
        }
        free(b);
        return;
    }
    int written_here = 0;
    size_t i = 0;
    for (store_op *op = ops; op; op = op->next, i++) {
        const redisReply *e = r->type == REDIS_REPLY_ARRAY ? r->element[i] : NULL;
        op->exists = e && e->type == REDIS_REPLY_STRING;
        op->before = op->exists || (e && e->integer == 2);
        written_here += !op->before;
        /* stored by this call (its first run's answer was lost: not
         * counted then) */
        if (!op->exists) qcount_add(rs, op->t.queue, 1);
    }
    if (rs->base.cfg->wait_replicas > 0) {
        /* WAIT counts the writes of its own connection: it goes on the
         * connection this answer came on, or fails (a resend on another
         * would confirm nothing). An id found stored (answered with its
         * state, or 2: by this call's first run) was written by another
         * call, perhaps this one sent before on a connection since lost: a
         * write of this connection behind it, on the same master, makes the
         * WAIT cover it too. */
        char key[KEY_MAX];
        b->conn = rc_reply_conn(rs->rc);
        i = 0;
        for (store_op *op = ops; op; op = op->next, i++) {
            op->written = 1;
            if (op->exists) op->state = xstrndup(r->element[i]->str, r->element[i]->len);
        }
        if (written_here == b->n) {
            rs_wait_send(b);
            return;
        }
        rs_key(rs, ops->slice, K_WAIT, key);
        const char *touch[] = {"SET", key, "1", "PX", "60000"};
        rc_command_on(rs->rc, b->conn, rs_touch_cb, b, 5, touch, NULL);
        return;
    }
    i = 0;
    for (store_op *op = ops, *next; op; op = next, i++) {
        next = op->next;
        rs_add_done(op, op->exists ? ST_EXISTS : ST_OK, op->exists ? r->element[i]->str : NULL,
                    NULL);
    }
    free(b);
}

static void rs_add_batch_send_now(void *priv);

/* An add stored fresh (lib.lua): no re-POST can name it, and it is due when
 * it asked. */
static int rs_add_fresh(const store_op *op)
{
    return op->t.key_generated && op->t.due_ms == op->t.execute_at_ms;
}

/* A batch goes to its slice once the slice is in the registry. */
static void rs_add_batch_send(rstore *rs, store_add_batch *b)
{
    b->rs = rs;
    rs_register(rs, b->slice, rs_add_batch_send_now, b);
}

static void rs_add_batch_send_now(void *priv)
{
    store_add_batch *b = priv;
    rstore *rs = b->rs;
    rs_keys k;
    char end[UTIL_INT_MAX], grace[UTIL_INT_MAX];
    rs_keys_of(rs, b->slice, KEYS_ADD, 3, &k);
    util_fmt_int(end, b->ops->end_ms);
    /* half the scan's grace: the add refuses a slice well before the scan
     * may pass it, so no clock difference between replicas loses a task */
    util_fmt_int(grace, rs->base.cfg->slice_grace_ms / 2);
    const char *args[4 + 6 * STORE_ADD_MAX];
    int n = 0;
    args[n++] = end;
    args[n++] = grace;
    args[n++] = "0";   /* "1" if sent again (add.lua) */
    /* fresh tasks only (most calls: the API's tasks without a key): a pair
     * each, its due and its :due member (lib.lua), which add.lua hands to
     * ZADD as they come */
    char *members = NULL;
    store_op *op = b->ops;
    while (op && rs_add_fresh(op)) op = op->next;
    if (!op) {
        size_t bytes = 0;
        for (op = b->ops; op; op = op->next) bytes += strlen(op->id) + strlen(op->t.rec) + 2;
        char *m = members = xmalloc(bytes);
        args[n++] = "f";
        for (op = b->ops; op; op = op->next) {
            args[n++] = op->due;
            args[n++] = m;
            m = stpcpy(m, op->id);
            *m++ = '\n';
            m = stpcpy(m, op->t.rec) + 1;
        }
    } else {
        for (op = b->ops; op; op = op->next) {
            args[n++] = op->id;
            args[n++] = op->t.rec;
            args[n++] = op->due;
            util_fmt_int(op->to, op->t.timeout_ms);   /* (a pair does not carry it) */
            args[n++] = op->to;
            args[n++] = op->t.queue;
            /* a key given that looks like one tickd makes may name a fresh one */
            if (rs_add_fresh(op)) args[n++] = "f";
            else args[n++] = !op->t.key_generated && task_key_looks_random(op->t.key) ? "c" : "k";
        }
    }
    /* with WAIT, the add and its WAIT share lane 1: WAIT counts the writes
     * of its own connection, and blocks none but that one (the arguments
     * are copied into the command) */
    rs_eval_again(rs, b->lane, SCRIPT_ADD, 3, k.p, n, args, 2, rs_add_batch_cb, b);
    free(members);
}

static void rs_add_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    rstore *rs = arg;
    store_add_batch *list = rs->adds;
    (void)fd;
    (void)what;
    rs->adds = NULL;
    rs->add_bucket = (rs->add_bucket + 1) % rs->buckets;
    for (store_add_batch *b = list, *next; b; b = next) {
        next = b->next;
        b->next = NULL;
        /* a Redis that may evict: nothing is written that it could lose
         * (a batch past STORE_ADD_MAX was gathered while refusing) */
        if (rs->watch->refusing[0] || b->n > STORE_ADD_MAX) {
            rs_add_fail_all(b->ops, rs->watch->refusing[0] ? rs->watch->refusing
                                                           : "adds refused while Redis may evict");
            free(b);
            continue;
        }
        rs_add_batch_send(rs, b);
    }
}

static void rs_add_send(store_op *op)
{
    rstore *rs = op->rs;
    const config *cfg = rs->base.cfg;
    int64_t now = op->t.home_now_ms ? op->t.home_now_ms : rs_now_ms(&rs->base);
    int64_t home = task_home_ms(op->t.execute_at_ms, now, cfg->slice_grace_ms);
    int lane = cfg->wait_replicas > 0;
    store_add_batch *b;

    /* A given key picks its bucket (so that a re-POST finds its id); a task
     * without one goes to the bucket of this loop turn, so that the turn's
     * adds share one slice and one script call. The bucket turns with each
     * turn: over time they spread evenly, as the key hashes do. */
    int bucket = op->t.key_generated ? rs->add_bucket : task_bucket(op->t.key, rs->buckets);
    task_slice_name(home, bucket, op->slice);
    task_id_make(op->slice, op->t.execute_at_ms, op->t.key, op->id, sizeof(op->id));
    util_fmt_int(op->due, op->t.due_ms);
    op->end_ms = (home / 60000 + 1) * 60000;
    op->next = NULL;

    for (b = rs->adds; b; b = b->next)
        if (b->lane == lane && strcmp(b->slice, op->slice) == 0) break;
    if (!b) {
        b = xcalloc(1, sizeof(*b));
        memcpy(b->slice, op->slice, sizeof(b->slice));
        b->lane = lane;
        b->tail = &b->ops;
        b->next = rs->adds;
        if (!rs->adds) event_active(rs->flush_ev, EV_READ, 0);
        rs->adds = b;
    }
    *b->tail = op;
    b->tail = &op->next;
    if (++b->n == STORE_ADD_MAX && !rs->watch->refusing[0]) {
        /* full: on its way now, so Redis works while the turn goes on */
        store_add_batch **pp = &rs->adds;
        while (*pp != b) pp = &(*pp)->next;
        *pp = b->next;
        b->next = NULL;
        rs_add_batch_send(rs, b);
    }
}

static void rs_add(store *s, const task_input *t, store_add_fn *cb, void *priv)
{
    /* not zeroed whole (the task and the id are most of it, and written
     * below): what rs_add_send does not set */
    store_op *op = util_pool_get(&RS(s)->add_ops, sizeof(*op));
    op->tries = 0;
    op->exists = 0;
    op->before = 0;
    op->written = 0;
    op->state = NULL;
    op->rs = RS(s);
    op->t = *t;
    op->cb = (void *)cb;
    op->priv = priv;
    rs_add_send(op);
}

/* A new operation on the task `id`, in its home slice. An id tickd never made
 * names no slice: it is looked up in the slice of minute 0, which holds
 * nothing, so it is answered "unknown" from Redis like any other. */
static store_op *rs_op_for_id(rstore *rs, const char *id, void *cb, void *priv)
{
    store_op *op = xcalloc(1, sizeof(*op));
    char key[TASK_KEY_MAX + 1];
    int64_t at;
    op->rs = rs;
    op->cb = cb;
    op->priv = priv;
    if (task_id_parse(id, op->slice, &at, key) != 0)
        snprintf(op->slice, sizeof(op->slice), "000000000000.0");
    return op;
}

static void rs_get_cb(redisReply *r, const char *err, void *priv)
{
    store_op *op = priv;
    store_get_fn *cb = (store_get_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY || (r->elements != 2 && r->elements != 0))
        cb(ST_UNAVAILABLE, NULL, NULL, rs_err(r, err), op->priv);
    else if (r->elements == 0 || r->element[0]->type != REDIS_REPLY_STRING ||
             r->element[1]->type != REDIS_REPLY_STRING)
        cb(ST_NOTFOUND, NULL, NULL, NULL, op->priv);
    else {
        char *spec = task_rec_spec(r->element[0]->str, r->element[0]->len, op->id);
        if (spec) cb(ST_OK, spec, r->element[1]->str, NULL, op->priv);
        else cb(ST_UNAVAILABLE, NULL, NULL, "stored task record unreadable", op->priv);
        free(spec);
    }
    free(op);
}

static void rs_get(store *s, const char *id, store_get_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    rs_keys k;
    store_op *op = rs_op_for_id(rs, id, (void *)cb, priv);
    util_copy(op->id, sizeof(op->id), id);
    rs_keys_of(rs, op->slice, KEYS_HOME, 2, &k);
    const char *args[] = {id};
    rs_eval(rs, 0, SCRIPT_GET, 2, k.p, 1, args, rs_get_cb, op);
}

static void rs_cancel_cb(redisReply *r, const char *err, void *priv)
{
    store_op *op = priv;
    store_cancel_fn *cb = (store_cancel_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        cb(ST_UNAVAILABLE, rs_err(r, err), op->priv);
    else if (strcmp(r->element[0]->str, "ok") == 0) {
        if (r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len) {
            qcount_add(op->rs, r->element[1]->str, -1);
        }
        cb(ST_OK, NULL, op->priv);
    }
    else if (strcmp(r->element[0]->str, "notfound") == 0)
        cb(ST_NOTFOUND, NULL, op->priv);
    else
        cb(ST_CONFLICT, r->elements > 1 && r->element[1]->str ? r->element[1]->str : "", op->priv);
    free(op);
}

static void rs_cancel(store *s, const char *id, store_cancel_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    char ret[UTIL_INT_MAX];
    rs_keys k;
    store_op *op = rs_op_for_id(rs, id, (void *)cb, priv);
    char fret[UTIL_INT_MAX];
    rs_keys_of(rs, op->slice, KEYS_HOME, 7, &k);
    util_fmt_int(ret, s->cfg->retention_ms);
    util_fmt_int(fret, s->cfg->failed_retention_ms);
    const char *args[] = {id, ret, fret};
    rs_eval(rs, 0, SCRIPT_CANCEL, 7, k.p, 3, args, rs_cancel_cb, op);
}

/* ---- schedules ---------------------------------------------------------- */

typedef struct sch_op {
    void *cb, *priv;
    int list;                  /* answers a list (store_sch_list_fn) */
    char id[SCHED_ID_MAX];
} sch_op;

static store_status rs_sch_status(const char *s)
{
    if (strcmp(s, "ok") == 0) return ST_OK;
    if (strcmp(s, "exists") == 0) return ST_EXISTS;
    if (strcmp(s, "conflict") == 0) return ST_CONFLICT;
    return ST_NOTFOUND;
}

static const char *rs_str(const redisReply *r, size_t i)
{
    return i < r->elements && r->element[i]->type == REDIS_REPLY_STRING ? r->element[i]->str
                                                                         : NULL;
}

static void rs_sch_cb(redisReply *r, const char *err, void *priv)
{
    sch_op *op = priv;
    if (op->list) {
        store_sch_list_fn *cb = (store_sch_list_fn *)op->cb;
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements % 3) {
            cb(NULL, 0, rs_err(r, err), op->priv);
        } else {
            int n = (int)(r->elements / 3);
            store_schedule *items = xcalloc((size_t)(n ? n : 1), sizeof(*items));
            for (int i = 0; i < n; i++)
                items[i] = (store_schedule){rs_str(r, 3 * (size_t)i), rs_str(r, 3 * (size_t)i + 1),
                                            rs_str(r, 3 * (size_t)i + 2), NULL};
            cb(items, n, NULL, op->priv);
            free(items);
        }
    } else {
        store_sch_fn *cb = (store_sch_fn *)op->cb;
        const char *status;
        if (!r || r->type != REDIS_REPLY_ARRAY || !(status = rs_str(r, 0))) {
            cb(ST_UNAVAILABLE, NULL, rs_err(r, err), op->priv);
        } else {
            store_schedule sc = {op->id, rs_str(r, 1), rs_str(r, 2), rs_str(r, 3)};
            store_status st = rs_sch_status(status);
            cb(st, st == ST_NOTFOUND ? NULL : &sc, NULL, op->priv);
        }
    }
    free(op);
}

/* Run the schedules script on a bucket's keys: args after the operation. */
static void rs_sch_call(rstore *rs, int bucket, const char *id, int list, void *cb, void *priv,
                        int nargs, const char **args)
{
    char keys[3][KEY_MAX];
    const char *kp[3] = {keys[0], keys[1], keys[2]};
    sch_op *op = xcalloc(1, sizeof(*op));
    op->cb = cb;
    op->priv = priv;
    op->list = list;
    util_copy(op->id, sizeof(op->id), id ? id : "");
    rs_sch_keys(rs, bucket, keys);
    rs_eval(rs, 0, SCRIPT_SCHED, 3, kp, nargs, args, rs_sch_cb, op);
}

/* The bucket of a schedule id; an id tickd never made gets bucket 0, where
 * it is not found. */
static int rs_sch_bucket(const rstore *rs, const char *id)
{
    const char *key = schedule_id_key(id);
    return key ? task_bucket(key, rs->buckets) : 0;
}

static void rs_sch_write(store *s, store_sch_op o, const char *id, const char *def, int64_t next,
                         store_sch_fn *cb, void *priv)
{
    static const char *ops[] = {"create", "replace", "pause", "resume", "delete"};
    rstore *rs = RS(s);
    char nx[UTIL_INT_MAX];
    /* a new or changed schedule is an add; pause, resume, delete are not */
    if ((o == SCH_CREATE || o == SCH_REPLACE) && rs_refuse(rs, REFUSE_SCH, (void *)cb, priv))
        return;
    util_fmt_int(nx, next);
    const char *args[4] = {ops[o], id, def, nx};
    int n = 2;
    if (o == SCH_CREATE || o == SCH_REPLACE) n = 4;
    else if (o == SCH_RESUME) args[n++] = nx;
    rs_sch_call(rs, rs_sch_bucket(rs, id), id, 0, (void *)cb, priv, n, args);
}

static void rs_sch_get(store *s, const char *id, store_sch_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    const char *args[] = {"get", id};
    rs_sch_call(rs, rs_sch_bucket(rs, id), id, 0, (void *)cb, priv, 2, args);
}

static void rs_sch_list(store *s, int bucket, const char *after, int limit, store_sch_list_fn *cb,
                        void *priv)
{
    char lim[UTIL_INT_MAX];
    util_fmt_int(lim, limit);
    const char *args[] = {"list", after, lim};
    rs_sch_call(RS(s), bucket, NULL, 1, (void *)cb, priv, 3, args);
}

static void rs_sch_claim(store *s, int bucket, int64_t until, int limit, int64_t lease_ms,
                         store_sch_list_fn *cb, void *priv)
{
    char u[UTIL_INT_MAX], lim[UTIL_INT_MAX], lease[UTIL_INT_MAX], keep[UTIL_INT_MAX];
    util_fmt_int(u, until);
    util_fmt_int(lim, limit);
    util_fmt_int(lease, lease_ms);
    util_fmt_int(keep, schedule_keep_ms(s->cfg->slice_grace_ms));
    const char *args[] = {"claim", u, lim, lease, keep};
    rs_sch_call(RS(s), bucket, NULL, 1, (void *)cb, priv, 5, args);
}

static void rs_sch_advance(store *s, const char *id, const store_sch_pass *a,
                           store_sch_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    char ct[UTIL_INT_MAX], v[UTIL_INT_MAX], made[UTIL_INT_MAX], skipped[UTIL_INT_MAX];
    char last[UTIL_INT_MAX], next[UTIL_INT_MAX];
    util_fmt_int(ct, a->ct);
    util_fmt_int(v, a->v);
    util_fmt_int(made, a->made);
    util_fmt_int(skipped, a->skipped);
    util_fmt_int(last, a->last_at);
    util_fmt_int(next, a->next);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < a->nfut; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(a->fut[i]));
    char *fut = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    const char *args[] = {"advance", id, ct, v, made, skipped, last,
                          a->last_id ? a->last_id : "", next, fut};
    rs_sch_call(rs, rs_sch_bucket(rs, id), id, 0, (void *)cb, priv, 10, args);
    free(fut);
}

/* ---- finding tasks ----------------------------------------------------- */

/* A listing walks the registry (P:slices: every name with score 0, so its
 * lexical order, "YYYYMMDDHHMM.b", is time order) a chunk at a time, and asks
 * each slice in turn (list.lua) until the page is full. */
#define LIST_CHUNK 64

typedef struct list_ctx {
    rstore *rs;
    store_list_query q;
    char status[16], prefix[TASK_KEY_MAX + 1];
    store_list_fn *cb;
    void *priv;
    /* where the walk is: the slice, and in it the last entry given ("" =
     * none: the slice is read from its start) */
    char slice[TASK_SLICE_MAX], score[UTIL_INT_MAX + 8], id[TASK_ID_MAX];
    int inside;                /* the walk is inside `slice` (else past it) */
    char (*chunk)[TASK_SLICE_MAX];
    int nchunk, at, chunk_full;
    char **ids;
    int n;
} list_ctx;

static void list_next_slice(list_ctx *c);
static void list_read_registry(list_ctx *c);

static void list_done(list_ctx *c, const char *err)
{
    char cur[STORE_CURSOR_MAX];
    int more = !err && c->n == c->q.limit;
    if (more) snprintf(cur, sizeof(cur), "%s~%s~%s", c->slice, c->score, c->id);
    c->cb((const char *const *)c->ids, err ? 0 : c->n, more ? cur : NULL, err, c->priv);
    for (int i = 0; i < c->n; i++) free(c->ids[i]);
    free(c->ids);
    free(c->chunk);
    free(c);
}

static void list_slice_cb(redisReply *r, const char *err, void *priv)
{
    list_ctx *c = priv;
    rstore *rs = c->rs;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 4 || (r->elements - 4) % 2) {
        list_done(c, rs_err(r, err));
        return;
    }
    int gone = r->element[0]->integer == 1, more = r->element[1]->integer == 1;
    for (size_t i = 4; i + 1 < r->elements && c->n < c->q.limit; i += 2) {
        c->ids[c->n++] = xstrndup(r->element[i]->str, r->element[i]->len);
        util_copy(c->id, sizeof(c->id), r->element[i]->str);
        util_copy(c->score, sizeof(c->score), r->element[i + 1]->str);
    }
    if (gone) {
        /* every record of it expired: out of the registry, once no add can
         * come to its minute any more */
        int64_t end = (task_slice_minute(c->slice) + 1) * 60000;
        if (end + s_cfg(rs)->slice_grace_ms < rs_now_ms(&rs->base)) {
            char key[KEY_MAX];
            rs_slices_key(rs, key);
            const char *argv[] = {"ZREM", key, c->slice};
            rc_command(rs->rc, key, rs_ignore_cb, NULL, 3, argv, NULL);
        }
    }
    if (c->n == c->q.limit) {
        list_done(c, NULL);
        return;
    }
    if (more) {
        /* the slice stopped at its scan bound: on after what it scanned */
        util_copy(c->score, sizeof(c->score), r->element[2]->str);
        util_copy(c->id, sizeof(c->id), r->element[3]->str);
        c->at--;
    } else {
        c->inside = 0;
    }
    list_next_slice(c);
}

/* Ask the next slice of the chunk, or read the next chunk. */
static void list_next_slice(list_ctx *c)
{
    rstore *rs = c->rs;
    if (c->at >= c->nchunk) {
        if (!c->chunk_full) list_done(c, NULL);
        else list_read_registry(c);
        return;
    }
    const char *slice = c->chunk[c->at++];
    if (!c->inside || strcmp(slice, c->slice) != 0) {
        util_copy(c->slice, sizeof(c->slice), slice);
        c->id[0] = c->score[0] = '\0';
        c->inside = 1;
    }
    rs_keys k;
    char lim[UTIL_INT_MAX], from[UTIL_INT_MAX], to[UTIL_INT_MAX];
    rs_keys_of(rs, c->slice, KEYS_LIST, 8, &k);
    util_fmt_int(lim, c->q.limit - c->n);
    util_fmt_int(from, c->q.from_ms);
    util_fmt_int(to, c->q.to_ms);
    const char *args[] = {c->status, c->q.desc ? "desc" : "asc", c->score[0] ? c->score : "0",
                          c->id, lim, from, to, c->prefix, c->q.runs ? "1" : ""};
    rs_eval(rs, 0, SCRIPT_LIST, 8, k.p, 9, args, list_slice_cb, c);
}

static void list_registry_cb(redisReply *r, const char *err, void *priv)
{
    list_ctx *c = priv;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        list_done(c, rs_err(r, err));
        return;
    }
    c->nchunk = c->at = 0;
    for (size_t i = 0; i < r->elements && i < LIST_CHUNK; i++) {
        const char *name = r->element[i]->str;
        if (name && strlen(name) < TASK_SLICE_MAX)
            util_copy(c->chunk[c->nchunk++], TASK_SLICE_MAX, name);
    }
    c->chunk_full = r->elements == LIST_CHUNK;
    list_next_slice(c);
}

/* The next chunk of slice names: from the walk's slice (itself included
 * while the walk is inside it), in the listing's order. */
static void list_read_registry(list_ctx *c)
{
    char from[TASK_SLICE_MAX + 2];
    if (!c->slice[0]) snprintf(from, sizeof(from), "%s", c->q.desc ? "+" : "-");
    else snprintf(from, sizeof(from), "%c%s", c->inside ? '[' : '(', c->slice);
    rs_registry_range(c->rs, c->q.desc, from, LIST_CHUNK, list_registry_cb, c);
}

static void rs_list(store *s, const store_list_query *q, store_list_fn *cb, void *priv)
{
    list_ctx *c = xcalloc(1, sizeof(*c));
    c->rs = RS(s);
    c->q = *q;
    util_copy(c->status, sizeof(c->status), q->status);
    util_copy(c->prefix, sizeof(c->prefix), q->key_prefix);
    c->cb = cb;
    c->priv = priv;
    c->ids = xcalloc((size_t)q->limit + 1, sizeof(char *));
    c->chunk = xcalloc(LIST_CHUNK, sizeof(*c->chunk));
    const char *a = strchr(q->cursor, '~'), *b = a ? strchr(a + 1, '~') : NULL;
    if (a && b && (size_t)(a - q->cursor) < TASK_SLICE_MAX && (size_t)(b - a) < sizeof(c->score)) {
        snprintf(c->slice, sizeof(c->slice), "%.*s", (int)(a - q->cursor), q->cursor);
        snprintf(c->score, sizeof(c->score), "%.*s", (int)(b - a - 1), a + 1);
        util_copy(c->id, sizeof(c->id), b + 1);
        c->inside = task_slice_minute(c->slice) >= 0;
        if (!c->inside) c->slice[0] = c->score[0] = c->id[0] = '\0';
    }
    list_read_registry(c);
}

/* ---- running a task again ------------------------------------------------ */

typedef struct move_ctx {
    rstore *rs;
    char id[TASK_ID_MAX], home[TASK_SLICE_MAX], target[TASK_SLICE_MAX];
    store_move_kind kind;
    int64_t due, timeout;
    store_cancel_fn *cb;
    void *priv;
    int step;                  /* 0 prepare, 1 pointer, 2 commit */
} move_ctx;

static void move_step(move_ctx *c);

static void move_done(move_ctx *c, store_status st, const char *detail)
{
    c->cb(st, detail, c->priv);
    free(c);
}

static void move_cb(redisReply *r, const char *err, void *priv)
{
    move_ctx *c = priv;
    const char *status;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !(status = rs_str(r, 0))) {
        if (c->step == 1 && r && r->type == REDIS_REPLY_INTEGER) {
            c->step = 2;
            move_step(c);
            return;
        }
        move_done(c, ST_UNAVAILABLE, rs_err(r, err));
        return;
    }
    if (strcmp(status, "notfound") == 0) {
        move_done(c, ST_NOTFOUND, NULL);
    } else if (strcmp(status, "conflict") == 0) {
        move_done(c, ST_CONFLICT, rs_str(r, 1) ? rs_str(r, 1) : "");
    } else if (c->step == 0 && c->target[0]) {
        cJSON *st = cJSON_Parse(rs_str(r, 1) ? rs_str(r, 1) : "");
        const cJSON *to = cJSON_GetObjectItemCaseSensitive(st, "to");
        c->timeout = cJSON_IsNumber(to) ? (int64_t)to->valuedouble : 10000;
        cJSON_Delete(st);
        c->step = 1;
        rs_register(c->rs, c->target, (rs_then_fn *)move_step, c);
    } else {
        if (rs_str(r, 2) && rs_str(r, 2)[0]) {
            /* this call reopened an ended task: it counts again */
            qcount_add(c->rs, rs_str(r, 2), 1);
        }
        if (c->rs->base.added)
            c->rs->base.added(task_slice_bucket(c->target[0] ? c->target : c->home), c->due,
                              c->rs->base.added_priv);
        move_done(c, ST_OK, NULL);
    }
}

static void move_step(move_ctx *c)
{
    rstore *rs = c->rs;
    rs_keys k;
    char due[UTIL_INT_MAX], to[UTIL_INT_MAX];
    util_fmt_int(due, c->due);
    if (c->step == 1) {
        /* the pointer, as a retry's (ptr.lua add) */
        util_fmt_int(to, c->timeout);
        rs_keys_of(rs, c->target, KEYS_PTR, 3, &k);
        const char *args[] = {c->id, "add", due, to};
        rs_eval(rs, 0, SCRIPT_PTR, 3, k.p, 4, args, move_cb, c);
        return;
    }
    rs_keys_of(rs, c->home, KEYS_HOME, 7, &k);
    const char *args[] = {c->step == 0 ? "prepare" : "commit", c->id,
                          c->kind == MOVE_RETRY ? "retry" : "run", c->target, due};
    rs_eval(rs, 0, SCRIPT_MOVE, 7, k.p, 5, args, move_cb, c);
}

static void rs_move(store *s, const char *id, store_move_kind kind, int64_t due_ms,
                    store_cancel_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    if (rs_refuse(rs, REFUSE_MOVE, (void *)cb, priv)) return;
    move_ctx *c = xcalloc(1, sizeof(*c));
    char key[TASK_KEY_MAX + 1];
    int64_t at, now = rs_now_ms(s);
    c->rs = rs;
    c->kind = kind;
    c->due = due_ms < now ? now : due_ms;
    c->cb = cb;
    c->priv = priv;
    util_copy(c->id, sizeof(c->id), id);
    if (task_id_parse(id, c->home, &at, key) != 0)
        snprintf(c->home, sizeof(c->home), "000000000000.0");
    /* due in a slice the scan has not passed: the home slice when it is that
     * minute's, else the due minute's slice of the same bucket */
    task_slice_name(c->due, task_slice_bucket(c->home), c->target);
    if (strcmp(c->target, c->home) == 0) c->target[0] = '\0';
    move_step(c);
}

/* ---- flow control (lua/flow.lua: every key in the slot {flow}) ---------- */

typedef struct flow_op {
    rstore *rs;
    void *cb;
    void *priv;
    int n;                     /* admit: the tasks asked for */
} flow_op;

/* Run flow.lua with the arguments gathered in st (a chain step's block). */
static void flow_eval(rstore *rs, step *st, rc_reply_fn *cb, flow_op *op)
{
    char key[KEY_MAX];
    const char *stack[64], **args = st->nargs <= 64 ? stack : xmalloc(sizeof(*args) * (size_t)st->nargs);
    const char *keys[] = {key};
    snprintf(key, sizeof(key), "%s:{flow}:cfg", rs->prefix);
    for (int i = 0, at = 0; i < st->nargs; i++) {
        args[i] = st->args + at;
        at += (int)strlen(args[i]) + 1;
    }
    rs_eval(rs, 0, SCRIPT_FLOW, 1, keys, st->nargs, args, cb, op);
    if (args != stack) free(args);
    free(st->args);
}

static flow_op *flow_op_new(rstore *rs, void *cb, void *priv)
{
    flow_op *op = xcalloc(1, sizeof(*op));
    op->rs = rs;
    op->cb = cb;
    op->priv = priv;
    return op;
}

static int64_t rs_reply_int(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER) return (int64_t)r->integer;
    if (r->type == REDIS_REPLY_STRING) return (int64_t)strtod(r->str, NULL);
    return 0;
}

static const char *rs_reply_str(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING ? r->str : "";
}

static int64_t rs_margin(const rstore *rs)
{
    return rs->base.cfg->lease_margin_ms;
}

static void rs_flow_admit_cb(redisReply *r, const char *err, void *priv)
{
    flow_op *op = priv;
    store_flow_admit_fn *cb = (store_flow_admit_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        cb(NULL, 0, rs_err(r, err), op->priv);
        free(op);
        return;
    }
    store_flow_verdict *v = xcalloc((size_t)op->n + 1, sizeof(*v));
    size_t i = 0;
    int n = 0;
    while (i < r->elements && n < op->n) {
        const char *k = rs_reply_str(r->element[i]);
        store_flow_verdict *x = &v[n++];
        x->reason = "";
        if (strcmp(k, "go") == 0 && i + 3 < r->elements) {
            x->kind = FLOW_GO;
            x->at_ms = rs_reply_int(r->element[i + 1]);
            x->waited_from_ms = rs_reply_int(r->element[i + 2]);
            x->reason = rs_reply_str(r->element[i + 3]);
            i += 4;
        } else if (strcmp(k, "wait") == 0 && i + 1 < r->elements) {
            x->kind = FLOW_WAIT;
            x->reason = rs_reply_str(r->element[i + 1]);
            i += 2;
        } else {
            n--; /* not a verdict: the reply is malformed */
            break;
        }
    }
    if (n < op->n) cb(NULL, 0, "flow: malformed reply", op->priv);
    else cb(v, n, NULL, op->priv);
    free(v);
    free(op);
}

static void rs_flow_admit(store *s, const store_flow_task *t, int n, int64_t horizon_ms,
                          store_flow_admit_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    step st = {0};
    flow_op *op = flow_op_new(rs, (void *)cb, priv);
    op->n = n;
    step_str(&st, "admit");
    step_int(&st, horizon_ms);
    step_int(&st, rs_margin(rs));
    for (int i = 0; i < n; i++) {
        step_str(&st, t[i].id);
        step_str(&st, t[i].queue);
        step_str(&st, t[i].dest);
        step_int(&st, t[i].timeout_ms);
    }
    flow_eval(rs, &st, rs_flow_admit_cb, op);
}

static void rs_flow_done_cb(redisReply *r, const char *err, void *priv)
{
    flow_op *op = priv;
    store_flow_done_fn *cb = (store_flow_done_fn *)op->cb;
    if (!r || r->type == REDIS_REPLY_ERROR) cb(0, rs_err(r, err), op->priv);
    else cb((int)rs_reply_int(r), NULL, op->priv);
    free(op);
}

static void rs_flow_pump_cb(redisReply *r, const char *err, void *priv)
{
    flow_op *op = priv;
    store_flow_pump_fn *cb = (store_flow_pump_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        cb(NULL, 0, rs_err(r, err), op->priv);
        free(op);
        return;
    }
    int n = (int)(r->elements / 5);
    store_flow_go *g = xcalloc((size_t)n + 1, sizeof(*g));
    for (int i = 0; i < n; i++) {
        const redisReply *const *e = (const redisReply *const *)r->element + 5 * i;
        g[i] = (store_flow_go){rs_reply_str(e[0]), rs_reply_str(e[1]), rs_reply_int(e[2]),
                               rs_reply_str(e[3]), rs_reply_str(e[4])};
    }
    cb(g, n, NULL, op->priv);
    free(g);
    free(op);
}

static void rs_flow_enqueue(store *s, const store_flow_task *t, int n, store_flow_pump_fn *cb,
                            void *priv)
{
    rstore *rs = RS(s);
    step st = {0};
    step_str(&st, "enqueue");
    for (int i = 0; i < n; i++) {
        step_str(&st, t[i].id);
        step_str(&st, t[i].queue);
        step_str(&st, t[i].dest);
        step_int(&st, t[i].due_ms);
        step_int(&st, t[i].timeout_ms);
        step_str(&st, t[i].slice);
        step_str(&st, t[i].reason);
    }
    flow_eval(rs, &st, rs_flow_pump_cb, flow_op_new(rs, (void *)cb, priv));
}

static void rs_flow_pump(store *s, const store_flow_end *e, int n, int max, int64_t horizon_ms,
                         store_flow_pump_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    step st = {0};
    step_str(&st, "pump");
    step_int(&st, horizon_ms);
    step_int(&st, rs_margin(rs));
    step_int(&st, max);
    step_int(&st, rs->base.cfg->flow_holds_max);
    for (int i = 0; i < n; i++) {
        step_str(&st, e[i].id);
        step_str(&st, e[i].queue);
        step_str(&st, e[i].dest);
        step_int(&st, e[i].until_ms);
        step_int(&st, e[i].back ? 2 : e[i].failed);
        step_str(&st, e[i].back && e[i].slice ? e[i].slice : "");
    }
    flow_eval(rs, &st, rs_flow_pump_cb, flow_op_new(rs, (void *)cb, priv));
}

static void rs_flow_take(store *s, const char *id, const char *slice, int64_t at_ms,
                         store_flow_done_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    rs_keys k;
    char at[UTIL_INT_MAX];
    if (task_slice_minute(slice) < 0) slice = "000000000000.0";
    rs_keys_of(rs, slice, KEYS_PTR, 3, &k);
    util_fmt_int(at, at_ms);
    const char *args[] = {id, "take", at, "0"};
    rs_eval(rs, 0, SCRIPT_PTR, 3, k.p, 4, args, rs_flow_done_cb,
            flow_op_new(rs, (void *)cb, priv));
}

/* items from a flat (key, settings | nil, waiting, in flight, failed, until,
 * open) reply, every 7 elements */
static store_flow_info *flow_infos(const redisReply *r, size_t from, size_t to, int *n)
{
    store_flow_info *it = xcalloc((to - from) / 7 + 1, sizeof(*it));
    *n = 0;
    for (size_t i = from; i + 7 <= to; i += 7) {
        store_flow_info *x = &it[(*n)++];
        x->key = rs_reply_str(r->element[i]);
        x->settings = r->element[i + 1]->type == REDIS_REPLY_STRING ? r->element[i + 1]->str : NULL;
        x->waiting = rs_reply_int(r->element[i + 2]);
        x->in_flight = rs_reply_int(r->element[i + 3]);
        x->failed_hour = rs_reply_int(r->element[i + 4]);
        x->until_ms = rs_reply_int(r->element[i + 5]);
        x->open = rs_reply_int(r->element[i + 6]);
    }
    return it;
}

static void rs_flow_info_cb(redisReply *r, const char *err, void *priv)
{
    flow_op *op = priv;
    store_flow_info_fn *cb = (store_flow_info_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        cb(NULL, 0, rs_err(r, err), op->priv);
    } else {
        int n;
        store_flow_info *it = flow_infos(r, 0, r->elements, &n);
        cb(it, n, NULL, op->priv);
        free(it);
    }
    free(op);
}

static void rs_flow_info(store *s, const char *key, store_flow_info_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    step st = {0};
    step_str(&st, "get");
    step_str(&st, key);
    flow_eval(rs, &st, rs_flow_info_cb, flow_op_new(rs, (void *)cb, priv));
}

/* items from flat (key, settings | nil, until) triples */
static void rs_flow_snapshot_cb(redisReply *r, const char *err, void *priv)
{
    flow_op *op = priv;
    store_flow_snap_fn *cb = (store_flow_snap_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 4) {
        cb(NULL, 0, NULL, rs_err(r, err), op->priv);
        free(op);
        return;
    }
    store_flow_snap m = {.fresh = rs_reply_int(r->element[0]) == 1,
                         .version = rs_reply_int(r->element[1]),
                         .more = rs_reply_int(r->element[2]) == 1,
                         .waiting = rs_reply_int(r->element[3])};
    int n = 0;
    store_flow_info *it = xcalloc((r->elements - 4) / 3 + 1, sizeof(*it));
    for (size_t i = 4; i + 3 <= r->elements; i += 3)
        it[n++] = (store_flow_info){
            .key = rs_reply_str(r->element[i]),
            .settings = r->element[i + 1]->type == REDIS_REPLY_STRING ? r->element[i + 1]->str
                                                                        : NULL,
            .until_ms = rs_reply_int(r->element[i + 2])};
    cb(it, n, &m, NULL, op->priv);
    free(it);
    free(op);
}

static void rs_flow_snapshot(store *s, int64_t since, store_flow_snap_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    step st = {0};
    step_str(&st, "snapshot");
    step_int(&st, since);
    flow_eval(rs, &st, rs_flow_snapshot_cb, flow_op_new(rs, (void *)cb, priv));
}

static void rs_flow_list_cb(redisReply *r, const char *err, void *priv)
{
    flow_op *op = priv;
    store_flow_list_fn *cb = (store_flow_list_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1) {
        cb(NULL, 0, NULL, rs_err(r, err), op->priv);
    } else {
        int n;
        const char *next = rs_reply_str(r->element[0]);
        store_flow_info *it = flow_infos(r, 1, r->elements, &n);
        cb(it, n, *next ? next : NULL, NULL, op->priv);
        free(it);
    }
    free(op);
}

static void rs_flow_list(store *s, char kind, const char *after, int limit,
                         store_flow_list_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    step st = {0};
    char k[2] = {kind, '\0'};
    step_str(&st, "list");
    step_str(&st, k);
    step_str(&st, after);
    step_int(&st, limit);
    flow_eval(rs, &st, rs_flow_list_cb, flow_op_new(rs, (void *)cb, priv));
}

static void rs_flow_put(store *s, const char *key, const char *settings, store_flow_done_fn *cb,
                        void *priv)
{
    rstore *rs = RS(s);
    /* new limits are written like an add; a pause or resume (an operator's
     * brake) goes through */
    if (settings && strcmp(settings, "+paused") != 0 && strcmp(settings, "-paused") != 0 &&
        rs_refuse(rs, REFUSE_FLOW, (void *)cb, priv))
        return;
    step st = {0};
    step_str(&st, "put");
    step_str(&st, key);
    /* settings "+paused" / "-paused": set only that */
    int flag = settings && (!strcmp(settings, "+paused") || !strcmp(settings, "-paused"));
    step_str(&st, settings && !flag ? settings : "");
    step_str(&st, !flag ? "" : settings[0] == '+' ? "pause" : "resume");
    flow_eval(rs, &st, rs_flow_done_cb, flow_op_new(rs, (void *)cb, priv));
}

/* ---- life -------------------------------------------------------------- */

static void rs_loaded_cb(redisReply *r, const char *err, void *priv)
{
    const char *name = priv;
    /* no reply: the connection went (rcluster says so), and the next one
     * loads them again */
    (void)err;
    if (r && r->type == REDIS_REPLY_ERROR) log_error("SCRIPT LOAD %s: %s", name, r->str);
}

/* On every (re)connection: load the scripts there, so EVALSHA finds them. The
 * loads go first on the new connection, before any command routed to it,
 * and on that connection only: a node that accepts connections and drops
 * them (a proxy in front of a dead one) would otherwise gather loads sent
 * again until their deadline, a dozen scripts each time it is reached. */
static void rs_on_connect(rcluster *rc, rc_conn conn, void *priv)
{
    rstore *rs = priv;
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", rs->src[i]};
        rc_command_on(rc, conn, rs_loaded_cb, (void *)script_names[i], 3, argv, NULL);
    }
}

static int rs_sync_clock_now(rstore *rs, char *err, size_t errlen)
{
    int64_t t0 = util_mono_us();
    redisReply *r = rc_sync_command(rs->rc, NULL, err, errlen, "TIME");
    int64_t t1 = util_mono_us();
    if (!r) return -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        snprintf(err, errlen, "TIME: %s", rs_err(r, NULL));
        freeReplyObject(r);
        return -1;
    }
    rs->clock_set_us = 0; /* taken whatever its round trip */
    rs_clock_take(rs, r, t0, t1);
    freeReplyObject(r);
    return 0;
}

/* Load the scripts from dir, SCRIPT LOAD them, check or set P:meta (schema,
 * buckets). */
static int rs_init(rstore *rs, const char *scripts_dir, int *fatal, char *err, size_t errlen)
{
    char metakey[KEY_MAX];
    char *lib = NULL;
    redisReply *r = NULL;
    int buckets = rs->buckets;

    /* a script missing or of another form: no wait mends it */
    *fatal = 1;
    if (!(lib = script_read(scripts_dir, "lib", err, errlen))) goto fail;
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        *fatal = 1;
        char *body = script_read(scripts_dir, script_names[i], err, errlen);
        if (!body) goto fail;
        rs->src[i] = script_link(lib, body, err, errlen);
        free(body);
        if (!rs->src[i]) goto fail;
        *fatal = 0;
        r = rc_sync_command(rs->rc, NULL, err, errlen, "SCRIPT LOAD %s", rs->src[i]);
        if (!r || rs_reply_failed(r, "SCRIPT LOAD", fatal, err, errlen)) goto fail;
        if (r->type != REDIS_REPLY_STRING || r->len != 40) {
            snprintf(err, errlen, "SCRIPT LOAD %s.lua: %s", script_names[i],
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            goto fail;
        }
        memcpy(rs->sha[i], r->str, 41);
        freeReplyObject(r);
        r = NULL;
    }

    /* One keyspace, one bucket count: slices of other counts would be missed. */
    rs_meta_key(rs, metakey);
    r = rc_sync_command(rs->rc, metakey, err, errlen, "HSETNX %s buckets %d", metakey, buckets);
    if (!r || rs_reply_failed(r, metakey, fatal, err, errlen)) goto fail;
    freeReplyObject(r);
    r = rc_sync_command(rs->rc, metakey, err, errlen, "HSETNX %s schema %d", metakey, STORE_SCHEMA);
    if (!r || rs_reply_failed(r, metakey, fatal, err, errlen)) goto fail;
    freeReplyObject(r);
    r = rc_sync_command(rs->rc, metakey, err, errlen, "HMGET %s buckets schema wm", metakey);
    if (!r || rs_reply_failed(r, metakey, fatal, err, errlen)) goto fail;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !r->element[0]->str ||
        !r->element[1]->str) {
        /* written just before: read from a node that does not hold it (a
         * failover under way) */
        snprintf(err, errlen, "%s: buckets and schema not read back", metakey);
        goto fail;
    }
    rs->meta_wm = r->element[2]->str != NULL;
    *fatal = 1; /* from here on, a mismatch waiting cannot mend */
    if (atoi(r->element[0]->str) != buckets) {
        snprintf(err, errlen, "scheduler.buckets: %d, but the keyspace %s was made with %s buckets",
                 buckets, rs->prefix, r->element[0]->str);
        goto fail;
    }
    if (atoi(r->element[1]->str) == 1) {
        /* schema 2 reads schema 1's records as they are (lua/lib.lua); a
         * tickd of schema 1 must not read fresh tasks: it refuses from now */
        freeReplyObject(r);
        r = rc_sync_command(rs->rc, metakey, err, errlen, "HSET %s schema %d", metakey,
                            STORE_SCHEMA);
        if (!r) goto fail;
        log_info("keyspace %s: schema 1 upgraded to %d", rs->prefix, STORE_SCHEMA);
    } else if (atoi(r->element[1]->str) != STORE_SCHEMA) {
        snprintf(err, errlen, "keyspace %s has schema %s, this tickd speaks %d",
                 rs->prefix, r->element[1]->str, STORE_SCHEMA);
        goto fail;
    }
    freeReplyObject(r);
    r = NULL;
    *fatal = 0;
    if (rs_sync_clock_now(rs, err, errlen) != 0) goto fail;
    rc_set_connect_cb(rs->rc, rs_on_connect, rs);
    free(lib);
    return 0;
fail:
    if (r) freeReplyObject(r);
    free(lib);
    return -1;
}

static void rs_close(store *s)
{
    rstore *rs = RS(s);
    rcluster *rc = rs->rc;
    /* the counts gathered go first; calls in flight fail now, into their
     * callbacks; any they start fail too (rcluster refuses commands while
     * it is freed) */
    if (rc) qcount_flush(rs);
    if (rc) rc_free(rc);
    rs->rc = NULL;
}

static void rs_free(store *s)
{
    rstore *rs = RS(s);
    if (rs->rc) rc_free(rs->rc);
    rs_watch_free(rs);
    if (rs->flush_ev) event_free(rs->flush_ev);
    if (rs->counts && rs->counts->ev) event_free(rs->counts->ev);
    free(rs->counts);
    for (int i = 0; i < SCRIPT_COUNT; i++) free(rs->src[i]);
    util_pool_drain(&rs->add_ops);
    free(rs);
}

static void rs_hist_add(store *s, const store_hist *h, int64_t keep_ms, store_done_fn *cb,
                        void *priv);
static void rs_hist_read(store *s, int64_t from_minute, int64_t to_minute, store_hist_fn *cb,
                         void *priv);
static void rs_replica_put(store *s, const store_replica *r, int64_t ttl_ms, store_done_fn *cb,
                           void *priv);
static void rs_replica_del(store *s, const char *id, store_done_fn *cb, void *priv);
static void rs_replicas(store *s, store_replicas_fn *cb, void *priv);
static void rs_nodes(store *s, store_nodes_fn *cb, void *priv);

static const store_type redis_type = {
    .name = "redis",
    .add = rs_add,
    .get = rs_get,
    .cancel = rs_cancel,
    .health = rs_health,
    .claim = rs_claim,
    .settle = rs_settle,
    .wm_init = rs_wm_init,
    .wm_get = rs_wm_get,
    .wm_advance = rs_wm_advance,
    .sch_write = rs_sch_write,
    .sch_get = rs_sch_get,
    .sch_list = rs_sch_list,
    .sch_claim = rs_sch_claim,
    .sch_advance = rs_sch_advance,
    .list = rs_list,
    .move = rs_move,
    .now_us = rs_now_us,
    .sync_clock = rs_sync_clock,
    .count = rs_count,
    .counters = rs_counters,
    .alerts = rs_alerts,
    .flow_admit = rs_flow_admit,
    .flow_enqueue = rs_flow_enqueue,
    .flow_pump = rs_flow_pump,
    .flow_take = rs_flow_take,
    .flow_snapshot = rs_flow_snapshot,
    .flow_put = rs_flow_put,
    .flow_info = rs_flow_info,
    .flow_list = rs_flow_list,
    .stats = rs_stats,
    .close = rs_close,
    .free = rs_free,
    .hist_add = rs_hist_add,
    .hist_read = rs_hist_read,
    .replica_put = rs_replica_put,
    .replica_del = rs_replica_del,
    .replicas = rs_replicas,
    .nodes = rs_nodes,
};

int store_redis_probe(const config *cfg, int *fatal, char *err, size_t errlen)
{
    rcluster *c = rc_create(NULL, cfg->nodes, cfg->username, cfg->password, cfg->timeout_ms, 0,
                            fatal, err, errlen);
    if (!c) return -1;
    int rc = 0;
    for (int i = 0; i < rc_node_count(c) && rc == 0; i++) {
        if (!rc_node_serves(c, i)) continue;
        redisReply *r = rc_sync_node_command(c, i, err, errlen, "PING");
        char what[300];
        snprintf(what, sizeof(what), "redis %s: PING", rc_node_name(c, i));
        if (!r || rs_reply_failed(r, what, fatal, err, errlen)) rc = -1;
        if (r) freeReplyObject(r);
    }
    rc_free(c);
    return rc;
}

store *store_redis_create(struct event_base *base, const config *cfg, const char *scripts_dir,
                          int *fatal, char *err, size_t errlen)
{
    rstore *rs = xcalloc(1, sizeof(*rs));
    rs->base.type = &redis_type;
    rs->base.cfg = cfg;
    rs->ev = base;
    rs->prefix = cfg->prefix;
    rs->buckets = (int)cfg->buckets;
    rs->add_bucket = (int)(random() % (rs->buckets > 0 ? rs->buckets : 1));
    rs->flush_ev = event_new(base, -1, EV_READ, rs_add_flush_cb, rs);
    rs->add_ops.keep = UTIL_POOL_KEEP;   /* a store_op is under 1 KiB */
    rs->counts = xcalloc(1, sizeof(*rs->counts));
    rs->counts->ev = evtimer_new(base, qcount_cb, rs);
    log_assert(rs->flush_ev && rs->counts->ev);
    *fatal = 0;
    if (!(rs->rc = rc_create(base, cfg->nodes, cfg->username, cfg->password, cfg->timeout_ms, 0,
                             fatal, err, errlen)) ||
        rs_watch_init(rs, fatal, err, errlen) != 0 ||
        rs_init(rs, scripts_dir, fatal, err, errlen) != 0 ||
        rs_watch_markers(rs, err, errlen) != 0) {
        rs_free(&rs->base);
        return NULL;
    }
    rs_watch_start(rs);
    return &rs->base;
}

/* ---- the console: history, replicas, nodes (store.h) ----------------------
 *
 * History. One HASH per UTC minute, P:{hist.YYYYMMDDHH}:MM, its fields the
 * minute's counts summed over the replicas: ok, af (attempts failed), rt
 * (retried), fl (failed), ex (expired), l0..l14 (lateness buckets), q:<queue>
 * (failed), nq (queues seen). The hash tag is the hour: a minute's writes go
 * to one node, the 60 minutes of an hour too, so an hour is read in one call
 * and a day in 25, while the hours spread over the masters. Each replica adds
 * its counts with one call (history.c: every 2 s); the key expires keep_ms
 * after its last write. Not in the scripts of lua/ (loaded at start): these
 * are short, sent with EVAL and cached by Redis as such.
 *
 * Replicas. P:{console}:replicas, a ZSET of replica ids scored by the time
 * their report ends (ms), and P:{console}:replica, a HASH id -> the report
 * (JSON): one call reads the live ones, with no SCAN; each write drops the
 * reports whose time ended, and both keys go when the last report's does. */

static const char hist_add_lua[] =
    "local k, cap = KEYS[1], tonumber(ARGV[2]) "
    "for i = 3, #ARGV, 2 do "
    "  local f = ARGV[i] "
    "  if string.sub(f, 1, 2) == 'q:' and redis.call('HEXISTS', k, f) == 0 and "
    "     redis.call('HINCRBY', k, 'nq', 1) > cap then f = 'q:" STORE_HIST_OTHER "' end "
    "  redis.call('HINCRBY', k, f, ARGV[i + 1]) "
    "end "
    "redis.call('PEXPIRE', k, ARGV[1]) return 1";
static const char hist_read_lua[] =
    "local out = {} for i = 1, tonumber(ARGV[1]) do out[i] = redis.call('HGETALL', KEYS[i]) end "
    "return out";
static const char replica_put_lua[] =
    "local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3]) "
    "for _, id in ipairs(dead) do redis.call('HDEL', KEYS[2], id) end "
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3]) "
    "redis.call('ZADD', KEYS[1], ARGV[3] + ARGV[4], ARGV[1]) "
    "redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) "
    "local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2] "
    "redis.call('PEXPIREAT', KEYS[1], last) redis.call('PEXPIREAT', KEYS[2], last) "
    "return #dead";
static const char replica_del_lua[] =
    "redis.call('ZREM', KEYS[1], ARGV[1]) return redis.call('HDEL', KEYS[2], ARGV[1])";
static const char replicas_lua[] =
    "local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf') "
    "if #ids == 0 then return {} end "
    "return {ids, redis.call('HMGET', KEYS[2], unpack(ids))}";

#define HIST_FIELDS 5
static const char *const hist_fields[HIST_FIELDS] = {"ok", "af", "rt", "fl", "ex"};

static int64_t *rs_hist_field(store_hist *h, int i)
{
    int64_t *f[HIST_FIELDS] = {&h->succeeded, &h->attempts_failed, &h->retried, &h->failed,
                               &h->expired};
    return f[i];
}

/* The minute's key; its hour (minute / 60) is its hash tag. */
static void rs_hist_key(const rstore *rs, int64_t minute, char *out)
{
    time_t t = (time_t)(minute * 60);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, KEY_MAX, "%s:{hist.%04d%02d%02d%02d}:%02d", rs->prefix, tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min);
}

typedef struct done_ctx {
    store_done_fn *cb;
    void *priv;
} done_ctx;

static void rs_done_cb(redisReply *r, const char *err, void *priv)
{
    done_ctx *c = priv;
    c->cb(!r || r->type == REDIS_REPLY_ERROR ? rs_err(r, err) : NULL, c->priv);
    free(c);
}

/* EVAL of script on keys[0..nkeys) and args, answered by cb(err). */
static void rs_console_eval(rstore *rs, const char *script, int nkeys, const char **keys,
                            int nargs, const char **args, const size_t *arglens, rc_reply_fn *cb,
                            void *priv)
{
    char fence[KEY_MAX];
    int fenced = rs_fence(keys[0], fence), argc = 3 + nkeys + fenced + nargs;
    const char **argv = xmalloc(sizeof(*argv) * (size_t)argc);
    size_t *lens = xmalloc(sizeof(*lens) * (size_t)argc);
    char nk[16];
    snprintf(nk, sizeof(nk), "%d", nkeys + fenced);
    argv[0] = "EVAL", argv[1] = script, argv[2] = nk;
    for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
    for (int i = 0; i < nkeys; i++) argv[3 + i] = keys[i], lens[3 + i] = strlen(keys[i]);
    if (fenced) argv[3 + nkeys] = fence, lens[3 + nkeys] = strlen(fence);
    for (int i = 0, j = 3 + nkeys + fenced; i < nargs; i++, j++)
        argv[j] = args[i], lens[j] = arglens ? arglens[i] : strlen(args[i]);
    rc_command(rs->rc, keys[0], cb, priv, argc, argv, lens);
    free(argv);
    free(lens);
}

static void rs_hist_add(store *s, const store_hist *h, int64_t keep_ms, store_done_fn *cb,
                        void *priv)
{
    rstore *rs = RS(s);
    char key[KEY_MAX];
    const char *keys[1] = {key};
    int cap = 2 + 2 * (HIST_FIELDS + STORE_HIST_BUCKETS + h->nqueues), n = 2;
    char (*num)[24] = xmalloc(sizeof(*num) * (size_t)cap);
    char (*name)[TASK_QUEUE_MAX + 8] = xmalloc(sizeof(*name) * (size_t)(h->nqueues + 1));
    const char **args = xmalloc(sizeof(*args) * (size_t)cap);
    store_hist c = *h;
    rs_hist_key(rs, h->minute, key);
    snprintf(num[0], sizeof(num[0]), "%lld", (long long)keep_ms);
    snprintf(num[1], sizeof(num[1]), "%d", STORE_HIST_QUEUES);
    args[0] = num[0], args[1] = num[1];
    /* only what is not zero: a quiet minute costs a few fields */
    for (int i = 0; i < HIST_FIELDS + STORE_HIST_BUCKETS + h->nqueues; i++) {
        int64_t v = i < HIST_FIELDS ? *rs_hist_field(&c, i)
                  : i < HIST_FIELDS + STORE_HIST_BUCKETS ? h->lateness[i - HIST_FIELDS]
                                                         : h->queues[i - HIST_FIELDS - STORE_HIST_BUCKETS].failed;
        if (!v) continue;
        if (i < HIST_FIELDS) {
            args[n] = hist_fields[i];
        } else if (i < HIST_FIELDS + STORE_HIST_BUCKETS) {
            snprintf(num[n], sizeof(num[n]), "l%d", i - HIST_FIELDS);
            args[n] = num[n];
        } else {
            int q = i - HIST_FIELDS - STORE_HIST_BUCKETS;
            snprintf(name[q], sizeof(name[q]), "q:%s", h->queues[q].name);
            args[n] = name[q];
        }
        snprintf(num[n + 1], sizeof(num[n + 1]), "%lld", (long long)v);
        args[n + 1] = num[n + 1];
        n += 2;
    }
    done_ctx *d = xmalloc(sizeof(*d));
    *d = (done_ctx){cb, priv};
    rs_console_eval(rs, hist_add_lua, 1, keys, n, args, NULL, rs_done_cb, d);
    free(args);
    free(name);
    free(num);
}

typedef struct hist_read_ctx {
    store_hist_fn *cb;
    void *priv;
    int64_t from;
    int n, pending;
    store_hist *mins;           /* one per minute of the range */
    char err[256];
} hist_read_ctx;

/* One minute's HGETALL into h. */
static void rs_hist_parse(const redisReply *r, store_hist *h)
{
    if (!r || r->type != REDIS_REPLY_ARRAY) return;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        int64_t n = strtoll(v->str, NULL, 10);
        int k = 0;
        while (k < HIST_FIELDS && strcmp(f->str, hist_fields[k]) != 0) k++;
        if (k < HIST_FIELDS) {
            *rs_hist_field(h, k) = n;
        } else if (f->str[0] == 'l') {
            int b = atoi(f->str + 1);
            if (b >= 0 && b < STORE_HIST_BUCKETS) h->lateness[b] = n;
        } else if (strncmp(f->str, "q:", 2) == 0 && f->len - 2 < TASK_QUEUE_MAX) {
            h->queues = xrealloc(h->queues, sizeof(*h->queues) * (size_t)(h->nqueues + 1));
            store_hist_queue *q = &h->queues[h->nqueues++];
            snprintf(q->name, sizeof(q->name), "%s", f->str + 2);
            q->failed = n;
        }
    }
}

typedef struct hist_hour_ctx {
    hist_read_ctx *c;
    int64_t first;              /* the first minute asked of this hour */
} hist_hour_ctx;

static void rs_hist_read_cb(redisReply *r, const char *err, void *priv)
{
    hist_hour_ctx *hc = priv;
    hist_read_ctx *c = hc->c;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (!c->err[0]) snprintf(c->err, sizeof(c->err), "%s", rs_err(r, err));
    } else {
        for (size_t i = 0; i < r->elements; i++) {
            int64_t m = hc->first + (int64_t)i;
            if (m - c->from < c->n) rs_hist_parse(r->element[i], &c->mins[m - c->from]);
        }
    }
    free(hc);
    if (--c->pending) return;
    /* the minutes with counts, in order */
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        store_hist *h = &c->mins[i];
        int any = h->nqueues > 0;
        for (int f = 0; f < HIST_FIELDS && !any; f++) any = *rs_hist_field(h, f) != 0;
        for (int b = 0; b < STORE_HIST_BUCKETS && !any; b++) any = h->lateness[b] != 0;
        if (any) c->mins[k++] = *h;
    }
    if (c->err[0]) c->cb(NULL, 0, c->err, c->priv);
    else c->cb(c->mins, k, NULL, c->priv);
    for (int i = 0; i < k; i++) free(c->mins[i].queues);
    free(c->mins);
    free(c);
}

static void rs_hist_none_cb(evutil_socket_t fd, short what, void *arg)
{
    hist_read_ctx *c = arg;
    (void)fd, (void)what;
    c->cb(c->mins, 0, NULL, c->priv);
    free(c->mins);
    free(c);
}

static void rs_hist_read(store *s, int64_t from_minute, int64_t to_minute, store_hist_fn *cb,
                         void *priv)
{
    rstore *rs = RS(s);
    if (to_minute - from_minute > STORE_HIST_RANGE_MAX) to_minute = from_minute + STORE_HIST_RANGE_MAX;
    if (to_minute < from_minute) to_minute = from_minute;
    hist_read_ctx *c = xcalloc(1, sizeof(*c));
    *c = (hist_read_ctx){.cb = cb, .priv = priv, .from = from_minute,
                         .n = (int)(to_minute - from_minute)};
    c->mins = xcalloc((size_t)c->n + 1, sizeof(*c->mins));
    for (int i = 0; i < c->n; i++) c->mins[i].minute = from_minute + i;
    /* one call per hour */
    char(*keys)[KEY_MAX] = xmalloc(sizeof(*keys) * 60);
    const char *kp[60];
    int calls = (int)((to_minute + 59) / 60 - from_minute / 60);
    c->pending = calls > 0 ? calls : 1;
    for (int64_t m = from_minute; m < to_minute;) {
        int64_t end = (m / 60 + 1) * 60;
        if (end > to_minute) end = to_minute;
        int nk = (int)(end - m);
        for (int i = 0; i < nk; i++) rs_hist_key(rs, m + i, keys[i]), kp[i] = keys[i];
        hist_hour_ctx *hc = xmalloc(sizeof(*hc));
        *hc = (hist_hour_ctx){c, m};
        char nks[UTIL_INT_MAX];
        const char *nka[] = {nks};
        util_fmt_int(nks, nk);
        rs_console_eval(rs, hist_read_lua, nk, kp, 1, nka, NULL, rs_hist_read_cb, hc);
        m = end;
    }
    free(keys);
    if (to_minute == from_minute) {
        /* nothing to ask: answered from the loop all the same */
        struct timeval tv = {0, 0};
        log_assert(event_base_once(rs->ev, -1, EV_TIMEOUT, rs_hist_none_cb, c, &tv) == 0);
    }
}

static void rs_console_keys(const rstore *rs, char out[2][KEY_MAX])
{
    snprintf(out[0], KEY_MAX, "%s:{console}:replicas", rs->prefix);
    snprintf(out[1], KEY_MAX, "%s:{console}:replica", rs->prefix);
}

static void rs_replica_put(store *s, const store_replica *r, int64_t ttl_ms, store_done_fn *cb,
                           void *priv)
{
    rstore *rs = RS(s);
    char k[2][KEY_MAX], now[24], ttl[24];
    const char *keys[2] = {k[0], k[1]};
    int64_t t = rs_now_ms(s);
    rs_console_keys(rs, k);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "listen", r->listen);
    cJSON_AddStringToObject(o, "version", r->version);
    cJSON_AddNumberToObject(o, "started_at", (double)r->started_at_ms);
    cJSON_AddNumberToObject(o, "seen", (double)t);
    cJSON_AddNumberToObject(o, "inflight", (double)r->inflight);
    cJSON_AddNumberToObject(o, "held", (double)r->held);
    char *rec = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    snprintf(now, sizeof(now), "%lld", (long long)t);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    const char *args[4] = {r->id, rec, now, ttl};
    done_ctx *d = xmalloc(sizeof(*d));
    *d = (done_ctx){cb, priv};
    rs_console_eval(rs, replica_put_lua, 2, keys, 4, args, NULL, rs_done_cb, d);
    free(rec);
}

static void rs_replica_del(store *s, const char *id, store_done_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    char k[2][KEY_MAX];
    const char *keys[2] = {k[0], k[1]}, *args[1] = {id};
    rs_console_keys(rs, k);
    done_ctx *d = xmalloc(sizeof(*d));
    *d = (done_ctx){cb, priv};
    rs_console_eval(rs, replica_del_lua, 2, keys, 1, args, NULL, rs_done_cb, d);
}

typedef struct replicas_ctx {
    store_replicas_fn *cb;
    void *priv;
} replicas_ctx;

static int64_t rs_json_int(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

static const char *rs_json_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void rs_replicas_cb(redisReply *r, const char *err, void *priv)
{
    replicas_ctx *c = priv;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        c->cb(NULL, 0, rs_err(r, err), c->priv);
        free(c);
        return;
    }
    const redisReply *ids = r->elements == 2 ? r->element[0] : NULL;
    const redisReply *recs = r->elements == 2 ? r->element[1] : NULL;
    size_t n = ids && recs && ids->type == REDIS_REPLY_ARRAY && recs->type == REDIS_REPLY_ARRAY &&
                       ids->elements == recs->elements ? ids->elements : 0;
    store_replica *out = xcalloc(n + 1, sizeof(*out));
    cJSON **objs = xcalloc(n + 1, sizeof(*objs));
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids->element[i]->type != REDIS_REPLY_STRING ||
            recs->element[i]->type != REDIS_REPLY_STRING)
            continue; /* its report dropped between the two reads: gone */
        cJSON *o = objs[k] = cJSON_Parse(recs->element[i]->str);
        out[k++] = (store_replica){ids->element[i]->str, rs_json_str(o, "listen"),
                                   rs_json_str(o, "version"), rs_json_int(o, "started_at"),
                                   rs_json_int(o, "seen"), rs_json_int(o, "inflight"),
                                   rs_json_int(o, "held")};
    }
    c->cb(out, k, NULL, c->priv);
    for (int i = 0; i < k; i++) cJSON_Delete(objs[i]);
    free(objs);
    free(out);
    free(c);
}

static void rs_replicas(store *s, store_replicas_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    char k[2][KEY_MAX], now[24];
    const char *keys[2] = {k[0], k[1]}, *args[1] = {now};
    rs_console_keys(rs, k);
    snprintf(now, sizeof(now), "%lld", (long long)rs_now_ms(s));
    replicas_ctx *c = xmalloc(sizeof(*c));
    *c = (replicas_ctx){cb, priv};
    rs_console_eval(rs, replicas_lua, 2, keys, 1, args, NULL, rs_replicas_cb, c);
}

/* Nodes: INFO of every node known (the masters, on a cluster), and the
 * replicas each master names in its INFO replication. */
#define NODE_REPLICAS_MAX 8

typedef struct node_info {
    char addr[KEY_MAX], err[200], version[32], policy[32], refusing[480], role[16];
    int reachable;
    int64_t used, max;
    int nrep;
    char rep[NODE_REPLICAS_MAX][KEY_MAX];
    int rep_online[NODE_REPLICAS_MAX];
} node_info;

typedef struct nodes_ctx {
    rstore *rs;
    store_nodes_fn *cb;
    void *priv;
    int n, pending;
    node_info *info;
} nodes_ctx;

typedef struct node_ctx {
    nodes_ctx *c;
    int i;
} node_ctx;

static void rs_info_field(const char *info, const char *name, char *out, size_t outlen)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\n%s:", name);
    const char *p = strstr(info, pat);
    out[0] = '\0';
    if (p) snprintf(out, outlen, "%.*s", (int)strcspn(p + strlen(pat), "\r\n"), p + strlen(pat));
}

static void rs_nodes_answer(nodes_ctx *c)
{
    int total = 0;
    for (int i = 0; i < c->n; i++) total += 1 + c->info[i].nrep;
    store_node *out = xcalloc((size_t)total + 1, sizeof(*out));
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        node_info *ni = &c->info[i];
        out[k++] = (store_node){
            .addr = ni->addr, .role = ni->role[0] ? ni->role : "master",
            .reachable = ni->reachable, .err = ni->reachable ? NULL : ni->err,
            .version = ni->version[0] ? ni->version : NULL,
            .used_memory = ni->reachable ? ni->used : -1,
            .maxmemory = ni->reachable ? ni->max : -1,
            .policy = ni->policy[0] ? ni->policy : NULL,
            .refusing = ni->refusing[0] ? ni->refusing : NULL};
        for (int r = 0; r < ni->nrep; r++)
            out[k++] = (store_node){.addr = ni->rep[r], .role = "replica", .primary = ni->addr,
                                    .reachable = ni->rep_online[r],
                                    .err = ni->rep_online[r] ? NULL : "not online as its master sees it",
                                    .used_memory = -1, .maxmemory = -1};
    }
    c->cb(out, k, c->priv);
    free(out);
    free(c->info);
    free(c);
}

static void rs_node_info_cb(redisReply *r, const char *err, void *priv)
{
    node_ctx *nc = priv;
    nodes_ctx *c = nc->c;
    node_info *ni = &c->info[nc->i];
    free(nc);
    if (!r || r->type != REDIS_REPLY_STRING) {
        snprintf(ni->err, sizeof(ni->err), "%s", rs_err(r, err));
    } else {
        rs_node_mem m;
        char v[64];
        ni->reachable = 1;
        rs_node_mem_parse(r->str, &m);
        rs_info_field(r->str, "used_memory", v, sizeof(v));
        ni->used = strtoll(v, NULL, 10);
        ni->max = m.maxmemory;
        snprintf(ni->policy, sizeof(ni->policy), "%s", m.policy);
        rs_info_field(r->str, "redis_version", ni->version, sizeof(ni->version));
        rs_info_field(r->str, "role", v, sizeof(v));
        snprintf(ni->role, sizeof(ni->role), "%s", strcmp(v, "slave") == 0 ? "replica" : "master");
        if (m.evicting && !c->rs->base.cfg->allow_eviction)
            rs_evicting_msg(ni->addr, &m, ni->refusing, sizeof(ni->refusing));
        else if (ni->max > 0 && ni->used >= ni->max)
            snprintf(ni->refusing, sizeof(ni->refusing),
                     "redis %s: used_memory %lld at maxmemory %lld: writes answer OOM", ni->addr,
                     (long long)ni->used, (long long)ni->max);
        /* slave0:ip=127.0.0.1,port=7004,state=online,offset=...,lag=0 */
        for (int s = 0; s < NODE_REPLICAS_MAX; s++) {
            char name[16], line[256], ip[64] = "", state[32] = "";
            int port = 0;
            snprintf(name, sizeof(name), "slave%d", s);
            rs_info_field(r->str, name, line, sizeof(line));
            if (!line[0]) break;
            const char *p;
            if ((p = strstr(line, "ip="))) snprintf(ip, sizeof(ip), "%.*s", (int)strcspn(p + 3, ","), p + 3);
            if ((p = strstr(line, "port="))) port = atoi(p + 5);
            if ((p = strstr(line, "state="))) snprintf(state, sizeof(state), "%.*s", (int)strcspn(p + 6, ","), p + 6);
            snprintf(ni->rep[ni->nrep], sizeof(ni->rep[0]), "%s:%d", ip, port);
            ni->rep_online[ni->nrep++] = strcmp(state, "online") == 0;
        }
    }
    if (--c->pending == 0) rs_nodes_answer(c);
}

static void rs_nodes(store *s, store_nodes_fn *cb, void *priv)
{
    rstore *rs = RS(s);
    nodes_ctx *c = xcalloc(1, sizeof(*c));
    int n = rc_node_count(rs->rc);
    *c = (nodes_ctx){.rs = rs, .cb = cb, .priv = priv, .n = n};
    c->info = xcalloc((size_t)n + 1, sizeof(*c->info));
    const char *argv[] = {"INFO"};
    /* no answer runs before this returns: the count holds one share of its
     * own until every node was asked */
    c->pending = 1;
    for (int i = 0; i < n; i++) {
        snprintf(c->info[i].addr, sizeof(c->info[i].addr), "%s", rc_node_name(rs->rc, i));
        node_ctx *nc = xmalloc(sizeof(*nc));
        *nc = (node_ctx){c, i};
        c->pending++;
        rc_node_command(rs->rc, i, rs_node_info_cb, nc, 1, argv, NULL);
    }
    if (--c->pending == 0) rs_nodes_answer(c);
}
