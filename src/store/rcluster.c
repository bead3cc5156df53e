/* rcluster.c -- see rcluster.h. */
#include "store/rcluster.h"

#include <errno.h>
#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/util.h"

#define RC_SLOTS 16384
#define RC_MAX_REDIRECTS 5
#define RC_WATCH_MS 500
#define RC_REFRESH_MS 2000
#define RC_BACKOFF_MIN_MS 50
#define RC_BACKOFF_MAX_MS 2000
#define RC_LANES 2

typedef struct rc_node rc_node;

/* One connection to a node. Lane 0 carries every command and is watched by
 * PING; lane 1 carries only writes followed by WAIT, which may block their
 * connection for up to wait_timeout_ms and so must not hold up lane 0. */
typedef struct rc_link {
    rc_node *n;
    int lane;
    redisAsyncContext *ac;
    int connected;          /* the connect callback said yes */
    int up;                 /* connected, and AUTH (if any) taken: usable */
    int auth_refused;       /* the last AUTH was refused (logged once) */
    int64_t connect_ms;     /* when the current attempt started */
    int64_t backoff_ms;
    struct event *retry_ev; /* pending reconnect */
    int ping_out;
    int64_t ping_ms;
    int was_up;             /* it has been usable before: the next ready is a reconnect */
    uint64_t gen;           /* connections made: names this one (rc_conn) */
} rc_link;

struct rc_node {
    rcluster *c;
    int idx;
    char host[256];
    int port;
    char name[300];
    rc_link link[RC_LANES];
};

struct rcluster {
    rc_conn reply_conn;         /* the connection of the reply being handed over */
    int reply_sent;             /* its command was handed to a connection before */
    struct event_base *base;
    int cluster;
    rc_node **nodes;
    int nnodes;
    int16_t slots[RC_SLOTS];
    int64_t timeout_ms;
    char user[256], pass[512]; /* AUTH on every connection when pass is set */
    struct event *watch_ev;
    struct event *flush_ev; /* writes this turn's commands at its end */
    int64_t refresh_ms;     /* last slot map refresh started */
    int refreshing;
    int freeing;
    rc_connect_fn *on_connect;
    void *on_connect_priv;
    uint64_t errors, reconnects; /* rc_counters */
};

typedef struct rc_req {
    rcluster *c;
    rc_reply_fn *cb;
    void *priv;
    char *cmd;                  /* the command in RESP, kept for retries and redirects */
    size_t cmdlen;
    int slot;   /* -1: sent to a fixed node */
    int node;
    int redirects;
    int lane;
    int tries;
    int64_t deadline_ms;        /* retry transient failures until then */
    struct event *retry_ev;
    int pinned;                 /* rc_command_on: that connection or none */
    uint64_t pin_gen;
    int sent;                   /* handed to a connection before */
    int sent_before;            /* sent, before the try under way */
    char *again;                /* rc_command_resp: the byte of cmd set to '1'
                                 * when sent again; NULL: none */
} rc_req;

/* ---- replies in blocks ---------------------------------------------------
 * hiredis makes each element of a reply, and each string, with a malloc of
 * its own, and frees them one by one: a claim's reply of 64 tasks is 130
 * allocations. A reply of the async links is built here instead in a few
 * blocks of its own, the root at the start of the first, and freed whole
 * when hiredis frees the root, after its callback (the only way it frees
 * one). The objects are hiredis's own redisReply, filled as its defaults
 * fill them. */
typedef struct rc_block {
    struct rc_block *next;      /* the reply's blocks after the first */
    struct rc_block *cur;       /* in the first: the block being filled */
    size_t used, cap;
    union {
        max_align_t align;
        char bytes[1];
    } mem[];
} rc_block;

/* a first block in one allocation of 1 KiB, which glibc hands out from its
 * per-thread cache */
#define RC_BLOCK_FIRST (1024 - sizeof(rc_block))
#define RC_BLOCK_GROW_MAX ((size_t)1 << 20)
#define RC_ALIGN(n) (((n) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1))

static rc_block *rc_block_new(size_t cap)
{
    rc_block *b = malloc(sizeof(*b) + cap);
    if (!b) return NULL;
    b->next = NULL;
    b->cur = b;
    b->used = 0;
    b->cap = cap;
    return b;
}

static rc_block *rc_block_of(const void *root)
{
    return (rc_block *)((char *)root - offsetof(rc_block, mem));
}

/* n bytes (a multiple of RC_ALIGN's) of the reply whose first block is first;
 * NULL when out of memory (hiredis then frees the root, and all of it). */
static void *rc_block_take(rc_block *first, size_t n)
{
    rc_block *b = first->cur;
    if (b->cap - b->used < n) {
        /* an object larger than half the next block gets one of its own,
         * and the block being filled goes on */
        size_t cap = b->cap < RC_BLOCK_GROW_MAX ? 2 * b->cap : RC_BLOCK_GROW_MAX;
        int own = n > cap / 2;
        rc_block *nb = rc_block_new(own ? n : cap);
        if (!nb) return NULL;
        nb->next = first->next;
        first->next = nb;
        if (!own) first->cur = nb;
        b = nb;
    }
    void *p = b->mem->bytes + b->used;
    b->used += n;
    return p;
}

/* A zeroed object of task's reply with extra bytes after it; the root
 * starts the reply's first block. */
static redisReply *rc_reply_new(const redisReadTask *task, int type, size_t extra)
{
    redisReply *r;
    if (extra > SIZE_MAX / 2) return NULL;   /* (only where size_t is 32 bits) */
    size_t n = RC_ALIGN(sizeof(*r) + extra);
    if (!task->parent) {
        rc_block *b = rc_block_new(n > RC_BLOCK_FIRST ? n : RC_BLOCK_FIRST);
        if (!b) return NULL;
        r = rc_block_take(b, n);
    } else {
        const redisReadTask *t = task->parent;
        while (t->parent) t = t->parent;
        r = rc_block_take(rc_block_of(t->obj), n);
        if (!r) return NULL;
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    memset(r, 0, sizeof(*r));
    r->type = type;
    return r;
}

static void *rc_reply_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *r = rc_reply_new(task, task->type, len + 1);
    if (!r) return NULL;
    r->str = (char *)(r + 1);
    memcpy(r->str, str, len);
    r->str[len] = '\0';
    r->len = len;
    return r;
}

static void *rc_reply_array(const redisReadTask *task, int elements)
{
    size_t n = elements > 0 ? (size_t)elements : 0;
    /* (hiredis takes any count up to INT_MAX: no size that wraps) */
    if (n > SIZE_MAX / 2 / sizeof(redisReply *)) return NULL;
    redisReply *r = rc_reply_new(task, REDIS_REPLY_ARRAY, n * sizeof(redisReply *));
    if (!r) return NULL;
    /* every element is set as it is read (rc_reply_new); a reply is never
     * walked before it is whole */
    if (n) r->element = (redisReply **)(r + 1);
    r->elements = n;
    return r;
}

static void *rc_reply_integer(const redisReadTask *task, long long value)
{
    redisReply *r = rc_reply_new(task, REDIS_REPLY_INTEGER, 0);
    if (r) r->integer = value;
    return r;
}

static void *rc_reply_nil(const redisReadTask *task)
{
    return rc_reply_new(task, REDIS_REPLY_NIL, 0);
}

static void rc_reply_free(void *root)
{
    if (!root) return;
    rc_block *first = rc_block_of(root), *b = first->next;
    while (b) {
        rc_block *next = b->next;
        free(b);
        b = next;
    }
    free(first);
}

redisReplyObjectFunctions *rc_reply_functions(void)
{
    static redisReplyObjectFunctions fns = {rc_reply_string, rc_reply_array, rc_reply_integer,
                                            rc_reply_nil, rc_reply_free};
    return &fns;
}

/* CRC16-CCITT (XMODEM), as Redis Cluster uses for key slots. */
static uint16_t rc_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned rc_key_slot(const char *key, size_t len)
{
    size_t s, e;
    for (s = 0; s < len && key[s] != '{'; s++) {}
    if (s < len) {
        for (e = s + 1; e < len && key[e] != '}'; e++) {}
        if (e < len && e != s + 1) return rc_crc16(key + s + 1, e - s - 1) & (RC_SLOTS - 1);
    }
    return rc_crc16(key, len) & (RC_SLOTS - 1);
}

void rc_counters(const rcluster *c, uint64_t *errors, uint64_t *reconnects)
{
    *errors = c->errors;
    *reconnects = c->reconnects;
}

int rc_node_count(const rcluster *c) { return c->nnodes; }
const char *rc_node_name(const rcluster *c, int node) { return c->nodes[node]->name; }

int rc_node_serves(const rcluster *c, int node)
{
    if (!c->cluster) return node == 0;
    for (int s = 0; s < RC_SLOTS; s++)
        if (c->slots[s] == node) return 1;
    return 0;
}

int rc_slot_node(const rcluster *c, unsigned slot)
{
    return c->cluster ? c->slots[slot & (RC_SLOTS - 1)] : 0;
}

void rc_set_connect_cb(rcluster *c, rc_connect_fn *fn, void *priv)
{
    c->on_connect = fn;
    c->on_connect_priv = priv;
}

static int rc_node_find(rcluster *c, const char *host, int port)
{
    for (int i = 0; i < c->nnodes; i++)
        if (c->nodes[i]->port == port && strcmp(c->nodes[i]->host, host) == 0) return i;
    return -1;
}

static void rc_link_connect(rc_link *l);

static int rc_node_add(rcluster *c, const char *host, int port)
{
    int i = rc_node_find(c, host, port);
    if (i >= 0) return i;
    rc_node **nn = realloc(c->nodes, sizeof(*nn) * (size_t)(c->nnodes + 1));
    rc_node *n = calloc(1, sizeof(*n));
    if (!nn || !n) {
        free(n);
        if (nn) c->nodes = nn;
        return -1;
    }
    c->nodes = nn;
    n->c = c;
    n->idx = c->nnodes;
    util_copy(n->host, sizeof(n->host), host);
    n->port = port;
    snprintf(n->name, sizeof(n->name), "%s:%d", host, port);
    for (int l = 0; l < RC_LANES; l++) {
        n->link[l].n = n;
        n->link[l].lane = l;
        n->link[l].backoff_ms = RC_BACKOFF_MIN_MS;
    }
    c->nodes[c->nnodes++] = n;
    if (c->base && !c->freeing) rc_link_connect(&n->link[0]);
    return n->idx;
}

/* ---- connections ------------------------------------------------------- */

static void rc_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    rc_link_connect(arg);
}

static void rc_link_schedule(rc_link *l)
{
    if (l->n->c->freeing) return;
    struct timeval tv = {l->backoff_ms / 1000, (l->backoff_ms % 1000) * 1000};
    if (!l->retry_ev) l->retry_ev = evtimer_new(l->n->c->base, rc_retry_cb, l);
    if (l->retry_ev) evtimer_add(l->retry_ev, &tv);
    l->backoff_ms = l->backoff_ms * 2 > RC_BACKOFF_MAX_MS ? RC_BACKOFF_MAX_MS : l->backoff_ms * 2;
}

static void rc_refresh(rcluster *c);

/* The link carries commands: the backoff starts over, and lane 0 runs the
 * connect hook (SCRIPT LOAD...). */
static void rc_link_ready(rc_link *l)
{
    rc_node *n = l->n;
    l->up = 1;
    l->gen++;
    l->backoff_ms = RC_BACKOFF_MIN_MS;
    l->ping_out = 0;
    if (l->was_up) n->c->reconnects++;
    l->was_up = 1;
    if (l->lane != 0) return;
    log_info("redis %s: connected", n->name);
    if (n->c->on_connect)
        n->c->on_connect(n->c, (rc_conn){n->idx, l->lane, l->gen}, n->c->on_connect_priv);
}

/* A link has at most one connection, l->ac; the callbacks of a connection
 * the link has let go (rc_link_drop frees it and may make a new one before
 * hiredis is done with the old) must not touch the link's state: a late
 * "connected" of the old one would mark the link up with no connection. */
static void rc_on_connect(const redisAsyncContext *ac, int status)
{
    rc_link *l = ac->data;
    rc_node *n = l->n;
    if (l->ac != ac) return;
    if (status != REDIS_OK) {
        if (l->lane == 0) log_warn("redis %s: connect failed: %s", n->name, ac->errstr);
        l->ac = NULL; /* hiredis frees the context after this callback */
        rc_link_schedule(l);
        return;
    }
    l->connected = 1;
    if (!n->c->pass[0]) rc_link_ready(l);
    /* else rc_auth_cb makes it ready, once the server takes the password */
}

static void rc_on_disconnect(const redisAsyncContext *ac, int status)
{
    rc_link *l = ac->data;
    rc_node *n = l->n;
    (void)status;
    if (l->ac != ac) return; /* dropped by rc_link_drop, which saw to the rest */
    if (!n->c->freeing && l->lane == 0 && l->up)
        log_warn("redis %s: connection lost%s%s", n->name, ac->errstr[0] ? ": " : "", ac->errstr);
    l->ac = NULL;
    l->up = 0;
    l->connected = 0;
    if (n->c->cluster) rc_refresh(n->c);
    rc_link_schedule(l);
}

/* AUTH [user] pass as an argument vector: its length, 0 when no password is
 * set. The one form for blocking and event-loop connections alike. */
static int rc_auth_argv(const rcluster *c, const char *argv[3])
{
    int n = 0;
    if (!c->pass[0]) return 0;
    argv[n++] = "AUTH";
    if (c->user[0]) argv[n++] = c->user;
    argv[n++] = c->pass;
    return n;
}

/* AUTH taken: the link is ready. Refused (the password changed under a
 * running tickd): what was queued behind it gets NOAUTH (retried as
 * transient), and the connection is made again with a growing backoff until
 * the server takes the password; the refusal is logged once. */
static void rc_auth_cb(redisAsyncContext *ac, void *rv, void *priv)
{
    redisReply *r = rv;
    rc_link *l = ac->data;
    (void)priv;
    if (!r || !l || l->ac != ac) return; /* the link was dropped meanwhile */
    if (r->type != REDIS_REPLY_ERROR) {
        if (l->auth_refused && l->lane == 0) log_info("redis %s: AUTH taken", l->n->name);
        l->auth_refused = 0;
        rc_link_ready(l);
        return;
    }
    if (!l->auth_refused && l->lane == 0)
        log_error("redis %s: AUTH refused (redis.username / redis.password): %s; retrying",
                  l->n->name, r->str);
    l->auth_refused = 1;
    redisAsyncDisconnect(ac);
}

static void rc_link_connect(rc_link *l)
{
    rc_node *n = l->n;
    if (l->ac || n->c->freeing) return;
    redisAsyncContext *ac = redisAsyncConnect(n->host, n->port);
    if (!ac) {
        rc_link_schedule(l);
        return;
    }
    if (ac->err) {
        log_warn("redis %s: %s", n->name, ac->errstr);
        redisAsyncFree(ac);
        rc_link_schedule(l);
        return;
    }
    ac->data = l;
    ac->c.reader->fn = rc_reply_functions();
    l->ac = ac;
    l->up = 0;
    l->connect_ms = util_mono_ms();
    redisLibeventAttach(ac, n->c->base);
    redisAsyncSetConnectCallback(ac, rc_on_connect);
    redisAsyncSetDisconnectCallback(ac, rc_on_disconnect);
    /* queued first, so it goes before anything else sent on this connection */
    const char *auth[3];
    int nauth = rc_auth_argv(n->c, auth);
    if (nauth) redisAsyncCommandArgv(ac, rc_auth_cb, NULL, nauth, auth, NULL);
}

static void rc_ping_cb(redisAsyncContext *ac, void *r, void *priv)
{
    rc_link *l = ac->data;
    (void)priv;
    if (r && l && l->ac == ac) l->ping_out = 0;
}

/* Let go of the link's connection and make it again after the backoff. The
 * reconnect is scheduled before the connection is freed: freeing fails its
 * pending commands into their callbacks, which may send to this node again
 * at once, and those must wait for the scheduled connection rather than
 * make one of their own. */
static void rc_link_drop(rc_link *l)
{
    redisAsyncContext *ac = l->ac;
    rcluster *c = l->n->c;
    l->ac = NULL;
    l->up = 0;
    l->connected = 0;
    rc_link_schedule(l);
    redisAsyncFree(ac); /* fails pending commands; its callbacks leave l alone */
    if (c->cluster) rc_refresh(c);
}

/* Watchdog: a node silent past timeout_ms (PING unanswered on lane 0, or a
 * connect that never completes) is dropped; its pending commands fail (and
 * are retried), and it reconnects. */
static void rc_watch_cb(evutil_socket_t fd, short what, void *arg)
{
    rcluster *c = arg;
    int64_t now = util_mono_ms();
    (void)fd, (void)what;
    for (int i = 0; i < c->nnodes; i++) {
        for (int lane = 0; lane < RC_LANES; lane++) {
            rc_link *l = &c->nodes[i]->link[lane];
            if (!l->ac) continue;
            if (!l->up && now - l->connect_ms > c->timeout_ms) {
                rc_link_drop(l);
                continue;
            }
            if (lane != 0) continue;
            if (l->up && l->ping_out && now - l->ping_ms > c->timeout_ms) {
                log_warn("redis %s: no answer for %lld ms, reconnecting", c->nodes[i]->name,
                         (long long)c->timeout_ms);
                rc_link_drop(l);
                continue;
            }
            if (l->up && !l->ping_out &&
                redisAsyncCommand(l->ac, rc_ping_cb, NULL, "PING") == REDIS_OK) {
                l->ping_out = 1;
                l->ping_ms = now;
            }
        }
    }
    if (c->cluster && now - c->refresh_ms >= RC_REFRESH_MS) rc_refresh(c);
}

/* ---- slot map ---------------------------------------------------------- */

int rc_apply_slots(rcluster *c, const redisReply *r, const char *from)
{
    int ranges = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY) return -1;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            return -1;
        const redisReply *m = e->element[2];
        if (m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER)
            return -1;
        const char *host = m->element[0]->len ? m->element[0]->str : from;
        int node = rc_node_add(c, host, (int)m->element[1]->integer);
        if (node < 0) return -1;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        for (long long s = lo; s <= hi && s < RC_SLOTS; s++)
            if (s >= 0) c->slots[s] = (int16_t)node;
        ranges++;
    }
    return ranges;
}

static void rc_refresh_cb(redisAsyncContext *ac, void *r, void *priv)
{
    rcluster *c = priv;
    c->refreshing = 0;
    if (!r || c->freeing) return;
    rc_link *l = ac->data;
    if (rc_apply_slots(c, r, l ? l->n->host : "127.0.0.1") < 0)
        log_warn("redis: CLUSTER SLOTS gave no usable slot map");
}

/* Ask any connected node for the slot map (at most one request at a time). */
static void rc_refresh(rcluster *c)
{
    if (c->refreshing || c->freeing) return;
    c->refresh_ms = util_mono_ms();
    for (int i = 0; i < c->nnodes; i++) {
        rc_node *n = c->nodes[(i + (int)(c->refresh_ms / RC_REFRESH_MS)) % c->nnodes];
        if (n->link[0].up && n->link[0].ac &&
            redisAsyncCommand(n->link[0].ac, rc_refresh_cb, c, "CLUSTER SLOTS") == REDIS_OK) {
            c->refreshing = 1;
            return;
        }
    }
}

int rc_parse_redirect(const char *s, int *ask, unsigned *slot, char *host, size_t hostlen,
                      int *port)
{
    const char *p;
    if (strncmp(s, "MOVED ", 6) == 0) *ask = 0, p = s + 6;
    else if (strncmp(s, "ASK ", 4) == 0) *ask = 1, p = s + 4;
    else return -1;
    char *end;
    unsigned long sl = strtoul(p, &end, 10);
    if (end == p || *end != ' ' || sl >= RC_SLOTS) return -1;
    p = end + 1;
    const char *colon = strrchr(p, ':');
    if (!colon || (size_t)(colon - p) >= hostlen) return -1;
    long pt = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || pt <= 0 || pt > 65535) return -1;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    *slot = (unsigned)sl;
    *port = (int)pt;
    return 0;
}

/* ---- commands ---------------------------------------------------------- */

static void rc_req_free(rc_req *q)
{
    if (q->retry_ev) event_free(q->retry_ev);
    free(q); /* the command lives in the same block, or is the caller's */
}

typedef struct rc_fail {
    rc_req *q;
    const char *err;
} rc_fail;

static void rc_fail_cb(evutil_socket_t fd, short what, void *arg)
{
    rc_fail *f = arg;
    (void)fd, (void)what;
    f->q->c->reply_sent = f->q->sent;
    f->q->cb(NULL, f->err, f->q->priv);
    rc_req_free(f->q);
    free(f);
}

/* Fail a request from the loop, never from inside rc_command. */
static void rc_fail_later(rc_req *q, const char *err)
{
    rc_fail *f = malloc(sizeof(*f));
    struct timeval tv = {0, 0};
    q->c->errors++;
    if (f) {
        f->q = q;
        f->err = err;
        if (event_base_once(q->c->base, -1, EV_TIMEOUT, rc_fail_cb, f, &tv) == 0) return;
        free(f);
    }
    /* out of memory: nothing better than failing now */
    q->c->reply_sent = q->sent;
    q->cb(NULL, err, q->priv);
    rc_req_free(q);
}

static void rc_send(rc_req *q, int node, int asking);

static void rc_req_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    rc_req *q = arg;
    (void)fd, (void)what;
    rc_send(q, q->slot >= 0 ? q->c->slots[q->slot] : q->node, 0);
}

/* A transient failure (no connection, connection lost, cluster failing
 * over): refresh the slot map and send again with backoff until the
 * request's deadline (timeout_ms after it was made). Every command tickd
 * sends may be repeated: its scripts are idempotent, or (claim) a repeat
 * only claims what is still unclaimed. Returns 0 if a retry is scheduled. */
static int rc_retry(rc_req *q)
{
    rcluster *c = q->c;
    if (c->freeing || util_mono_ms() >= q->deadline_ms) return -1;
    if (c->cluster) rc_refresh(c);
    int64_t ms = 25LL << (q->tries < 5 ? q->tries : 5);
    q->tries++;
    /* a slot that moves answers ASK then TRYAGAIN on each try until it
     * has moved: the deadline bounds those, not the redirects' cap */
    q->redirects = 0;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (!q->retry_ev && !(q->retry_ev = evtimer_new(c->base, rc_req_retry_cb, q))) return -1;
    return evtimer_add(q->retry_ev, &tv);
}

static int rc_transient(const redisReply *r)
{
    /* NOAUTH: sent behind an AUTH the server refused; the link is re-made */
    static const char *codes[] = {"CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "LOADING", "NOAUTH"};
    if (r->type != REDIS_REPLY_ERROR) return 0;
    for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++)
        if (strncmp(r->str, codes[i], strlen(codes[i])) == 0) return 1;
    return 0;
}

static void rc_on_reply(redisAsyncContext *ac, void *rv, void *priv)
{
    rc_req *q = priv;
    redisReply *r = rv;
    rc_link *l = ac->data;
    if (!r || (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) != 0 &&
               strncmp(r->str, "ASK ", 4) != 0))
        q->c->errors++;
    q->c->reply_conn = l ? (rc_conn){l->n->idx, l->lane, l->gen} : (rc_conn){-1, 0, 0};
    /* hiredis writes only once connected: a command failed on a connection
     * that was never made never left (Redis down, refusing connections) */
    if (!r && !(ac->c.flags & REDIS_CONNECTED)) q->sent = q->sent_before;
    q->c->reply_sent = q->sent;
    if (q->pinned) { /* its answer, whatever it is: never sent again */
        q->cb(r, r ? NULL : "redis connection lost", q->priv);
        rc_req_free(q);
        return;
    }
    if (!r) {
        if (rc_retry(q) == 0) return;
        q->cb(NULL, q->c->freeing ? "shutting down" : "redis connection lost", q->priv);
        rc_req_free(q);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR && q->slot >= 0 && q->redirects < RC_MAX_REDIRECTS &&
        (strncmp(r->str, "MOVED ", 6) == 0 || strncmp(r->str, "ASK ", 4) == 0)) {
        char host[256];
        int ask, port;
        unsigned slot;
        if (rc_parse_redirect(r->str, &ask, &slot, host, sizeof(host), &port) == 0) {
            int node = rc_node_add(q->c, host, port);
            if (node >= 0) {
                q->redirects++;
                if (!ask) {
                    q->c->slots[slot] = (int16_t)node;
                    rc_refresh(q->c);
                }
                rc_send(q, node, ask);
                return;
            }
        }
    }
    if (rc_transient(r) && rc_retry(q) == 0) return;
    q->cb(r, NULL, q->priv);
    rc_req_free(q);
}

static void rc_send(rc_req *q, int node, int asking)
{
    rc_node *n = node >= 0 && node < q->c->nnodes ? q->c->nodes[node] : NULL;
    if (q->c->freeing) {
        rc_fail_later(q, "shutting down");
        return;
    }
    rc_link *l = n ? &n->link[q->lane] : NULL;
    if (q->pinned && (!l || !l->ac || !l->up || l->gen != q->pin_gen)) {
        rc_fail_later(q, "the connection of the command before was lost");
        return;
    }
    /* lane 1 connects on first use; a link waiting out its backoff waits */
    if (l && !l->ac && !(l->retry_ev && evtimer_pending(l->retry_ev, NULL))) rc_link_connect(l);
    if (!l || !l->ac) {
        if (rc_retry(q) != 0) rc_fail_later(q, "redis unavailable");
        return;
    }
    if (asking) redisAsyncCommand(l->ac, NULL, NULL, "ASKING");
    /* sent before: it may have run, its answer lost with its connection */
    if (q->sent && q->again) *q->again = '1';
    if (redisAsyncFormattedCommand(l->ac, rc_on_reply, q, q->cmd, q->cmdlen) != REDIS_OK) {
        if (rc_retry(q) != 0) rc_fail_later(q, "redis unavailable");
        return;
    }
    q->sent_before = q->sent;
    q->sent = 1;
    if (q->c->flush_ev) event_active(q->c->flush_ev, EV_WRITE, 0);
}

static char *rc_resp_len(char *p, char type, size_t n)
{
    char buf[24], *b = buf + sizeof(buf);
    do *--b = (char)('0' + n % 10); while (n /= 10);
    *p++ = type;
    while (b < buf + sizeof(buf)) *p++ = *b++;   /* a few digits: no memcpy call */
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char *rc_resp_count(char *p, size_t n)
{
    return rc_resp_len(p, '*', n);
}

char *rc_resp_arg(char *p, const char *s, size_t len)
{
    p = rc_resp_len(p, '$', len);
    memcpy(p, s, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* A request, its command in RESP after it in the same allocation (bytes),
 * or borrowed (bytes 0: set by the caller). Only the header is zeroed: the
 * command (a settle call's can be tens of KB) is written whole. */
static rc_req *rc_req_alloc(rcluster *c, rc_reply_fn *cb, void *priv, size_t bytes)
{
    rc_req *q = malloc(sizeof(*q) + bytes);
    if (!q) return NULL;
    memset(q, 0, sizeof(*q));
    q->c = c;
    q->cb = cb;
    q->priv = priv;
    q->cmd = (char *)(q + 1);
    return q;
}

/* A request and its command, formatted once in RESP (what hiredis would
 * format on every send, a printf per argument), in one allocation. */
static rc_req *rc_req_new(rcluster *c, rc_reply_fn *cb, void *priv, int argc,
                          const char **argv, const size_t *argvlen)
{
    size_t bytes = RC_RESP_HEAD;
    for (int i = 0; i < argc; i++) bytes += RC_RESP_ARG(argvlen ? argvlen[i] : strlen(argv[i]));
    rc_req *q = rc_req_alloc(c, cb, priv, bytes);
    if (!q) return NULL;
    char *p = rc_resp_count(q->cmd, (size_t)argc);
    for (int i = 0; i < argc; i++)
        p = rc_resp_arg(p, argv[i], argvlen ? argvlen[i] : strlen(argv[i]));
    q->cmdlen = (size_t)(p - q->cmd);
    return q;
}

static void rc_oom_cb(evutil_socket_t fd, short what, void *arg);

typedef struct rc_oom {
    rcluster *c;
    rc_reply_fn *cb;
    void *priv;
} rc_oom;

static void rc_oom_cb(evutil_socket_t fd, short what, void *arg)
{
    rc_oom *o = arg;
    (void)fd, (void)what;
    o->c->reply_sent = 0;
    o->cb(NULL, "out of memory", o->priv);
    free(o);
}

/* Send q (NULL: out of memory, cb fails from the loop). */
static void rc_start(rcluster *c, rc_req *q, int slot, int node, int lane, rc_reply_fn *cb,
                     void *priv)
{
    if (!q) {
        rc_oom *o = malloc(sizeof(*o));
        struct timeval tv = {0, 0};
        if (o && (o->c = c, o->cb = cb, o->priv = priv,
                  event_base_once(c->base, -1, EV_TIMEOUT, rc_oom_cb, o, &tv) == 0))
            return;
        free(o);
        c->reply_sent = 0;
        cb(NULL, "out of memory", priv);
        return;
    }
    q->slot = slot;
    q->node = node;
    q->lane = lane;
    q->deadline_ms = util_mono_ms() + c->timeout_ms;
    rc_send(q, node, 0);
}

static void rc_start_routed(rcluster *c, rc_req *q, const char *route, int lane,
                            rc_reply_fn *cb, void *priv)
{
    int slot = c->cluster ? (int)rc_key_slot(route, strlen(route)) : -1;
    int node = c->cluster ? c->slots[slot] : 0;
    rc_start(c, q, slot, node, lane, cb, priv);
}

void rc_command_lane(rcluster *c, const char *route, int lane, rc_reply_fn *cb, void *priv,
                     int argc, const char **argv, const size_t *argvlen)
{
    rc_start_routed(c, rc_req_new(c, cb, priv, argc, argv, argvlen), route, lane, cb, priv);
}

void rc_command_resp(rcluster *c, const char *route, int lane, rc_reply_fn *cb, void *priv,
                     char *cmd, size_t len, char *again)
{
    rc_req *q = rc_req_alloc(c, cb, priv, 0);
    if (q) {
        q->cmd = cmd;
        q->cmdlen = len;
        q->again = again;
    }
    rc_start_routed(c, q, route, lane, cb, priv);
}

rc_conn rc_reply_conn(const rcluster *c)
{
    return c->reply_conn;
}

int rc_reply_sent(const rcluster *c)
{
    return c->reply_sent;
}

void rc_command_on(rcluster *c, rc_conn conn, rc_reply_fn *cb, void *priv, int argc,
                   const char **argv, const size_t *argvlen)
{
    rc_req *q = rc_req_new(c, cb, priv, argc, argv, argvlen);
    if (!q) {
        rc_start(c, NULL, -1, -1, 0, cb, priv); /* fails it from the loop */
        return;
    }
    q->slot = -1;
    q->node = conn.node;
    q->lane = conn.lane;
    q->pinned = 1;
    q->pin_gen = conn.gen;
    q->deadline_ms = util_mono_ms();
    rc_send(q, conn.node, 0);
}

void rc_command(rcluster *c, const char *route, rc_reply_fn *cb, void *priv,
                int argc, const char **argv, const size_t *argvlen)
{
    rc_command_lane(c, route, 0, cb, priv, argc, argv, argvlen);
}

void rc_node_command(rcluster *c, int node, rc_reply_fn *cb, void *priv,
                     int argc, const char **argv, const size_t *argvlen)
{
    rc_start(c, rc_req_new(c, cb, priv, argc, argv, argvlen), -1, node, 0, cb, priv);
}

/* ---- life -------------------------------------------------------------- */

static int rc_parse_hostport(const char *s, size_t len, char *host, size_t hostlen, int *port)
{
    const char *colon = memrchr(s, ':', len);
    char buf[16];
    if (!colon || colon == s || (size_t)(colon - s) >= hostlen) return -1;
    size_t plen = len - (size_t)(colon - s) - 1;
    if (plen == 0 || plen >= sizeof(buf)) return -1;
    memcpy(buf, colon + 1, plen);
    buf[plen] = '\0';
    char *end;
    long p = strtol(buf, &end, 10);
    if (*end || p <= 0 || p > 65535) return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (int)p;
    return 0;
}

/* Commands queued in hiredis would be written when the loop next polls the
 * sockets as writable: one more turn of the loop, and an epoll_ctl pair,
 * per batch. The flush event, made active with the first command of a turn,
 * runs once the turn's other callbacks have queued theirs, and writes them
 * all then. Under load that takes a wakeup off every round trip. */
static void rc_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    rcluster *c = arg;
    (void)fd;
    (void)what;
    for (int i = 0; i < c->nnodes; i++)
        for (int l = 0; l < RC_LANES; l++) {
            redisAsyncContext *ac = c->nodes[i]->link[l].ac;
            if (ac && c->nodes[i]->link[l].up && sdslen(ac->c.obuf) > 0)
                redisAsyncHandleWrite(ac);
        }
}

/* Whether an error reply to AUTH refuses the credentials themselves (which
 * waiting does not mend), rather than the moment ("max number of clients"). */
static int rc_auth_refusal(const char *e)
{
    return strncmp(e, "WRONGPASS", 9) == 0 || strstr(e, "invalid password") ||
           strstr(e, "invalid username") || strncmp(e, "ERR AUTH", 8) == 0 ||
           strstr(e, "without any password") || strstr(e, "wrong number of arguments");
}

/* AUTH on a new blocking connection. 0; -1 when it failed for now (err);
 * -2 when the server refused the credentials (err). */
static int rc_sync_auth(const rcluster *c, redisContext *rcx, const char *name, char *err,
                        size_t errlen)
{
    const char *auth[3];
    int nauth = rc_auth_argv(c, auth);
    if (!nauth) return 0;
    redisReply *r = redisCommandArgv(rcx, nauth, auth, NULL);
    int rc = !r ? -1 : r->type != REDIS_REPLY_ERROR ? 0 : rc_auth_refusal(r->str) ? -2 : -1;
    if (rc == -2)
        snprintf(err, errlen, "redis %s: AUTH refused (redis.username / redis.password): %s",
                 name, r->str);
    else if (rc)
        snprintf(err, errlen, "redis %s: AUTH failed: %s", name, r ? r->str : rcx->errstr);
    if (r) freeReplyObject(r);
    return rc;
}

rcluster *rc_create(struct event_base *base, const char *seeds, const char *user,
                    const char *pass, int64_t timeout_ms, int64_t wait_ms, int *fatal,
                    char *err, size_t errlen)
{
    int dummy;
    if (!fatal) fatal = &dummy;
    *fatal = 1;
    rcluster *c = calloc(1, sizeof(*c));
    char hosts[16][256];
    int ports[16], nseeds = 0;
    int64_t start = util_mono_ms();
    int64_t sleep_ms = 100;

    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->timeout_ms = timeout_ms;
    util_copy(c->user, sizeof(c->user), user ? user : "");
    util_copy(c->pass, sizeof(c->pass), pass ? pass : "");
    memset(c->slots, 0xff, sizeof(c->slots));
    for (const char *p = seeds; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (nseeds == 16) {
            snprintf(err, errlen, "redis.nodes: more than 16 seed nodes");
            goto fail;
        }
        if (rc_parse_hostport(p, len, hosts[nseeds], sizeof(hosts[0]), &ports[nseeds]) != 0) {
            snprintf(err, errlen, "redis.nodes: \"%.*s\" is not host:port", (int)len, p);
            goto fail;
        }
        nseeds++;
        p += len + (e ? 1 : 0);
    }
    if (nseeds == 0) {
        snprintf(err, errlen, "redis.nodes: empty");
        goto fail;
    }

    /* Find the mode with blocking connections, before the loop runs. */
    for (;;) {
        for (int i = 0; i < nseeds; i++) {
            struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
            redisContext *rcx = redisConnectWithTimeout(hosts[i], ports[i], tv);
            if (!rcx || rcx->err) {
                snprintf(err, errlen, "redis %s:%d: %s", hosts[i], ports[i],
                         rcx ? rcx->errstr : "out of memory");
                if (rcx) redisFree(rcx);
                continue;
            }
            redisSetTimeout(rcx, tv);
            char name[300];
            snprintf(name, sizeof(name), "%s:%d", hosts[i], ports[i]);
            int auth = rc_sync_auth(c, rcx, name, err, errlen);
            redisReply *r = auth ? NULL : redisCommand(rcx, "CLUSTER SLOTS");
            redisFree(rcx);
            if (auth == -2) goto fail; /* waiting does not mend a password */
            if (auth) continue;
            if (!r) {
                snprintf(err, errlen, "redis %s: no answer", name);
                continue;
            }
            if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0) {
                snprintf(err, errlen, "redis %s: the server wants a password: set "
                         "redis.password (and redis.username for an ACL user)", name);
                freeReplyObject(r);
                goto fail;
            }
            if (r->type == REDIS_REPLY_ERROR && !strstr(r->str, "cluster support disabled")) {
                /* NOPERM (an ACL without CLUSTER) is for the operator to
                 * mend; LOADING, max clients... may pass */
                int noperm = strncmp(r->str, "NOPERM", 6) == 0;
                snprintf(err, errlen, "redis %s: CLUSTER SLOTS: %s%s", name, r->str,
                         noperm ? " (tickd's user needs +cluster|slots)" : "");
                freeReplyObject(r);
                if (noperm) goto fail;
                continue;
            }
            if (r->type == REDIS_REPLY_ERROR) {
                /* cluster support disabled: the plain one-server case */
                freeReplyObject(r);
                if (rc_node_add(c, hosts[i], ports[i]) < 0) goto oom;
            } else {
                c->cluster = 1;
                int n = rc_apply_slots(c, r, hosts[i]);
                freeReplyObject(r);
                if (n <= 0) {
                    snprintf(err, errlen, "redis %s:%d: cluster has no slots assigned yet",
                             hosts[i], ports[i]);
                    c->cluster = 0;
                    continue;
                }
            }
            goto found;
        }
        if (util_mono_ms() - start >= wait_ms) {
            *fatal = 0;
            goto fail;
        }
        log_warn("%s; retrying", err);
        struct timespec ts = {0, sleep_ms * 1000000};
        nanosleep(&ts, NULL);
        if (sleep_ms < 1000) sleep_ms *= 2;
    }
found:
    *fatal = 0;
    if (!base) return c; /* a probe (store_redis_probe): no loop, no links */
    c->base = base;
    for (int i = 0; i < c->nnodes; i++) rc_link_connect(&c->nodes[i]->link[0]);
    c->watch_ev = event_new(base, -1, EV_PERSIST, rc_watch_cb, c);
    c->flush_ev = event_new(base, -1, 0, rc_flush_cb, c);
    struct timeval wt = {0, RC_WATCH_MS * 1000};
    if (!c->watch_ev || !c->flush_ev || event_add(c->watch_ev, &wt) != 0) goto oom;
    c->refresh_ms = util_mono_ms();
    log_info("redis: %s mode, %d node%s", c->cluster ? "cluster" : "single-server", c->nnodes,
             c->nnodes == 1 ? "" : "s");
    return c;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    rc_free(c);
    return NULL;
}

rcluster *rc_create_offline(void)
{
    rcluster *c = calloc(1, sizeof(*c));
    if (c) {
        c->cluster = 1;
        memset(c->slots, 0xff, sizeof(c->slots));
    }
    return c;
}

void rc_free(rcluster *c)
{
    if (!c) return;
    c->freeing = 1;
    for (int i = 0; i < c->nnodes; i++) {
        rc_node *n = c->nodes[i];
        for (int l = 0; l < RC_LANES; l++) {
            if (n->link[l].ac) {
                redisAsyncContext *ac = n->link[l].ac;
                n->link[l].ac = NULL;
                redisAsyncFree(ac);
            }
            if (n->link[l].retry_ev) event_free(n->link[l].retry_ev);
        }
        free(n);
    }
    if (c->watch_ev) event_free(c->watch_ev);
    if (c->flush_ev) event_free(c->flush_ev);
    free(c->nodes);
    free(c);
}

/* A blocking command on node `node`, following MOVED when `follow`. */
static redisReply *rc_sync_v(rcluster *c, int node, int follow, char *err, size_t errlen,
                             const char *fmt, va_list ap0)
{
    struct timeval tv = {c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000};
    redisReply *r = NULL;
    va_list ap;

    if (node < 0 || node >= c->nnodes) node = 0;
    for (int hop = 0; hop < 3; hop++) {
        rc_node *n = c->nodes[node];
        redisContext *rcx = redisConnectWithTimeout(n->host, n->port, tv);
        if (!rcx || rcx->err) {
            snprintf(err, errlen, "redis %s: %s", n->name, rcx ? rcx->errstr : "out of memory");
            if (rcx) redisFree(rcx);
            return NULL;
        }
        redisSetTimeout(rcx, tv);
        if (rc_sync_auth(c, rcx, n->name, err, errlen) != 0) {
            redisFree(rcx);
            return NULL;
        }
        va_copy(ap, ap0);
        r = redisvCommand(rcx, fmt, ap);
        va_end(ap);
        if (!r) snprintf(err, errlen, "redis %s: %s", n->name, rcx->errstr);
        redisFree(rcx);
        if (follow && r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) == 0) {
            char host[256];
            int ask, port;
            unsigned slot;
            if (rc_parse_redirect(r->str, &ask, &slot, host, sizeof(host), &port) == 0 &&
                (node = rc_node_add(c, host, port)) >= 0) {
                freeReplyObject(r);
                r = NULL;
                continue;
            }
        }
        break;
    }
    return r;
}

redisReply *rc_sync_command(rcluster *c, const char *route, char *err, size_t errlen,
                            const char *fmt, ...)
{
    int node = route ? rc_slot_node(c, rc_key_slot(route, strlen(route))) : 0;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = rc_sync_v(c, node, 1, err, errlen, fmt, ap);
    va_end(ap);
    return r;
}

redisReply *rc_sync_node_command(rcluster *c, int node, char *err, size_t errlen,
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = rc_sync_v(c, node, 0, err, errlen, fmt, ap);
    va_end(ap);
    return r;
}
