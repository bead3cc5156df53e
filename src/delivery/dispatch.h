/* dispatch.h -- the worker pool that makes the HTTP callbacks.
 *
 * `workers` threads, each with its own libevent loop. A callback to an
 * http:// URL (no proxy configured) goes through the built-in HTTP/1.1 client
 * (h1.h); https://, proxies and URLs with credentials through a libcurl multi
 * handle driven by curl_multi_socket_action (never curl_multi_perform in a
 * loop). Connections are reused per host and one slow receiver holds only its
 * own transfers. Jobs go in from the main thread and come back to it: the done
 * callback runs on the main loop, once per submitted job.
 *
 * Ownership: a job belongs to the caller; between dispatch_submit() and its
 * done callback the pool uses it and the caller must not touch it. */
#ifndef TICKD_DISPATCH_H
#define TICKD_DISPATCH_H

#include <stdint.h>

#include "core/flow.h"
#include "model/task.h"
#include "base/wheel.h"

struct event_base;
struct cbtls;
struct netpolicy;
struct webhook_keys;
typedef struct dispatch dispatch;

/* A job that failed for tickd's own reason (uncounted) goes again after
 * this long plus up to as much again of jitter. */
#define UNCOUNTED_RETRY_MS 1000

typedef struct job job;
struct job {
    wheel_timer timer;          /* waiting for its ms on the fire wheel */
    job *next;                  /* queue link, owned by whoever queues it */
    char id[TASK_ID_MAX];
    char src[TASK_SLICE_MAX];   /* slice holding the lease */
    int64_t due_ms;
    int attempt;                /* 1, 2, ... */
    char *spec;                 /* task JSON (malloc'd, owned by the job) */
    char event[16];             /* "": the task's callback; else an event about task id
                                   (sent as tickd-event, signed as webhook-id "<id>~<event>": TASK_EVENT_SEP) */
    /* set by the pool */
    int ok;                     /* 2xx received */
    int aborted;                /* the pool stopped before an answer */
    int permanent;              /* failed for a reason a retry cannot change (policy) */
    int uncounted;              /* failed for a reason of tickd's own (out of descriptors,
                                   memory or local ports): not an attempt, tried again later */
    int timed_out;              /* failed by running out of timeout_ms */
    long status_code;           /* 0: no HTTP answer */
    int64_t sent_at_ms;         /* wall clock: the attempt began (0: never began) */
    int64_t took_ms;            /* how long it took */
    char *answer;               /* a non-2xx answer's first H1_KEEP_MAX body bytes,
                                   malloc'd (NULL: none); the job's owner frees it */
    size_t answer_len;
    char err[512];              /* why not ok, whole */
    int max_attempts;           /* the spec's retry policy (1 if unreadable) */
    int64_t backoff_ms;
    int64_t timeout_ms;
    job *wnext, *wprev;         /* the scheduler's list of jobs it holds */
    int64_t retry_due_ms;       /* the scheduler's: the retry being recorded (0: none) */
    int64_t retry_after_ms;     /* set by the pool: a 429 or 503 answer's Retry-After
                                   (-1: none) */
    /* the scheduler's, for a task a limit may hold back (flow.h) */
    int flow;                   /* 0, or FLOW_ASKING / FLOW_LET_GO (scheduler.c) */
    int64_t flow_at_ms;         /* let go: not sent before */
    int64_t flow_from_ms;       /* let go after waiting since (0: it did not wait) */
    char flow_reason[FLOW_REASON_MAX];
    char queue[TASK_QUEUE_MAX];
    char dest[FLOW_DEST_MAX];
    char park_slice[TASK_SLICE_MAX]; /* held back: the slice its entry waits in */
    int ended_failed;           /* the scheduler's: the task's end as failed (or expired) is
                                   being recorded */
    int64_t expires_ms;         /* the scheduler's: the spec's expires_at (0: none; -1: not
                                   read yet) */
    int64_t clock_offset_ms;    /* the scheduler's: its clock (Redis's) - this host's
                                   monotonic clock */
    int expired;                /* expires_at passed before an attempt began (job_expire) */
};

/* 1 when j's expires_at has passed at now_ms (the scheduler's clock): then
 * j->expired is set and j->err says so, and no attempt may begin. */
int job_expire(job *j, int64_t now_ms);

/* Runs on the main loop for each job whose callback finished (or was aborted
 * by dispatch_free). */
typedef void dispatch_done_fn(job *j, void *priv);

/* Start `workers` threads, each keeping at most `host_connections`
 * connections to one host (transfers beyond wait for one, reusing it rather
 * than opening a connection per callback), each closed once unused for
 * keepalive_ms. tls: libcurl's TLS and proxy settings (NULL: its defaults;
 * with a proxy every callback goes through libcurl), the caller's, outliving
 * the pool. Returns NULL + err. Call evthread_use_pthreads()
 * before creating `main_base`. */
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
 * the workers read them only for a submitted job. */
void dispatch_set_edge(dispatch *d, const struct netpolicy *np, const struct webhook_keys *keys);

/* Receiving hosts the workers hold state for (connections, addresses); a
 * host's state is freed once it has been unused for keepalive_ms. */
long dispatch_hosts(const dispatch *d);

/* Hand a fired job to a worker (round robin). Main thread only. */
void dispatch_submit(dispatch *d, job *j);

/* Stop the workers, aborting transfers still running (their done callbacks
 * run with aborted = 1 before this returns), and free the pool. */
void dispatch_free(dispatch *d);

#endif
