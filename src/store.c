/* store.c -- see store.h. */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "log.h"
#include "util.h"

static const char *script_names[SCRIPT_COUNT] = {
    "add", "cancel", "claim", "fetch", "settle", "ptr", "wm"};

static int64_t store_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t store_now_ms(const store *s)
{
    return store_realtime_ms() + s->clock_offset_ms;
}

void store_route(const char *slice, char *out, size_t outlen)
{
    snprintf(out, outlen, "{%s}", slice);
}

void store_slice_keys(const store *s, const char *slice, slice_keys *out)
{
    static const char *suffix[5] = {"due", "task", "del", "run", "ptr"};
    for (int i = 0; i < 5; i++)
        snprintf(out->k[i], sizeof(out->k[i]), "%s:{%s}:%s", s->prefix, slice, suffix[i]);
}

static char *store_read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "%s: cannot read", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void store_loaded_cb(redisReply *r, const char *err, void *priv)
{
    const char *name = priv;
    if (!r) log_warn("SCRIPT LOAD %s: %s", name, err);
    else if (r->type == REDIS_REPLY_ERROR) log_error("SCRIPT LOAD %s: %s", name, r->str);
}

/* On every (re)connection: load the scripts there, so EVALSHA finds them. The
 * loads go first on the new connection, before any command routed to it. */
static void store_on_connect(rcluster *rc, int node, void *priv)
{
    store *s = priv;
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", s->src[i]};
        rc_node_command(rc, node, store_loaded_cb, (void *)script_names[i], 3, argv, NULL);
    }
}

static void store_add_flush_cb(evutil_socket_t fd, short what, void *arg);

static int store_sync_clock(store *s, char *err, size_t errlen)
{
    int64_t t0 = store_realtime_ms();
    redisReply *r = rc_sync_command(s->rc, NULL, err, errlen, "TIME");
    int64_t t1 = store_realtime_ms();
    if (!r) return -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        snprintf(err, errlen, "TIME: unexpected reply");
        freeReplyObject(r);
        return -1;
    }
    int64_t redis_ms = strtoll(r->element[0]->str, NULL, 10) * 1000 +
                       strtoll(r->element[1]->str, NULL, 10) / 1000;
    s->clock_offset_ms = redis_ms - (t0 + t1) / 2;
    freeReplyObject(r);
    return 0;
}

int store_init(store *s, struct event_base *base, rcluster *rc, const char *prefix, const char *scripts_dir,
               int buckets, char *err, size_t errlen)
{
    char path[1200], metakey[128];
    char *lib = NULL;
    redisReply *r = NULL;

    memset(s->src, 0, sizeof(s->src));
    s->rc = rc;
    s->adds = NULL;
    s->add_bucket = (int)(random() % (buckets > 0 ? buckets : 1));
    if (!(s->flush_ev = event_new(base, -1, EV_READ, store_add_flush_cb, s))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->buckets = buckets;
    snprintf(s->prefix, sizeof(s->prefix), "%s", prefix);
    snprintf(path, sizeof(path), "%s/lib.lua", scripts_dir);
    if (!(lib = store_read_file(path, err, errlen))) goto fail;
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        snprintf(path, sizeof(path), "%s/%s.lua", scripts_dir, script_names[i]);
        char *body = store_read_file(path, err, errlen);
        if (!body) goto fail;
        size_t n = strlen(lib) + strlen(body) + 2;
        if ((s->src[i] = malloc(n))) snprintf(s->src[i], n, "%s\n%s", lib, body);
        free(body);
        if (!s->src[i]) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        r = rc_sync_command(rc, NULL, err, errlen, "SCRIPT LOAD %s", s->src[i]);
        if (!r) goto fail;
        if (r->type != REDIS_REPLY_STRING || r->len != 40) {
            snprintf(err, errlen, "SCRIPT LOAD %s.lua: %s", script_names[i],
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            goto fail;
        }
        memcpy(s->sha[i], r->str, 41);
        freeReplyObject(r);
        r = NULL;
    }

    /* One keyspace, one bucket count: slices of other counts would be missed. */
    snprintf(metakey, sizeof(metakey), "%s:meta", prefix);
    r = rc_sync_command(rc, metakey, err, errlen, "HSETNX %s buckets %d", metakey, buckets);
    if (!r) goto fail;
    freeReplyObject(r);
    r = rc_sync_command(rc, metakey, err, errlen, "HSETNX %s schema %d", metakey, STORE_SCHEMA);
    if (!r) goto fail;
    freeReplyObject(r);
    r = rc_sync_command(rc, metakey, err, errlen, "HMGET %s buckets schema", metakey);
    if (!r) goto fail;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !r->element[0]->str ||
        !r->element[1]->str) {
        snprintf(err, errlen, "%s: unexpected reply", metakey);
        goto fail;
    }
    if (atoi(r->element[0]->str) != buckets) {
        snprintf(err, errlen, "scheduler.buckets: %d, but the keyspace %s was made with %s buckets",
                 buckets, prefix, r->element[0]->str);
        goto fail;
    }
    if (atoi(r->element[1]->str) != STORE_SCHEMA) {
        snprintf(err, errlen, "keyspace %s has schema %s, this tickd speaks %d",
                 prefix, r->element[1]->str, STORE_SCHEMA);
        goto fail;
    }
    freeReplyObject(r);
    r = NULL;
    if (store_sync_clock(s, err, errlen) != 0) goto fail;
    rc_set_connect_cb(rc, store_on_connect, s);
    free(lib);
    return 0;
fail:
    if (r) freeReplyObject(r);
    free(lib);
    store_free(s);
    return -1;
}

void store_free(store *s)
{
    if (s->flush_ev) event_free(s->flush_ev);
    s->flush_ev = NULL;
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        free(s->src[i]);
        s->src[i] = NULL;
    }
}

/* ---- eval with NOSCRIPT fallback --------------------------------------- */

typedef struct store_call {
    store *s;
    store_script sc;
    int argc;
    const char **argv;   /* [0..2] static, the rest copied into this block */
    size_t *argvlen;
    char nkeys[16];
    char route[128];
    rc_reply_fn *cb;
    void *priv;
    int tried_eval;
    int lane;
} store_call;

static void store_call_free(store_call *c)
{
    free(c); /* argv and the arguments' copies live in the same block */
}

static void store_eval_cb(redisReply *r, const char *err, void *priv)
{
    store_call *c = priv;
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0 &&
        !c->tried_eval) {
        /* The node lost its scripts (flush, failover): send the source once. */
        c->tried_eval = 1;
        c->argv[0] = "EVAL";
        c->argv[1] = c->s->src[c->sc];
        c->argvlen[0] = 4;
        c->argvlen[1] = strlen(c->argv[1]);
        rc_command_lane(c->s->rc, c->route, c->lane, store_eval_cb, c, c->argc, c->argv,
                        c->argvlen);
        return;
    }
    c->cb(r, err, c->priv);
    store_call_free(c);
}

void store_eval(store *s, store_script sc, int nkeys, const char **keys, int nargs,
                const char **args, rc_reply_fn *cb, void *priv)
{
    store_eval_lane(s, 0, sc, nkeys, keys, nargs, args, cb, priv);
}

void store_eval_lane(store *s, int lane, store_script sc, int nkeys, const char **keys,
                     int nargs, const char **args, rc_reply_fn *cb, void *priv)
{
    /* one allocation: the call, argv and argvlen, then copies of the
     * arguments (kept for the NOSCRIPT resend) */
    int argc = 3 + nkeys + nargs;
    size_t bytes = 0;
    for (int i = 0; i < nkeys + nargs; i++) bytes += strlen(i < nkeys ? keys[i] : args[i - nkeys]) + 1;
    store_call *c = xcalloc(1, sizeof(*c) + (size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes);
    c->lane = lane;
    c->s = s;
    c->sc = sc;
    c->cb = cb;
    c->priv = priv;
    c->argc = argc;
    c->argv = (const char **)(c + 1);
    c->argvlen = (size_t *)(c->argv + argc);
    char *p = (char *)(c->argvlen + argc);
    for (int i = 0; i < nkeys + nargs; i++) {
        const char *a = i < nkeys ? keys[i] : args[i - nkeys];
        size_t len = strlen(a);
        memcpy(p, a, len + 1);
        c->argv[3 + i] = p;
        c->argvlen[3 + i] = len;
        p += len + 1;
    }
    int n = snprintf(c->nkeys, sizeof(c->nkeys), "%d", nkeys);
    snprintf(c->route, sizeof(c->route), "%s", keys[0]);
    c->argv[0] = "EVALSHA";
    c->argv[1] = s->sha[sc];
    c->argv[2] = c->nkeys;
    c->argvlen[0] = 7;
    c->argvlen[1] = strlen(s->sha[sc]);
    c->argvlen[2] = (size_t)n;
    rc_command_lane(s->rc, c->route, lane, store_eval_cb, c, c->argc, c->argv, c->argvlen);
}

/* ---- API operations ---------------------------------------------------- */

typedef struct store_op {
    store *s;
    struct store_op *next; /* add: the next op of its batch */
    task_input t;          /* add: borrowed spec */
    char id[TASK_ID_MAX];
    char slice[TASK_SLICE_MAX];
    char route[TASK_SLICE_MAX + 4];
    char due[24], to[24];  /* add: due_ms and timeout_ms as the script takes them */
    int64_t end_ms;        /* add: end of the home slice's minute */
    int tries;
    int exists;
    void *cb;
    void *priv;
    int pending;           /* health: replies still to come */
    int failed;
    char err[200];         /* health: the first failure */
    char *state;           /* add: the task's state JSON, kept for the WAIT */
} store_op;

/* ---- add: gathered per slice ------------------------------------------- */

/* The adds that reach the store in one loop turn go to Redis as one add.lua
 * call per home slice (and lane), at most STORE_ADD_MAX tasks each, sent
 * once the turn's requests have all been read (store_add_flush_cb). Under
 * load that is one script call and one round trip for many tasks. */
#define STORE_ADD_MAX 256

struct store_add_batch {
    struct store_add_batch *next;   /* open batches of this turn */
    char slice[TASK_SLICE_MAX];
    int lane;
    int n;
    store_op *ops, **tail;
};

static void store_add_send(store_op *op);

/* Answer an add. An unavailable one names its id only when it was written
 * but not confirmed (err then says so in full). */
static void store_add_done(store_op *op, store_status st, const char *state, const char *err)
{
    ((store_add_fn *)op->cb)(st, st == ST_UNAVAILABLE && !op->state ? NULL : op->id, state, err,
                             op->priv);
    free(op->state);
    free(op);
}

static void store_add_fail_all(store_op *ops, const char *err)
{
    for (store_op *op = ops, *next; op; op = next) {
        next = op->next;
        store_add_done(op, ST_UNAVAILABLE, NULL, err);
    }
}

static void store_wait_cb(redisReply *r, const char *err, void *priv)
{
    store_add_batch *b = priv;
    store *s = b->ops->s;
    int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer >= s->wait_replicas;
    char why[300];
    snprintf(why, sizeof(why), "stored on the master but not confirmed by %lld replica%s "
             "within %lld ms (%s); POST it again, the same key and execute_at is idempotent",
             (long long)s->wait_replicas, s->wait_replicas == 1 ? "" : "s",
             (long long)s->wait_timeout_ms,
             r && r->type == REDIS_REPLY_INTEGER ? "too few replicas" : (err ? err : "error"));
    for (store_op *op = b->ops, *next; op; op = next) {
        next = op->next;
        /* an id stored before needed no confirmation of this call's writes */
        if (op->exists) store_add_done(op, ST_EXISTS, op->state, NULL);
        else if (ok) store_add_done(op, ST_OK, op->state, NULL);
        else store_add_done(op, ST_UNAVAILABLE, NULL, why);
    }
    free(b);
}

static void store_add_batch_cb(redisReply *r, const char *err, void *priv)
{
    store_add_batch *b = priv;
    store_op *ops = b->ops;
    store *s = ops->s;

    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "STALE", 5) == 0) {
        /* the minute turned while the requests were on their way: re-slice */
        for (store_op *op = ops, *next; op; op = next) {
            next = op->next;
            if (++op->tries < 3) store_add_send(op);
            else store_add_done(op, ST_UNAVAILABLE, NULL, r->str);
        }
        free(b);
        return;
    }
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 * (size_t)b->n) {
        store_add_fail_all(ops, r ? (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply")
                                  : err);
        free(b);
        return;
    }
    int fresh = 0;
    size_t i = 0;
    for (store_op *op = ops; op; op = op->next, i += 2) {
        op->exists = r->element[i]->integer == 0;
        fresh += !op->exists;
    }
    if (s->wait_replicas > 0 && fresh) {
        i = 0;
        for (store_op *op = ops; op; op = op->next, i += 2)
            op->state = xstrndup(r->element[i + 1]->str, r->element[i + 1]->len);
        char n[24], ms[24];
        snprintf(n, sizeof(n), "%lld", (long long)s->wait_replicas);
        snprintf(ms, sizeof(ms), "%lld", (long long)s->wait_timeout_ms);
        const char *argv[] = {"WAIT", n, ms};
        rc_command_lane(s->rc, ops->route, 1, store_wait_cb, b, 3, argv, NULL);
        return;
    }
    i = 0;
    for (store_op *op = ops, *next; op; op = next, i += 2) {
        next = op->next;
        store_add_done(op, op->exists ? ST_EXISTS : ST_OK, r->element[i + 1]->str, NULL);
    }
    free(b);
}

static void store_add_batch_send(store *s, store_add_batch *b)
{
    slice_keys k;
    char end[24], grace[24];
    store_slice_keys(s, b->slice, &k);
    snprintf(end, sizeof(end), "%lld", (long long)b->ops->end_ms);
    /* half the scan's grace: the add refuses a slice well before the scan
     * may pass it, so no clock difference between replicas loses a task */
    snprintf(grace, sizeof(grace), "%lld", (long long)(s->slice_grace_ms / 2));
    const char *keys[] = {k.k[0], k.k[1], k.k[2]};
    const char *args[2 + 4 * STORE_ADD_MAX];
    int n = 0;
    args[n++] = end;
    args[n++] = grace;
    for (store_op *op = b->ops; op; op = op->next) {
        args[n++] = op->id;
        args[n++] = op->t.spec;
        args[n++] = op->due;
        args[n++] = op->to;
    }
    /* with WAIT, the add and its WAIT share lane 1: WAIT counts the writes
     * of its own connection, and blocks none but that one */
    store_eval_lane(s, b->lane, SCRIPT_ADD, 3, keys, n, args, store_add_batch_cb, b);
}

static void store_add_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    store *s = arg;
    store_add_batch *list = s->adds;
    (void)fd;
    (void)what;
    s->adds = NULL;
    s->add_bucket = (s->add_bucket + 1) % s->buckets;
    for (store_add_batch *b = list, *next; b; b = next) {
        next = b->next;
        b->next = NULL;
        store_add_batch_send(s, b);
    }
}

static void store_add_send(store_op *op)
{
    store *s = op->s;
    int64_t home = task_home_ms(op->t.execute_at_ms, store_now_ms(s), s->slice_grace_ms);
    int lane = s->wait_replicas > 0;
    store_add_batch *b;

    /* A given key picks its bucket (so that a re-POST finds its id); a task
     * without one goes to the bucket of this loop turn, so that the turn's
     * adds share one slice and one script call. The bucket turns with each
     * turn: over time they spread evenly, as the key hashes do. */
    int bucket = op->t.key_generated ? s->add_bucket : task_bucket(op->t.key, s->buckets);
    task_slice_name(home, bucket, op->slice);
    task_id_make(op->slice, op->t.execute_at_ms, op->t.key, op->id, sizeof(op->id));
    store_route(op->slice, op->route, sizeof(op->route));
    snprintf(op->due, sizeof(op->due), "%lld", (long long)op->t.due_ms);
    snprintf(op->to, sizeof(op->to), "%lld", (long long)op->t.timeout_ms);
    op->end_ms = (home / 60000 + 1) * 60000;
    op->next = NULL;

    for (b = s->adds; b; b = b->next)
        if (b->lane == lane && strcmp(b->slice, op->slice) == 0) break;
    if (!b) {
        b = xcalloc(1, sizeof(*b));
        memcpy(b->slice, op->slice, sizeof(b->slice));
        b->lane = lane;
        b->tail = &b->ops;
        b->next = s->adds;
        if (!s->adds) event_active(s->flush_ev, EV_READ, 0);
        s->adds = b;
    }
    *b->tail = op;
    b->tail = &op->next;
    if (++b->n == STORE_ADD_MAX) {
        /* full: on its way now, so Redis works while the turn goes on */
        store_add_batch **pp = &s->adds;
        while (*pp != b) pp = &(*pp)->next;
        *pp = b->next;
        b->next = NULL;
        store_add_batch_send(s, b);
    }
}

void store_add(store *s, const task_input *t, store_add_fn *cb, void *priv)
{
    store_op *op = xcalloc(1, sizeof(*op));
    op->s = s;
    op->t = *t;
    op->cb = (void *)cb;
    op->priv = priv;
    store_add_send(op);
}

static void store_get_cb(redisReply *r, const char *err, void *priv)
{
    store_op *op = priv;
    store_get_fn *cb = (store_get_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        cb(ST_UNAVAILABLE, NULL, NULL, r && r->type == REDIS_REPLY_ERROR ? r->str : err, op->priv);
    else if (r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        cb(ST_NOTFOUND, NULL, NULL, NULL, op->priv);
    else
        cb(ST_OK, r->element[0]->str, r->element[1]->str, NULL, op->priv);
    free(op);
}

/* A new operation on the task `id`, with the keys of its home slice. An id
 * tickd never made names no slice: it is looked up in the slice of minute 0,
 * which holds nothing, so it is answered "unknown" from Redis like any other. */
static store_op *store_op_for_id(store *s, const char *id, void *cb, void *priv,
                                 slice_keys *k)
{
    store_op *op = xcalloc(1, sizeof(*op));
    char key[TASK_KEY_MAX + 1];
    int64_t at;
    op->s = s;
    op->cb = cb;
    op->priv = priv;
    if (task_id_parse(id, op->slice, &at, key) != 0)
        snprintf(op->slice, sizeof(op->slice), "000000000000.0");
    store_slice_keys(s, op->slice, k);
    return op;
}

void store_get(store *s, const char *id, store_get_fn *cb, void *priv)
{
    char field[TASK_ID_MAX + 4];
    slice_keys k;
    store_op *op = store_op_for_id(s, id, (void *)cb, priv, &k);
    snprintf(field, sizeof(field), "s:%s", id);
    const char *argv[] = {"HMGET", k.k[1], id, field};
    rc_command(s->rc, k.k[1], store_get_cb, op, 4, argv, NULL);
}

static void store_cancel_cb(redisReply *r, const char *err, void *priv)
{
    store_op *op = priv;
    store_cancel_fn *cb = (store_cancel_fn *)op->cb;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        cb(ST_UNAVAILABLE, r && r->type == REDIS_REPLY_ERROR ? r->str : (err ? err : "unexpected reply"),
           op->priv);
    else if (strcmp(r->element[0]->str, "ok") == 0)
        cb(ST_OK, NULL, op->priv);
    else if (strcmp(r->element[0]->str, "notfound") == 0)
        cb(ST_NOTFOUND, NULL, op->priv);
    else
        cb(ST_CONFLICT, r->elements > 1 && r->element[1]->str ? r->element[1]->str : "", op->priv);
    free(op);
}

void store_cancel(store *s, const char *id, store_cancel_fn *cb, void *priv)
{
    char ret[24];
    slice_keys k;
    store_op *op = store_op_for_id(s, id, (void *)cb, priv, &k);
    snprintf(ret, sizeof(ret), "%lld", (long long)s->retention_ms);
    const char *keys[] = {k.k[1], k.k[2]};
    const char *args[] = {id, ret};
    store_eval(s, SCRIPT_CANCEL, 2, keys, 2, args, store_cancel_cb, op);
}

static void store_health_cb(redisReply *r, const char *err, void *priv)
{
    store_op *op = priv;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        if (!op->failed)
            snprintf(op->err, sizeof(op->err), "%s", r ? r->str : err);
        op->failed = 1;
    }
    if (--op->pending == 0) {
        ((store_health_fn *)op->cb)(!op->failed, op->failed ? op->err : NULL, op->priv);
        free(op);
    }
}

void store_health(store *s, store_health_fn *cb, void *priv)
{
    store_op *op = xcalloc(1, sizeof(*op));
    const char *argv[] = {"PING"};
    int n = rc_node_count(s->rc);
    op->cb = (void *)cb;
    op->priv = priv;
    /* no answer runs before this returns (rcluster's contract), so the
     * count can grow while sending */
    for (int i = 0; i < n; i++) {
        if (!rc_node_serves(s->rc, i)) continue;
        op->pending++;
        rc_node_command(s->rc, i, store_health_cb, op, 1, argv, NULL);
    }
    if (op->pending == 0) {
        op->pending = 1;
        rc_node_command(s->rc, 0, store_health_cb, op, 1, argv, NULL);
    }
}
