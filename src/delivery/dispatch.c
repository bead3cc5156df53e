/* dispatch.c -- see dispatch.h. */
#include "delivery/dispatch.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "delivery/cbtls.h"
#include "delivery/h1.h"
#include "delivery/h1_answer.h"
#include "base/log.h"
#include "delivery/netpolicy.h"
#include "base/trace.h"
#include "base/tz.h"
#include "base/util.h"
#include "delivery/webhook.h"

typedef struct worker worker;
typedef struct xfer xfer;

/* Callbacks gathered on one thread for the other: handed over when the
 * thread's loop turn ends or CBBATCH_MAX have gathered, whichever comes
 * first, so that a burst costs one lock and one wake-up per batch rather
 * than per callback, and the other side starts on the first ones early. */
#define CBBATCH_MAX 64
typedef struct cbbatch {
    callback *head, *tail;
    int n;
} cbbatch;

/* Append j; 1 when the batch is full and should go now. */
static int cbbatch_add(cbbatch *b, callback *j)
{
    j->next = NULL;
    if (b->tail) b->tail->next = j;
    else b->head = j;
    b->tail = j;
    return ++b->n >= CBBATCH_MAX;
}

/* Move b's callbacks to the end of the list *head / *tail guarded by mu; 1
 * when the list was empty (its reader must be woken: otherwise a wake-up is
 * already on its way). */
static int cbbatch_move(cbbatch *b, pthread_mutex_t *mu, callback **head, callback **tail)
{
    if (!b->head) return 0;
    pthread_mutex_lock(mu);
    int was_empty = *head == NULL;
    if (*tail) (*tail)->next = b->head;
    else *head = b->head;
    *tail = b->tail;
    pthread_mutex_unlock(mu);
    b->head = b->tail = NULL;
    b->n = 0;
    return was_empty;
}

/* The transfers of one worker to one receiving host (scheme://authority).
 * At most host_connections of them run in curl at once; the rest wait here,
 * first in first out. curl could queue them itself, but its pending list is
 * scanned on every transfer removal, which costs O(n^2) in a burst. */
typedef struct hostq {
    char *key;
    size_t keylen;
    h1_host *h1;                /* http:// without a proxy: the built-in client's */
    int active;
    int64_t used_ms;            /* monotonic: the last transfer's end */
    xfer *head, *tail;
    int64_t warm_span;          /* dispatch_warm: the span of the calls counted, */
    int warm_run;               /* and how many */
    struct hostq *next;         /* hash chain */
    struct hostq *lprev, *lnext; /* by last call, the least recent first */
} hostq;

/* hosts looked at from the least recently called on, for one to drop */
#define HOSTQ_EVICT_SCAN 64
#define EASY_SPARE 256  /* easy handles a worker keeps for reuse */
#define XFER_SPARE 4096 /* ended transfers a worker keeps for the next callbacks: a burst's worth */
#define XFER_SPARE_KEEP 256 /* what it keeps however long unused (worker_sweep_cb) */
#define XFER_HBLK_KEEP 4096 /* the largest header buffer a kept transfer keeps */

/* One transfer in a worker: the callback and what curl needs alive meanwhile. */
struct xfer {
    callback *j;
    worker *w;
    hostq *hq;
    CURL *easy;                 /* libcurl's transfer, or */
    h1_call *call;              /* the built-in client's */
    struct curl_slist *hdrs;
    const char *url;            /* built-in client: what the call needs (the spec's) */
    char method[8];
    char *hblk;                 /* the task's header lines, "Name: value\r\n" each */
    size_t hlen, hcap;
    const char *body;           /* what task_spec_body gave (body_len bytes) */
    size_t body_len;
    char *body_buf;             /* its malloc'd copy when it had to be unescaped */
    char errbuf[CURL_ERROR_SIZE];
    int64_t queued_ms;          /* monotonic: when the worker took it */
    int capped;                 /* its time is what its lease has left (end_by_ms),
                                   less than what timeout_ms has */
    int nopen, ndenied;         /* addresses tried, and refused by the policy */
    int local_errno;            /* socket() failed for this process's own reason */
    size_t got;                 /* answer body bytes (libcurl) */
    int64_t started_ms;         /* monotonic: the request began */
    char *keep;                 /* libcurl: a non-2xx body's first bytes */
    size_t kept;
    h1_answer head;             /* libcurl: its heads, judged by the built-in client's parser */
    char *ahead;                /* the answer's head being read (at most H1_HEAD_MAX bytes) */
    size_t ahead_len, ahead_cap;
    int head_done;              /* the final head has been read and taken */
    int refused;                /* a head was refused (head.err): the transfer was ended */
    int unread;                 /* ended at the final head: its body is not read */
    char denied[200];           /* why the last one was refused */
    struct xfer *next, *prev;   /* also the worker's spare list */
};

struct worker {
    dispatch *d;
    int idx;
    pthread_t th;
    struct event_base *base;
    CURLM *multi;
    struct event *timer_ev;
    struct event *wake_ev;
    pthread_mutex_t mu;         /* guards in_head/in_tail and stop */
    callback *in_head, *in_tail;
    int stop;
    int on_main;                /* runs on the main loop: no thread of its own */
    /* handed over in batches (cbbatch): out, the main thread's callbacks for
     * this worker not yet in in_head; done, this thread's finished callbacks
     * not yet in the pool's done_head */
    cbbatch out, done;
    struct event *done_ev;      /* this loop's: hands done over at the end of its turn */
    xfer *active;               /* transfers running, for abort on stop */
    hostq **hq;                 /* hash table of nhb buckets (a power of 2) */
    size_t nhb, nhosts;
    hostq *lru_head, *lru_tail; /* every hostq, the least recently called first */
    log_limit warn;
    int host_connections;
    int64_t keepalive_ms;       /* an unused connection is closed after this */
    CURL *spare[EASY_SPARE];    /* reset handles kept for the next transfers */
    int nspare;
    xfer *xspare;               /* ended transfers kept for reuse (xfer_new) */
    int nxspare;
    int xspare_low;             /* the fewest kept since the last sweep */
    h1_client *h1;              /* NULL: every callback through libcurl */
    struct event *sweep_ev;     /* frees the state of hosts no longer called */
    webhook_ctx *sig;           /* this thread's signing state */
};

struct dispatch {
    struct event_base *main_base;
    struct event *done_ev;      /* activated by the main loop's own worker, */
    int done_fd;                /* written by the threads (util_wake): either */
    struct event *done_wake_ev; /* hands done_head over to the main loop */
    struct event *out_ev;       /* the main loop's: hands the workers' batches over */
    pthread_mutex_t mu;         /* guards done_head/done_tail */
    callback *done_head, *done_tail;
    dispatch_done_fn *done;
    void *priv;
    worker *w;                  /* the threads', then the main loop's (mw) */
    int nworkers;               /* threads */
    int next;
    worker *mw;                 /* plain http:// callbacks (NULL: none, all to the threads) */
    const netpolicy *np;        /* NULL: callbacks go anywhere */
    _Atomic long hosts;         /* hostq entries across the workers */
    _Atomic long hosts_max;     /* hostq entries a worker keeps (0: no bound) */
    const webhook_keys *keys;   /* NULL: unsigned */
    const cbtls *tls;           /* libcurl's TLS and proxy settings; NULL: its defaults */
};

/* ---- main-thread side -------------------------------------------------- */

static void dispatch_done_cb(evutil_socket_t fd, short what, void *arg)
{
    dispatch *d = arg;
    callback *list;
    (void)fd, (void)what;
    pthread_mutex_lock(&d->mu);
    list = d->done_head;
    d->done_head = d->done_tail = NULL;
    pthread_mutex_unlock(&d->mu);
    while (list) {
        callback *j = list;
        list = j->next;
        j->next = NULL;
        d->done(j, d->priv);
    }
}

static void dispatch_done_wake(evutil_socket_t fd, short what, void *arg)
{
    util_wake_take(fd);
    dispatch_done_cb(fd, what, arg);
}

/* Give the main thread w's finished callbacks. A thread wakes the main loop
 * through done_fd, not event_active: the main loop's base has no lock, and
 * its own worker's calls take none. */
static void worker_done_flush(worker *w)
{
    dispatch *d = w->d;
    if (!cbbatch_move(&w->done, &d->mu, &d->done_head, &d->done_tail)) return;
    if (w->on_main) event_active(d->done_ev, EV_READ, 0);
    else util_wake(d->done_fd);
}

static void worker_done_ev(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    worker_done_flush(arg);
}

/* j is done (on w's thread): to the main loop with the rest of its batch. */
static void dispatch_finish(worker *w, callback *j)
{
    /* err may quote a receiver (a certificate's name, a libcurl message) or
     * be cut inside a character: it is stored and printed as text */
    util_text_clean(j->err, strlen(j->err));
    if (cbbatch_add(&w->done, j)) worker_done_flush(w);
    else event_active(w->done_ev, EV_READ, 0);
}

/* Give w the callbacks submitted for it. */
static void dispatch_out_flush(worker *w)
{
    if (cbbatch_move(&w->out, &w->mu, &w->in_head, &w->in_tail))
        event_active(w->wake_ev, EV_READ, 0);
}

static void dispatch_out_ev(evutil_socket_t fd, short what, void *arg)
{
    dispatch *d = arg;
    (void)fd, (void)what;
    for (int i = 0; i < d->nworkers; i++) dispatch_out_flush(&d->w[i]);
    if (d->mw) dispatch_out_flush(d->mw);
}

void dispatch_set_edge(dispatch *d, const netpolicy *np, const webhook_keys *keys)
{
    d->np = np;
    d->keys = keys;
}

/* A URL the main loop's worker takes: http://, no credentials (the rest go
 * to the threads: libcurl, TLS). */
static int dispatch_plain(const callback *j)
{
    const char *u = j->spec->url;
    if (j->spec->bad || strncasecmp(u, "http://", 7) != 0) return 0;
    size_t n = strcspn(u + 7, "/?#");
    return memchr(u + 7, '@', n) == NULL;
}

/* Callbacks due within one WARM_SPAN_MS are taken as made at once. */
#define WARM_SPAN_MS 4

static hostq *worker_hostq(worker *w, const char *url);

void dispatch_warm(dispatch *d, callback *const *cbs, int n)
{
    worker *w = d->mw;
    if (!w || !w->h1) return;
    /* per host, the calls due in its current span: they come oldest first,
     * so a span's are a run (carried on by the next batch, which may hold
     * the rest of a burst's instant); its connections grow with the run */
    for (int i = 0; i < n; i++) {
        const callback *j = cbs[i];
        if (!dispatch_plain(j)) continue;
        hostq *q = worker_hostq(w, j->spec->url);
        if (!q->h1) continue;
        int64_t span = j->due_ms / WARM_SPAN_MS;
        if (span != q->warm_span) {
            q->warm_span = span;
            q->warm_run = 0;
        }
        if (++q->warm_run <= w->host_connections) h1_host_warm(q->h1, q->warm_run - q->active);
    }
}

void dispatch_submit(dispatch *d, callback *j)
{
    worker *w;
    if (d->mw && dispatch_plain(j)) {
        w = d->mw;
    } else {
        w = &d->w[d->next];
        d->next = (d->next + 1) % d->nworkers;
    }
    if (cbbatch_add(&w->out, j)) dispatch_out_flush(w);
    else event_active(d->out_ev, EV_READ, 0);
}

/* ---- worker side ------------------------------------------------------- */

/* The answer's body is read (so the connection is reusable) and dropped, up
 * to H1_DRAIN_MAX bytes, as the built-in client does; past that the transfer
 * ends (CURLE_WRITE_ERROR, the connection closed) with its status. A body
 * that runs to the close is not read at all (dispatch_head). */
static size_t dispatch_discard(char *p, size_t size, size_t n, void *u)
{
    xfer *x = u;
    long code = x->head.status; /* the body comes after the final head */
    if ((code < 200 || code > 299) && x->kept < H1_KEEP_MAX && size * n != 0) {
        size_t k = size * n < H1_KEEP_MAX - x->kept ? size * n : H1_KEEP_MAX - x->kept;
        if (!x->keep) x->keep = xmalloc(H1_KEEP_MAX);
        memcpy(x->keep + x->kept, p, k);
        x->kept += k;
    }
    x->got += size * n;
    return x->got > H1_DRAIN_MAX ? 0 : size * n;
}

/* libcurl hands the answer's head over line by line, interim heads too (and
 * then a chunked body's trailer lines). Each head, once whole, is judged by
 * the built-in client's parser (h1_answer.c), so that both clients take and
 * refuse the same heads: the status line, the Content-Length, the size (a
 * head past H1_HEAD_MAX is refused once that much has come), a 101. A head
 * refused ends the transfer at once (x->refused, the reason in x->head.err). */
static size_t dispatch_head(char *p, size_t size, size_t n, void *u)
{
    xfer *x = u;
    size_t len = size * n, used = 0;
    if (x->head_done) return len;
    size_t take = len < H1_HEAD_MAX - x->ahead_len ? len : H1_HEAD_MAX - x->ahead_len;
    if (x->ahead_len + take > x->ahead_cap) {
        x->ahead_cap = x->ahead_len + take < 1024 ? 1024 : (x->ahead_len + take) * 2;
        if (x->ahead_cap > H1_HEAD_MAX) x->ahead_cap = H1_HEAD_MAX;
        x->ahead = xrealloc(x->ahead, x->ahead_cap);
    }
    memcpy(x->ahead + x->ahead_len, p, take);
    x->ahead_len += take;
    /* parsed when a head may have ended (an empty line) or has grown too long:
     * not at every line, which would cost the square of its lines */
    int empty = (len == 1 && p[0] == '\n') || (len == 2 && p[0] == '\r' && p[1] == '\n');
    if (!empty && x->ahead_len < H1_HEAD_MAX) return len;
    if (h1_answer_parse(&x->head, x->ahead, x->ahead_len, &used) < 0) {
        x->refused = 1;
        return 0;
    }
    memmove(x->ahead, x->ahead + used, x->ahead_len - used);
    x->ahead_len -= used;
    x->head_done = x->head.phase != PH_HEAD;
    /* complete at its head, the connection to close: a body with no length
     * or over H1_DRAIN_MAX is not read, by either client */
    if (x->head_done && x->head.phase == PH_DONE && x->head.close) {
        x->unread = 1;
        return 0;
    }
    return len;
}

/* errno of a failed connect that is this process's own trouble */
static int dispatch_errno_local(int e)
{
    return e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS || e == EADDRNOTAVAIL;
}

/* A kept transfer's text buffers, in the order they lie (each written
 * whole before it is read; util_zero_but aborts on any other order): a
 * burst queues thousands of transfers, and most never write an error. */
static const util_span xfer_text[] = {UTIL_SPAN(xfer, errbuf), UTIL_SPAN(xfer, head.err),
                                      UTIL_SPAN(xfer, denied)};

/* A transfer of w's made new (xfer_text): a kept one (its header buffer kept)
 * or a new one. */
static xfer *xfer_new(worker *w)
{
    xfer *x = w->xspare;
    if (!x) {
        x = xcalloc(1, sizeof(*x));
    } else {
        char *hblk = x->hblk;
        size_t hcap = x->hcap;
        w->xspare = x->next;
        if (--w->nxspare < w->xspare_low) w->xspare_low = w->nxspare;
        util_zero_but(x, sizeof(*x), xfer_text, sizeof(xfer_text) / sizeof(xfer_text[0]));
        x->hblk = hblk;
        x->hcap = hcap;
    }
    x->w = w;
    return x;
}

/* Let n of w's kept transfers go (fewer when it keeps fewer). */
static void xspare_drop(worker *w, int n)
{
    for (; n > 0 && w->xspare; n--) {
        xfer *x = w->xspare;
        w->xspare = x->next;
        w->nxspare--;
        free(x->hblk);
        free(x);
    }
}

static void xfer_free(xfer *x)
{
    worker *w = x->w;
    /* keep the handle, its fixed options set (xfer_easy): the next transfer
     * sets only its own (xfer_build) */
    if (x->easy && w && w->nspare < EASY_SPARE) {
        w->spare[w->nspare++] = x->easy;
    } else if (x->easy) {
        curl_easy_cleanup(x->easy);
    }
    curl_slist_free_all(x->hdrs);
    free(x->keep);
    free(x->ahead);
    free(x->head.keep);
    free(x->body_buf);
    x->body_buf = NULL;
    x->body = NULL;
    x->body_len = 0;
    if (w && w->nxspare < XFER_SPARE && x->hcap <= XFER_HBLK_KEEP) {
        x->next = w->xspare;
        w->xspare = x;
        w->nxspare++;
        return;
    }
    free(x->hblk);
    free(x);
}

static void worker_h1_done(void *priv, long status, const char *err, int flags, char *body,
                           size_t body_len, int64_t retry_after_ms);


int callback_expire(callback *j, int64_t now_ms)
{
    int64_t expires_ms = j->spec->expires_ms;
    if (j->event[0] || expires_ms <= 0 || now_ms < expires_ms) return 0;
    char at[TZ_RFC3339_MAX], why[256];
    tz_rfc3339(tz_get("UTC", why), expires_ms, at);
    j->expired = 1;
    snprintf(j->err, sizeof(j->err), "expired: its expires_at %s passed before attempt %d could "
             "begin", at, j->attempt);
    return 1;
}

static void xfer_build(xfer *x);

int callback_too_late(callback *j, int64_t now_ms)
{
    if (j->end_by_ms <= 0 || now_ms < j->end_by_ms) return 0;
    j->late = 1;
    snprintf(j->err, sizeof(j->err), "not begun: reached after its lease had (nearly) ended; it "
             "is called again once the lease is over");
    return 1;
}

/* What x's attempt may still take at now (monotonic): the rest of timeout_ms,
 * counted from when the worker took it, and no more than its lease has left
 * (capped: the lease's is the shorter). <= 0: nothing. */
static int64_t xfer_time_left(xfer *x, int64_t now)
{
    int64_t left = x->j->spec->timeout_ms - (now - x->queued_ms);
    x->capped = 0;
    if (x->j->end_by_ms > 0) {
        int64_t lease = x->j->end_by_ms - (now + x->j->clock_offset_ms);
        if (lease < left) {
            left = lease;
            x->capped = 1;
        }
    }
    return left;
}

/* Start x (in curl or the built-in client), or queue it behind its host's
 * busy connections. The task's timeout_ms covers the whole attempt, the wait
 * for a connection included, and the attempt ends before its lease does
 * (end_by_ms): one begun late (its owner fell behind between the claim and
 * the due, or it waited for a connection) is given what its lease has left,
 * and none is begun, or recorded, once that is nothing. Past the
 * lease the task is claimed again: an attempt still running then would be a
 * second call at once, and a record written then could end the other's.
 * The request is built here, when a connection takes it,
 * not when it queues: a burst's thousands of callbacks queued behind a
 * host's connections would otherwise be built all at once, before the first
 * goes out, and each be sent long after, out of the cache (and signed with
 * the time it queued, not the time it was sent). */
static void worker_start(worker *w, xfer *x)
{
    if (x->hq->active >= w->host_connections) {
        x->next = NULL;
        if (x->hq->tail) x->hq->tail->next = x;
        else x->hq->head = x;
        x->hq->tail = x;
        return;
    }
    /* a transfer that waited for a connection: past its lease (first:
     * nothing about it may be recorded then) or its expiry, not begun */
    int64_t now = util_mono_ms();
    if (callback_too_late(x->j, now + x->j->clock_offset_ms) ||
        callback_expire(x->j, now + x->j->clock_offset_ms)) {
        callback *j = x->j;
        xfer_free(x);
        dispatch_finish(w, j);
        return;
    }
    int64_t left = xfer_time_left(x, now);
    if (left <= 0) {
        callback *j = x->j;
        snprintf(j->err, sizeof(j->err),
                 "timeout: no connection to the host was free within timeout_ms");
        xfer_free(x);
        dispatch_finish(w, j);
        return;
    }
    /* the attempt (its time, its share of timeout_ms) begins once its
     * request is built */
    xfer_build(x);
    now = util_mono_ms();
    left = xfer_time_left(x, now);
    if (left <= 0) left = 1;
    x->hq->active++;
    x->started_ms = now;
    x->j->sent_at_ms = util_realtime_ms();
    x->j->retry_after_ms = -1;
    x->prev = NULL;
    x->next = w->active;
    if (w->active) w->active->prev = x;
    w->active = x;
    if (!x->easy) {
        int get = strcmp(x->method, "GET") == 0;
        x->call = h1_call_start(x->hq->h1, x->method, x->url, x->hblk ? x->hblk : "", x->hlen,
                                get ? NULL : x->body, get ? 0 : x->body_len, left,
                                worker_h1_done, x);
        return;
    }
    curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)left);
    if (left < 10000) curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)left);
    curl_multi_add_handle(w->multi, x->easy);
}

static void hostq_unlink(worker *w, hostq *q)
{
    if (q->lprev) q->lprev->lnext = q->lnext;
    else w->lru_head = q->lnext;
    if (q->lnext) q->lnext->lprev = q->lprev;
    else w->lru_tail = q->lprev;
    q->lprev = q->lnext = NULL;
}

static void hostq_append(worker *w, hostq *q)
{
    q->lprev = w->lru_tail;
    if (w->lru_tail) w->lru_tail->lnext = q;
    else w->lru_head = q;
    w->lru_tail = q;
}

static hostq **hostq_bucket(worker *w, const char *key, size_t n)
{
    return &w->hq[util_fnv1a(key, n) & (w->nhb - 1)];
}

/* one bucket a host at most: lookups stay O(1) whatever their number */
static void hostq_grow(worker *w)
{
    hostq **old = w->hq;
    size_t nold = w->nhb;
    w->nhb = nold ? nold * 2 : 256;
    w->hq = xcalloc(w->nhb, sizeof(*w->hq));
    for (size_t i = 0; i < nold; i++)
        for (hostq *q = old[i], *qn; q; q = qn) {
            qn = q->next;
            hostq **b = hostq_bucket(w, q->key, strlen(q->key));
            q->next = *b;
            *b = q;
        }
    free(old);
}

static void hostq_free(worker *w, hostq *q)
{
    for (hostq **p = hostq_bucket(w, q->key, strlen(q->key)); *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    hostq_unlink(w, q);
    h1_host_free(q->h1);
    free(q->key);
    free(q);
    w->nhosts--;
    w->d->hosts--;
}

/* Past hosts_max, the least recently called host with nothing running or
 * waiting goes (its kept connections closed): callbacks to ever new hosts
 * cannot grow this state without bound. */
static void hostq_evict(worker *w)
{
    long max = w->d->hosts_max;
    if (!max || (long)w->nhosts < max) return;
    hostq *q = w->lru_head;
    for (int i = 0; q && i < HOSTQ_EVICT_SCAN && (q->active || q->head); i++) q = q->lnext;
    log_warn_limited(&w->warn, util_mono_ms(),
                     "callbacks to more than %ld receiving hosts (hosts_max) in one worker: %s",
                     max, q && !q->active && !q->head ? "the least recently called is forgotten"
                                                       : "all of the oldest are busy, kept");
    if (q && !q->active && !q->head) hostq_free(w, q);
}

/* The queue of the host of url: scheme and authority, up to the path. */
static hostq *worker_hostq(worker *w, const char *url)
{
    /* the host called last, as a burst's calls mostly are: url is its key
     * followed by the end of the authority (strchr finds the NUL too) */
    hostq *last = w->lru_tail;
    if (last && strncmp(url, last->key, last->keylen) == 0 && strchr("/?#", url[last->keylen]))
        return last;
    const char *p = strstr(url, "://");
    size_t n = p ? (size_t)(p + 3 - url) + strcspn(p + 3, "/?#") : strlen(url);
    if (w->nhb) {
        for (hostq *q = *hostq_bucket(w, url, n); q; q = q->next)
            if (q->keylen == n && memcmp(q->key, url, n) == 0) {
                hostq_unlink(w, q);
                hostq_append(w, q);
                return q;
            }
    }
    hostq_evict(w);
    if (w->nhosts >= w->nhb) hostq_grow(w);
    hostq *q = xcalloc(1, sizeof(*q));
    q->key = xstrndup(url, n);
    q->keylen = n;
    q->h1 = h1_host_new(w->h1, url);
    q->used_ms = util_mono_ms();
    hostq **b = hostq_bucket(w, url, n);
    q->next = *b;
    *b = q;
    hostq_append(w, q);
    w->nhosts++;
    w->d->hosts++;
    return q;
}

/* Free the state of hosts unused for keepalive_ms (their kept connections
 * have closed by then), so that callbacks to ever new hosts cost no memory
 * for ever. Runs every keepalive_ms / 2, from the least recently called on,
 * up to the first called within keepalive_ms. */
static void worker_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    worker *w = arg;
    int64_t now = util_mono_ms();
    (void)fd, (void)what;
    /* the kept transfers no callback took since the last sweep (the fewest
     * kept meanwhile, never above those kept now), past XFER_SPARE_KEEP */
    xspare_drop(w, w->xspare_low - XFER_SPARE_KEEP);
    w->xspare_low = w->nxspare;
    for (hostq *q = w->lru_head, *qn; q; q = qn) {
        qn = q->lnext;
        if (now - q->used_ms < w->keepalive_ms && !q->active) break;
        if (q->active || q->head || now - q->used_ms < w->keepalive_ms || h1_host_busy(q->h1))
            continue;
        hostq_free(w, q);
    }
}

void dispatch_set_hosts_max(dispatch *d, long hosts_max)
{
    d->hosts_max = hosts_max;
}

long dispatch_hosts(const dispatch *d)
{
    return d->hosts;
}

long dispatch_kept(const dispatch *d)
{
    return d->mw ? d->mw->nxspare : 0;
}

uint64_t dispatch_naps(const dispatch *d)
{
    return d->mw ? h1_client_naps(d->mw->h1) : 0;
}

/* x's attempt ended: the answer's status (0: none), or err when it failed
 * (an answer may have begun: status then says which); flags: H1_LOCAL,
 * H1_TIMEOUT, for either client. */
static void worker_end(worker *w, xfer *x, long status, const char *err, int flags)
{
    callback *j = x->j;
    j->status_code = status;
    int64_t now = util_mono_ms();
    j->took_ms = now - x->started_ms;
    if (x->keep && !j->answer) {
        /* the receiver's bytes go into JSON: text, with no NUL */
        util_text_clean(x->keep, x->kept);
        j->answer = x->keep;
        j->answer_len = x->kept;
        x->keep = NULL;
    }
    /* every address refused by the policy: no retry can change that */
    if (err && x->ndenied && x->ndenied == x->nopen) j->permanent = 1;
    if (err && !status && (flags & H1_LOCAL)) j->uncounted = 1;
    j->timed_out = err && (flags & H1_TIMEOUT);
    /* its time was what its lease had left: said so (a failed attempt, as
     * any timeout; a record of it made later could end another claim's) */
    char cut[160];
    if (j->timed_out && !status && x->capped) {
        snprintf(cut, sizeof(cut), "timeout: cut at its lease's end after %lld ms (begun late, "
                 "with less than timeout_ms left)", (long long)j->took_ms);
        err = cut;
    }
    /* a status with err: the head came, its body was cut off; the receiver
     * has answered, and its status decides */
    if (err) snprintf(j->err, sizeof(j->err), "%s", err);
    if (status >= 200 && status < 300) j->ok = 1;
    else if (status && !err) snprintf(j->err, sizeof(j->err), "HTTP %ld", status);
    if (x->prev) x->prev->next = x->next;
    else w->active = x->next;
    if (x->next) x->next->prev = x->prev;
    if (x->easy) curl_multi_remove_handle(w->multi, x->easy);
    hostq *hq = x->hq;
    xfer_free(x);
    dispatch_finish(w, j);
    hq->active--;
    hq->used_ms = now;
    /* the next queued transfer (several, if some had run out of time) */
    while (hq->head && hq->active < w->host_connections) {
        xfer *next = hq->head;
        hq->head = next->next;
        if (!hq->head) hq->tail = NULL;
        worker_start(w, next);
    }
}

/* libcurl's failures that say the answer is malformed (a head or a chunk it
 * refuses), not that it was cut short */
static int xfer_malformed(CURLcode rc, const char *errbuf)
{
    return rc == CURLE_WEIRD_SERVER_REPLY || rc == CURLE_UNSUPPORTED_PROTOCOL ||
           rc == CURLE_BAD_CONTENT_ENCODING ||
           (rc == CURLE_RECV_ERROR && strstr(errbuf, "chunked-encoding"));
}

/* A libcurl transfer ended: its outcome told as the built-in client tells
 * its own (h1.h), so that the record is the same whichever client called. */
static void worker_complete(worker *w, xfer *x, CURLcode rc)
{
    /* the final head's status, as the parser read it (0: none whole) */
    long code = x->head_done ? x->head.status : 0;
    char err[sizeof(x->j->err)];
    int local = 0, failed = rc != CURLE_OK;
    /* the Retry-After the parser read (+ 1, 0: none), as the built-in client
     * takes it: one reading of it for both clients */
    if (x->head_done && x->head.retry_after_ms > 0) x->j->retry_after_ms = x->head.retry_after_ms - 1;
    if (rc == CURLE_WRITE_ERROR && code && (x->unread || x->got > H1_DRAIN_MAX)) {
        failed = 0; /* a body not read, or not read on: the status stands */
    } else if (failed && x->ndenied && x->ndenied == x->nopen) {
        util_copy(err, sizeof(err), x->denied);
        code = 0;
    } else if (x->refused) {
        util_copy(err, sizeof(err), x->head.err);
        code = 0;
    } else if (!failed && !x->head_done) {
        /* libcurl takes a head cut short by the connection's end as whole */
        snprintf(err, sizeof(err), "connection closed before the answer's head ended");
        failed = 1;
    } else if (code && (rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_PARTIAL_FILE ||
                        (rc == CURLE_RECV_ERROR && !xfer_malformed(rc, x->errbuf)))) {
        /* the head came, the body was cut short: the status stands */
        if (rc == CURLE_OPERATION_TIMEDOUT)
            snprintf(err, sizeof(err), H1_CUT_TIMEOUT, code, (long long)x->j->spec->timeout_ms);
        else
            snprintf(err, sizeof(err), H1_CUT_CLOSED, code);
    } else if (failed && xfer_malformed(rc, x->errbuf)) {
        const char *why = x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc);
        /* nothing of a head handed over: libcurl refused its status line */
        if (!x->ahead_len && !x->head.status)
            snprintf(err, sizeof(err), "malformed answer: bad status line (%s)", why);
        else
            snprintf(err, sizeof(err), "malformed answer: %s", why);
        code = 0;
    } else if (failed) {
        code = 0;
        local = rc == CURLE_OUT_OF_MEMORY ||
                (x->local_errno && (rc == CURLE_COULDNT_CONNECT || rc == CURLE_FAILED_INIT));
        if (x->local_errno && !x->errbuf[0])
            util_copy(x->errbuf, sizeof(x->errbuf), strerror(x->local_errno));
        char full[CURL_ERROR_SIZE + 320];
        cbtls_describe(w->d->tls, x->easy, rc, x->errbuf, full, sizeof(full));
        size_t fl = strlen(full);
        if (fl >= sizeof(err)) { /* cut at a word, never mid-word */
            fl = sizeof(err) - 4;
            while (fl > sizeof(err) / 2 && full[fl] != ' ') fl--;
            memcpy(full + fl, "...", 4);
        }
        memcpy(err, full, strlen(full) + 1);
    }
    worker_end(w, x, code, failed ? err : NULL,
               (local ? H1_LOCAL : 0) |
               (rc == CURLE_OPERATION_TIMEDOUT && !x->refused ? H1_TIMEOUT : 0));
}

static void worker_h1_done(void *priv, long status, const char *err, int flags, char *body,
                           size_t body_len, int64_t retry_after_ms)
{
    xfer *x = priv;
    x->call = NULL;
    x->j->retry_after_ms = retry_after_ms;
    x->keep = body;
    x->kept = body_len;
    worker_end(x->w, x, status, err, flags);
}

static void worker_check(worker *w)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(w->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        xfer *x;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        worker_complete(w, x, m->data.result);
    }
}

static void worker_sock_ev(evutil_socket_t fd, short kind, void *arg)
{
    worker *w = arg;
    int running;
    int action = ((kind & EV_READ) ? CURL_CSELECT_IN : 0) | ((kind & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    curl_multi_socket_action(w->multi, fd, action, &running);
    /* curl keeps its timer through worker_timer_cb; completions may start
     * queued transfers, whose timer must stay armed */
    worker_check(w);
}

static void worker_timer_ev(evutil_socket_t fd, short kind, void *arg)
{
    worker *w = arg;
    int running;
    (void)fd, (void)kind;
    curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    worker_check(w);
}

static int worker_sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    worker *w = userp;
    struct event *ev = socketp;
    (void)e;
    if (what == CURL_POLL_REMOVE) {
        if (ev) event_free(ev);
        curl_multi_assign(w->multi, s, NULL);
        return 0;
    }
    short kind = (short)(((what & CURL_POLL_IN) ? EV_READ : 0) |
                         ((what & CURL_POLL_OUT) ? EV_WRITE : 0) | EV_PERSIST);
    if (ev) {
        event_del(ev);
        event_assign(ev, w->base, s, kind, worker_sock_ev, w);
    } else {
        ev = event_new(w->base, s, kind, worker_sock_ev, w);
        if (!ev) return -1;
        curl_multi_assign(w->multi, s, ev);
    }
    event_add(ev, NULL);
    return 0;
}

static int worker_timer_cb(CURLM *m, long timeout_ms, void *userp)
{
    worker *w = userp;
    (void)m;
    if (timeout_ms < 0) {
        evtimer_del(w->timer_ev);
    } else {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        evtimer_add(w->timer_ev, &tv);
    }
    return 0;
}

/* The policy's verdict on an address a transfer is about to connect to. */
static int xfer_allowed(xfer *x, const struct sockaddr *sa)
{
    const netpolicy *np = x->w->d->np;
    char why[160];
    x->nopen++;
    if (!np || netpolicy_check(np, sa, why, sizeof(why)) == 0) return 1;
    x->ndenied++;
    snprintf(x->denied, sizeof(x->denied), NETPOLICY_DENIED ": %s", why);
    return 0;
}

static int worker_h1_guard(void *client_priv, void *call_priv, const struct sockaddr *sa,
                           char *why, size_t whylen)
{
    xfer *x = call_priv;
    if (!x) {
        /* a connection opened ahead: the same policy, nothing to record */
        const netpolicy *np = ((worker *)client_priv)->d->np;
        return !np || netpolicy_check(np, sa, why, whylen) == 0 ? 0 : -1;
    }
    if (xfer_allowed(x, sa)) return 0;
    util_copy(why, whylen, x->denied);
    return -1;
}

/* libcurl's connect, through the policy (the address after DNS, so a name
 * re-pointed between POST and the callback cannot pass) */
static curl_socket_t xfer_opensocket(void *clientp, curlsocktype purpose,
                                     struct curl_sockaddr *a)
{
    xfer *x = clientp;
    if (purpose != CURLSOCKTYPE_IPCXN || !xfer_allowed(x, &a->addr)) return CURL_SOCKET_BAD;
    curl_socket_t fd = socket(a->family, a->socktype, a->protocol);
    if (fd == CURL_SOCKET_BAD && dispatch_errno_local(errno)) x->local_errno = errno;
    return fd;
}

/* One header line of the request: "name: value\r\n". */
static void xfer_header(xfer *x, const char *name, const char *value)
{
    size_t nn = strlen(name), nv = strlen(value), need = x->hlen + nn + nv + 5;
    if (need > x->hcap) {
        x->hcap = need * 2 < 512 ? 512 : need * 2;
        x->hblk = xrealloc(x->hblk, x->hcap);
    }
    char *p = x->hblk + x->hlen;
    memcpy(p, name, nn);
    memcpy(p + nn, ": ", 2);
    memcpy(p + nn + 2, value, nv);
    memcpy(p + nn + 2 + nv, "\r\n", 3);
    x->hlen = need - 1;
}

static void xfer_header_int(xfer *x, const char *name, long long v)
{
    char buf[UTIL_INT_MAX];
    util_fmt_int(buf, v);
    xfer_header(x, name, buf);
}

/* The header lines as libcurl's list (what it adds itself, "Name:" removes). */
static struct curl_slist *xfer_curl_headers(const xfer *x)
{
    struct curl_slist *l = NULL;
    for (size_t at = 0; at < x->hlen;) {
        const char *eol = strstr(x->hblk + at, "\r\n");
        char *line = xstrndup(x->hblk + at, (size_t)(eol - (x->hblk + at)));
        struct curl_slist *n = curl_slist_append(l, line);
        free(line);
        log_assert(n);
        l = n;
        at = (size_t)(eol + 2 - x->hblk);
    }
    return l;
}

/* A new easy handle with the options every transfer shares; a handle kept
 * for reuse keeps them. */
static CURL *xfer_easy(const worker *w)
{
    CURL *e = curl_easy_init();
    log_assert(e);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, dispatch_discard);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, dispatch_head);
    /* the answers both clients read alike: HTTP/1.1 (a receiver's "HTTP/2"
     * status line is refused, not taken for a connection to multiplex on),
     * no content coding undone (a Transfer-Encoding of gzip, chunked is
     * de-chunked only), and no CONNECT answer of a proxy among the heads */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_HTTP_CONTENT_DECODING, 0L);
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "tickd/1");
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, (long)((w->keepalive_ms + 999) / 1000));
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, xfer_opensocket);
    cbtls_easy(w->d->tls, e);
    return e;
}

/* Build the request of a callback from its spec (read once by its owner:
 * task_spec.h; one that cannot be used never gets here: worker_wake_cb). */
static void xfer_build(xfer *x)
{
    callback *j = x->j;
    const task_spec *spec = j->spec;
    int has_ctype = 0;
    cJSON *hdr = NULL;

    const char *url = spec->url, *m = spec->method;
    if (spec->header.n) hdr = cJSON_ParseWithLength(spec->header.p, spec->header.n);
    for (const cJSON *h = hdr ? hdr->child : NULL; h; h = h->next) {
        if (!cJSON_IsString(h)) continue;
        if (strcasecmp(h->string, "Content-Type") == 0) has_ctype = 1;
        xfer_header(x, h->string, h->valuestring);
    }
    cJSON_Delete(hdr);
    xfer_header(x, "tickd-task-id", j->id);
    xfer_header_int(x, "tickd-attempt", j->attempt);
    xfer_header_int(x, "tickd-scheduled-at", j->due_ms);
    char tp[TRACE_PARENT_LEN + 2]; /* one more: a longer one is none */
    task_span_word(spec->traceparent, tp, sizeof(tp));
    if (strlen(tp) == TRACE_PARENT_LEN) {
        /* the producer's trace, a span of this attempt's own (trace.h) */
        char out[TRACE_PARENT_LEN + 1];
        char *ts = task_span_string(spec->tracestate);
        trace_for_attempt(tp, j->id, j->attempt, j->due_ms, out);
        xfer_header(x, "traceparent", out);
        if (ts) xfer_header(x, "tracestate", ts);
        free(ts);
    }
    if (j->event[0]) xfer_header(x, "tickd-event", j->event);
    int get = strcmp(m, "GET") == 0, json = 0;
    size_t body_len = 0;
    if (!get) {
        x->body = task_spec_body(spec, &body_len, &json, &x->body_buf);
        x->body_len = body_len;
        if (json && !has_ctype) xfer_header(x, "Content-Type", "application/json");
    }
    const webhook_keys *keys = x->w->d->keys;
    if (keys) {
        /* Standard Webhooks: the id is the task's (one per task, for the
         * receiver's de-duplication), the time this attempt's */
        char sig[WEBHOOK_SIG_MAX], msg[TASK_ID_MAX + sizeof(j->event) + 1];
        int64_t ts = (int64_t)time(NULL);
        /* an event about the task is a message of its own */
        snprintf(msg, sizeof(msg), "%s%s%s", j->id, j->event[0] ? TASK_EVENT_SEP : "", j->event);
        if (!x->w->sig) x->w->sig = webhook_ctx_new();
        webhook_sign(keys, x->w->sig, msg, ts, x->body ? x->body : "", x->body ? x->body_len : 0,
                     sig);
        xfer_header(x, "webhook-id", msg);
        xfer_header_int(x, "webhook-timestamp", ts);
        xfer_header(x, "webhook-signature", sig);
    }
    if (x->hq->h1) {
        /* the built-in client: worker_start makes the request */
        x->url = url;
        util_copy(x->method, sizeof(x->method), m);
        return;
    }

    x->easy = x->w->nspare ? x->w->spare[--x->w->nspare] : xfer_easy(x->w);
    CURL *e = x->easy;
    /* first: a kept handle's buffer was its last transfer's */
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_URL, url);
    cbtls_host(x->w->d->tls, e, url);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L); /* both lowered by worker_start */
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
    x->hdrs = xfer_curl_headers(x);
    x->hdrs = curl_slist_append(x->hdrs, "Expect:");
    log_assert(x->hdrs);
    if (get) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL); /* a reused handle's last body */
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
    } else {
        /* curl would say x-www-form-urlencoded: the task said nothing */
        if (!has_ctype && !json) {
            x->hdrs = curl_slist_append(x->hdrs, "Content-Type:");
            log_assert(x->hdrs);
        }
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, strcmp(m, "POST") != 0 ? m : NULL);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
}

static void worker_wake_cb(evutil_socket_t fd, short what, void *arg)
{
    worker *w = arg;
    callback *list;
    int stop;
    (void)fd, (void)what;
    pthread_mutex_lock(&w->mu);
    list = w->in_head;
    w->in_head = w->in_tail = NULL;
    stop = w->stop;
    pthread_mutex_unlock(&w->mu);
    while (list) {
        callback *j = list;
        list = j->next;
        xfer *x = xfer_new(w);
        x->j = j;
        j->ok = 0;
        j->aborted = 0;
        j->permanent = 0;
        j->uncounted = 0;
        j->timed_out = 0;
        j->late = 0;
        j->status_code = 0;
        j->err[0] = '\0';
        if (stop) {
            j->aborted = 1;
            xfer_free(x);
            dispatch_finish(w, j);
            continue;
        }
        if (j->spec->bad) {
            util_copy(j->err, sizeof(j->err), j->spec->bad);
            xfer_free(x);
            dispatch_finish(w, j);
            continue;
        }
        x->hq = worker_hostq(w, j->spec->url);
        x->queued_ms = util_mono_ms();
        worker_start(w, x);
    }
    if (stop && !w->on_main) event_base_loopbreak(w->base);
}

static void worker_abort(worker *w, xfer *x)
{
    x->j->aborted = 1;
    snprintf(x->j->err, sizeof(x->j->err), "tickd stopped before the answer");
    dispatch_finish(w, x->j);
    xfer_free(x);
}

/* The loop has stopped (or w never had one of its own): abort what runs,
 * then what waits for a connection, and hand them back. */
static void worker_stop(worker *w)
{
    while (w->active) {
        xfer *x = w->active;
        w->active = x->next;
        if (x->easy) curl_multi_remove_handle(w->multi, x->easy);
        h1_call_abort(x->call);
        worker_abort(w, x);
    }
    while (w->lru_head) {
        hostq *q = w->lru_head;
        for (xfer *x = q->head, *xn; x; x = xn) {
            xn = x->next;
            worker_abort(w, x);
        }
        hostq_free(w, q);
    }
    free(w->hq);
    w->hq = NULL;
    event_free(w->sweep_ev);
    w->sweep_ev = NULL;
    /* a thread's own loop runs once more in it (on that thread); the main
     * loop runs on by itself */
    h1_client_free(w->h1);
    w->h1 = NULL;
    worker_done_flush(w); /* what the loop would have handed over */
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    event_base_dispatch(w->base);
    worker_stop(w);
    return NULL;
}

/* A proxy for http:// set in the environment, as libcurl reads it. */
static int dispatch_proxied(void)
{
    static const char *vars[] = {"http_proxy", "all_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

/* Set up w on base (a loop of its own, or the main loop: on_main); -1 when
 * it cannot be (worker_fini frees what was made). */
static int worker_init(dispatch *d, worker *w, int idx, struct event_base *base, int on_main,
                       int host_connections, int64_t keepalive_ms, const cbtls *tls)
{
    w->d = d;
    w->idx = idx;
    w->on_main = on_main;
    w->host_connections = host_connections;
    w->keepalive_ms = keepalive_ms;
    pthread_mutex_init(&w->mu, NULL);
    w->base = base;
    w->multi = curl_multi_init();
    if (!w->base || !w->multi) return -1;
    /* with a proxy configured, libcurl makes every callback (it applies
     * the proxy and no_proxy rules) */
    if (!dispatch_proxied() && !cbtls_proxied(tls))
        w->h1 = h1_client_new(w->base, keepalive_ms, on_main);
    h1_client_set_guard(w->h1, worker_h1_guard, w);
    w->timer_ev = evtimer_new(w->base, worker_timer_ev, w);
    w->wake_ev = event_new(w->base, -1, EV_READ | EV_PERSIST, worker_wake_cb, w);
    event_add(w->wake_ev, NULL);
    w->done_ev = event_new(w->base, -1, EV_READ | EV_PERSIST, worker_done_ev, w);
    event_add(w->done_ev, NULL);
    w->sweep_ev = event_new(w->base, -1, EV_PERSIST, worker_sweep_cb, w);
    struct timeval sweep = {(time_t)(keepalive_ms / 2000), (suseconds_t)(keepalive_ms / 2 % 1000) * 1000};
    event_add(w->sweep_ev, &sweep);
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, worker_sock_cb);
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, worker_timer_cb);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
    curl_multi_setopt(w->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)host_connections);
    curl_multi_setopt(w->multi, CURLMOPT_MAXCONNECTS, (long)host_connections * 8);
    return 0;
}

/* Free what worker_init made (w's thread, if any, has ended). */
static void worker_fini(worker *w)
{
    if (w->sweep_ev) event_free(w->sweep_ev);
    if (w->timer_ev) event_free(w->timer_ev);
    if (w->wake_ev) event_free(w->wake_ev);
    if (w->done_ev) event_free(w->done_ev);
    while (w->nspare) curl_easy_cleanup(w->spare[--w->nspare]);
    xspare_drop(w, w->nxspare);
    h1_client_free(w->h1);
    webhook_ctx_free(w->sig);
    if (w->multi) curl_multi_cleanup(w->multi);
    if (w->base && !w->on_main) event_base_free(w->base);
    pthread_mutex_destroy(&w->mu);
}

dispatch *dispatch_create(struct event_base *main_base, int workers, int host_connections,
                          int64_t keepalive_ms, const cbtls *tls,
                          dispatch_done_fn *done, void *priv, char *err, size_t errlen)
{
    dispatch *d = xcalloc(1, sizeof(*d));
    d->main_base = main_base;
    d->tls = tls;
    d->done = done;
    d->priv = priv;
    pthread_mutex_init(&d->mu, NULL);
    d->done_ev = event_new(main_base, -1, EV_READ | EV_PERSIST, dispatch_done_cb, d);
    d->out_ev = event_new(main_base, -1, EV_READ | EV_PERSIST, dispatch_out_ev, d);
    d->done_fd = util_wake_fd();
    d->done_wake_ev = d->done_fd < 0 ? NULL
                                     : event_new(main_base, d->done_fd, EV_READ | EV_PERSIST,
                                                 dispatch_done_wake, d);
    if (!d->done_ev || !d->out_ev || !d->done_wake_ev) {
        snprintf(err, errlen, "dispatch: cannot create its events: %s",
                 d->done_fd < 0 ? strerror(errno) : "out of memory");
        dispatch_free(d);
        return NULL;
    }
    /* the threads, then the main loop's worker after them */
    d->w = xcalloc((size_t)workers + 1, sizeof(worker));
    for (int i = 0; i < workers; i++) {
        worker *w = &d->w[i];
        /* curl moves a socket between read and write interest several times
         * a transfer: with the changelist each move costs no epoll_ctl until
         * the loop polls, and a delete and re-add of one fd collapse */
        struct event_config *cfg = event_config_new();
        if (cfg) event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
        struct event_base *base = cfg ? event_base_new_with_config(cfg) : NULL;
        if (cfg) event_config_free(cfg);
        if (worker_init(d, w, i, base, 0, host_connections, keepalive_ms, tls) != 0) {
            snprintf(err, errlen, "dispatch: cannot create worker %d", i);
            worker_fini(w);
            dispatch_free(d);
            return NULL;
        }
        if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
            snprintf(err, errlen, "dispatch: cannot start worker thread %d", i);
            worker_fini(w);
            dispatch_free(d);
            return NULL;
        }
        d->nworkers = i + 1;
    }
    /* plain http:// callbacks are made on the main loop by the built-in
     * client: no thread hop (a lock and a wake-up each way, a thread waking
     * up for each), and a slow receiver holds only its own calls there too.
     * It keeps as many connections to a host as the threads would have
     * together. The threads make the others (libcurl: TLS, proxies). */
    worker *m = &d->w[workers];
    if (!dispatch_proxied() && !cbtls_proxied(tls)) {
        int conns = workers * host_connections;
        if (worker_init(d, m, workers, main_base, 1, conns, keepalive_ms, tls) == 0 && m->h1)
            d->mw = m;
        else
            worker_fini(m);
    }
    event_add(d->done_ev, NULL);
    event_add(d->out_ev, NULL);
    event_add(d->done_wake_ev, NULL);
    return d;
}

void dispatch_free(dispatch *d)
{
    if (!d) return;
    dispatch_out_ev(-1, 0, d); /* callbacks submitted this turn: aborted by the workers */
    for (int i = 0; i < d->nworkers; i++) {
        worker *w = &d->w[i];
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_mutex_unlock(&w->mu);
        event_active(w->wake_ev, EV_READ, 0);
    }
    if (d->mw) worker_stop(d->mw);
    for (int i = 0; i < d->nworkers + (d->mw != NULL); i++) {
        worker *w = &d->w[i];
        if (!w->on_main) pthread_join(w->th, NULL);
        /* callbacks handed over and not taken (the thread has ended: its
         * batch is this thread's now) */
        for (callback *j = w->in_head, *n; j; j = n) {
            n = j->next;
            j->aborted = 1;
            dispatch_finish(w, j);
        }
        worker_done_flush(w);
        worker_fini(w);
    }
    dispatch_done_cb(-1, 0, d); /* hand every aborted callback back */
    if (d->done_ev) event_free(d->done_ev);
    if (d->out_ev) event_free(d->out_ev);
    if (d->done_wake_ev) event_free(d->done_wake_ev);
    if (d->done_fd >= 0) close(d->done_fd);
    pthread_mutex_destroy(&d->mu);
    free(d->w);
    free(d);
}
