/* dispatch.h -- the callback pool: the main loop's built-in client and
 * `workers` threads.
 *
 * A callback to an http:// URL (no proxy configured, no credentials) is made
 * on the main event loop by the built-in HTTP/1.1 client (h1.h): nonblocking,
 * so a slow receiver holds only its own calls, and with no thread hop (a lock
 * and a wake-up each way) per callback. https://, proxies and URLs with
 * credentials go to `workers` threads, each with its own libevent loop and a
 * libcurl multi handle driven by curl_multi_socket_action (never
 * curl_multi_perform in a loop). Connections are reused per host and one
 * slow receiver holds only its own transfers. Callbacks go in from the main
 * thread and come back to it, in batches (one lock and at most one wake-up a
 * batch): the done callback runs on the main loop, once per submitted
 * callback, never inside dispatch_submit.
 *
 * Ownership: a callback belongs to the caller (the scheduler embeds one in
 * each job it holds; the task.failed event in each notice); between
 * dispatch_submit() and its done callback the pool uses it and the caller
 * must not touch it. */
#ifndef TICKD_DISPATCH_H
#define TICKD_DISPATCH_H

#include <stdint.h>

#include "model/task.h"
#include "model/task_spec.h"

struct event_base;
struct cbtls;
struct netpolicy;
struct webhook_keys;
typedef struct dispatch dispatch;

/* One HTTP callback: the request the pool makes (from the task's spec, read
 * once by its owner) and, once it is done, what came of it. */
typedef struct callback callback;
struct callback {
    callback *next;             /* the pool's queue link */
    char id[TASK_ID_MAX];
    int64_t due_ms;
    int attempt;                /* 1, 2, ... */
    task_spec *spec;            /* the task, read once (owned by the callback's owner) */
    char event[16];             /* "": the task's callback; else an event about task id
                                   (sent as tickd-event, signed as webhook-id "<id>~<event>": TASK_EVENT_SEP) */
    int64_t clock_offset_ms;    /* the owner's clock (the store's) - this host's
                                   monotonic clock: expires_at is checked on it */
    int64_t end_by_ms;          /* the owner's clock: the attempt must have ended by
                                   then (its lease's end, less the time its record
                                   takes); 0: no bound */
    /* set by the pool */
    int ok;                     /* 2xx received */
    int aborted;                /* the pool stopped before an answer */
    int permanent;              /* failed for a reason a retry cannot change (policy) */
    int uncounted;              /* failed for a reason of tickd's own (out of descriptors,
                                   memory or local ports): not an attempt, tried again later */
    int timed_out;              /* failed by running out of timeout_ms */
    int expired;                /* expires_at passed before an attempt began (callback_expire) */
    int late;                   /* reached too late to be begun by end_by_ms: no
                                   attempt (the owner leaves it to its lease) */
    long status_code;           /* 0: no HTTP answer */
    int64_t sent_at_ms;         /* wall clock: the attempt began (0: never began) */
    int64_t took_ms;            /* how long it took */
    char *answer;               /* a non-2xx answer's first H1_KEEP_MAX body bytes,
                                   malloc'd (NULL: none); the callback's owner frees it */
    size_t answer_len;
    int64_t retry_after_ms;     /* a 429 or 503 answer's Retry-After (-1: none) */
    char err[512];              /* why not ok, whole */
};

/* 1 when the task's expires_at has passed at now_ms (the owner's clock):
 * then cb->expired is set and cb->err says so, and no attempt may begin. An
 * event about a task never expires. */
int callback_expire(callback *cb, int64_t now_ms);

/* 1 when the attempt can no longer begin within its lease at now_ms (the
 * owner's clock): end_by_ms has passed. Then cb->late is set and cb->err
 * says so: nothing about the task may be recorded (another claim may take
 * it), and its lease brings it back, the same attempt. Before end_by_ms an
 * attempt begins, given what is left (cut there, it fails as a timeout), and
 * a record has half the lease's margin to reach the store. */
int callback_too_late(callback *cb, int64_t now_ms);

/* Runs on the main loop for each callback that finished (or was aborted by
 * dispatch_free). */
typedef void dispatch_done_fn(callback *cb, void *priv);

/* Start `workers` threads, each keeping at most `host_connections`
 * connections to one host (transfers beyond wait for one, reusing it rather
 * than opening a connection per callback), each closed once unused for
 * keepalive_ms; the main loop's client keeps workers x host_connections. tls: libcurl's TLS and proxy settings (NULL: its defaults;
 * with a proxy every callback goes through libcurl), the caller's, outliving
 * the pool. Returns NULL + err. Call evthread_use_pthreads() first (the
 * threads' own bases are locked: the main loop wakes them); `main_base` may
 * be made without a lock (EVENT_BASE_FLAG_NOLOCK): only its own thread
 * calls into it, the threads wake it through an eventfd. */
dispatch *dispatch_create(struct event_base *main_base, int workers, int host_connections,
                          int64_t keepalive_ms, const struct cbtls *tls,
                          dispatch_done_fn *done, void *priv, char *err, size_t errlen);

/* Receiving hosts whose state (a queue, kept connections) each worker keeps
 * at most; past it the least recently called idle one is dropped, with a
 * warning. 0: no bound. */
void dispatch_set_hosts_max(dispatch *d, long hosts_max);

/* The destinations callbacks may connect to (checked on every connect, both
 * client paths: a refused attempt ends with NETPOLICY_DENIED and permanent
 * set) and the keys signing every callback (NULL: unsigned). Both stay the
 * caller's and must outlive the pool. Call before the first dispatch_submit:
 * the workers read them only for a submitted callback. */
void dispatch_set_edge(dispatch *d, const struct netpolicy *np, const struct webhook_keys *keys);

/* Receiving hosts the workers hold state for (connections, addresses); a
 * host's state is freed once it has been unused for keepalive_ms. */
long dispatch_hosts(const dispatch *d);
/* Ended transfers the main loop's client keeps for the next callbacks (up
 * to a burst's worth; those no callback took between two sweeps of idle
 * hosts are let go, past 256). */
long dispatch_kept(const dispatch *d);
/* Naps the main loop took while its callbacks waited for answers (h1.c:
 * h1_nap_cb). */
uint64_t dispatch_naps(const dispatch *d);

/* Hand a callback to the main loop's client, or to a thread (round robin).
 * Main thread only. */
void dispatch_submit(dispatch *d, callback *cb);

/* Callbacks claimed to be made later (cbs, n of them, oldest due first): the
 * connections they will need are opened now, on the main loop's client
 * (plain http://), up to the host's cap: as many as the most of them due
 * to one host within a few ms, less those the host has, busy, kept or
 * opening. The first callback of a burst then finds its connection ready,
 * and the receiver's accepts are behind it. Main thread only. */
void dispatch_warm(dispatch *d, callback *const *cbs, int n);

/* Stop the workers, aborting transfers still running (their done callbacks
 * run with aborted = 1 before this returns), and free the pool. */
void dispatch_free(dispatch *d);

#endif
