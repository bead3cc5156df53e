/* store.h -- the one interface between the scheduler / API and storage.
 *
 * Typed operations and results: the callers see tasks, leases and times,
 * never a Redis reply or a key name. A store is a small table of functions
 * (as redis's dictType or hiredis's adapters) with two implementations,
 * chosen at start:
 *   store_redis.c   Redis, one server or a cluster (rcluster.h); durable.
 *   store_memory.c  this process alone; NOT durable (development, tests).
 *
 * The model both keep (lua/lib.lua documents the Redis keyspace): a task
 * lives in its home slice (task.h), one UTC minute x one bucket. A claim
 * leases what is due in one slice; a lease that outlives its attempt's
 * timeout + lease margin is claimed again. Each bucket has a watermark: the
 * oldest minute not yet drained.
 *
 * Callbacks run exactly once, from the event loop, never from inside the call
 * that started it. Strings handed to a callback live until it returns. */
#ifndef TICKD_STORE_H
#define TICKD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/metrics.h"
#include "model/task.h"
#include "model/task_spec.h"

struct event_base;
typedef struct store store;

typedef enum { ST_OK, ST_EXISTS, ST_NOTFOUND, ST_CONFLICT, ST_UNAVAILABLE } store_status;

/* add: cb(status, id, state JSON, err). ST_OK = stored (state NULL: a stored
 * task is scheduled), ST_EXISTS = the same id was stored before (nothing new
 * written; state is its state), ST_UNAVAILABLE = not stored
 * (id NULL), or stored but not confirmed by the replicas, or sent and never
 * answered, so perhaps stored (id set, err says which in full). The adds of
 * one loop turn go to the backend together. */
typedef void store_add_fn(store_status st, const char *id, const char *state,
                          const char *err, void *priv);
/* get: ST_OK (spec, state), ST_NOTFOUND or ST_UNAVAILABLE (err). */
typedef void store_get_fn(store_status st, const char *spec, const char *state,
                          const char *err, void *priv);
/* cancel: ST_OK, ST_NOTFOUND, ST_CONFLICT (detail = the task's status) or
 * ST_UNAVAILABLE (detail = reason). */
typedef void store_cancel_fn(store_status st, const char *detail, void *priv);
/* health: ok = 1 when every node answers. */
typedef void store_health_fn(int ok, const char *err, void *priv);

/* A task leased by a claim. */
typedef struct store_lease {
    const char *id;
    int64_t due_ms;
    int attempt;            /* the attempt this lease is for: 1, 2, ... */
    int64_t timeout_ms;
    task_spec *spec;        /* the task, read once (task_spec.h): the callback takes it */
} store_lease;

/* A claim's answer. With err set nothing was leased. `taken` counts every
 * id consumed (leased or dropped): taken == limit means there may be more. */
typedef struct store_claim {
    const char *err;
    int64_t due_left, run_left;  /* ids still due / leased in the slice; -1: not counted */
    int taken;
    int n;
    store_lease *leases;
} store_claim;
typedef void store_claim_fn(const store_claim *res, void *priv);

/* What a claim may take: expired leases and tasks due before now +
 * reach_ms, at most `limit` in all, and of the tasks due at or after now +
 * near_ms at most far_limit. counts: due_left and run_left are wanted (the
 * slice's minute is over, it may be passed); without it a store may answer
 * -1 for both (not counted: two commands a claim saved). */
typedef struct store_claim_ask {
    int64_t reach_ms, near_ms;
    int limit, far_limit;
    int counts;
} store_claim_ask;

/* An attempt's outcome, to record. */
/* PARK: held back by a limit (flow.h): no attempt made, due again at due_ms
 * (err: why it waits) in park_slice, a slice of the present minute. */
/* EXPIRE: its expires_at passed before an attempt began: it ends expired,
 * with no attempt made (err says when). */
typedef enum { OUT_OK, OUT_FAIL, OUT_RETRY, OUT_RELEASE, OUT_PARK, OUT_EXPIRE } store_outcome;

typedef struct store_attempt {
    const char *id;
    const char *src;        /* slice holding the lease */
    store_outcome outcome;
    int attempt;
    long status_code;       /* 0: no HTTP answer */
    const char *err;        /* "" when none */
    int64_t due_ms;         /* retry: the next attempt; release, park: due again */
    const char *park_slice; /* park: the slice its entry waits in */
    int64_t timeout_ms;
    void *owner;            /* handed back to the callback */
    /* the attempt's history entry (the task keeps its last STORE_HISTORY):
     * when it began (0: it never did), how long it took, the start of a
     * failed answer's body */
    int64_t sent_at_ms, took_ms;
    const char *answer;
    size_t answer_len;
} store_attempt;
#define STORE_HISTORY 10
/* Runs once per attempt: err NULL when recorded, else why the store gave up
 * (the lease then expires and the task runs again). */
typedef void store_settled_fn(void *owner, const char *err, void *priv);

/* Watermark: minute number, or err. */
typedef void store_wm_fn(int64_t minute, const char *err, void *priv);

/* The number of tasks waiting to be due in the whole store, or -1 + err. */
typedef void store_count_fn(int64_t n, const char *err, void *priv);

/* The store's own counters, for the metrics: failed backend replies and
 * connections made again (0 for a store without a backend). */
typedef struct store_counters {
    uint64_t errors, reconnects;
} store_counters;

/* What the store has found wrong with its backend, read at any time (the
 * strings live until the store's next loop turn). A store without a backend
 * has nothing to report. */
typedef struct store_alerts {
    const char *refusing;       /* why adds are refused (503); NULL: they are not */
    int evicting;               /* masters whose maxmemory-policy may evict keys */
    double memory_ratio;        /* used_memory / maxmemory of the fullest master; 0: no limit */
    uint64_t data_lost;         /* times a master was found without tickd's data */
    const char *data_lost_last; /* the last of them, in a sentence; NULL: none */
    int64_t data_lost_last_ms;  /* when it was found (wall clock) */
} store_alerts;

/* A fresh task was stored (the scheduler listens to claim it early). */
typedef void store_added_fn(int bucket, int64_t due_ms, void *priv);

/* ---- schedules (schedule.h) ----
 * A schedule is its definition (schedule.h's normalized JSON, opaque here)
 * and its state, a JSON object:
 *   st    active | paused | completed
 *   next  the next run not yet made (ms; -1: none)
 *   runs  runs made; skipped: missed runs not made (catch_up)
 *   last, lid   the last run's time and task id
 *   fut   ids of runs made ahead of their time, not yet due
 *   v     definition version (PUT adds 1)
 *   ct    while a runner holds the schedule: its claim's clock (ms)
 *   le    and when its lease ends (ms)
 * An active schedule is indexed by `next`, so a claim finds the due ones in
 * O(log n); a claim leases them (lease_ms) to one runner. */
typedef struct store_schedule {
    const char *id;
    const char *def;
    const char *state;
    const char *prev;          /* sch_write: the state before it (NULL: none) */
} store_schedule;
typedef void store_sch_fn(store_status st, const store_schedule *sc, const char *err,
                          void *priv);
/* n schedules, or err. */
typedef void store_sch_list_fn(const store_schedule *items, int n, const char *err, void *priv);

typedef enum { SCH_CREATE, SCH_REPLACE, SCH_PAUSE, SCH_RESUME, SCH_DELETE } store_sch_op;

/* What one runner pass made of a schedule it claimed. */
typedef struct store_sch_pass {
    int64_t ct, v;             /* the claim's clock and the version it read */
    int64_t made, skipped;
    int64_t last_at;           /* made > 0: the last run made */
    const char *last_id;
    int64_t next;              /* -1: completed */
    const char **fut;          /* runs made ahead of their time (added to
                                * those of earlier passes still ahead) */
    int nfut;
} store_sch_pass;

/* ---- finding tasks, running them again ----
 * A listing walks every slice (on a cluster, every master) in time order,
 * and each slice's tasks of one status in (score, id) order: scheduled by
 * due time, running by lease end, final ones by when they ended. The cursor
 * names the last task given, so a page starts after it whatever was written
 * meanwhile: a task is never given twice in one walk of a status (it may
 * move to another status, and be missed by this one). */
typedef struct store_list_query {
    const char *status;        /* scheduled|running|succeeded|failed|cancelled */
    int desc;                  /* newest first */
    const char *cursor;        /* "" or a next_cursor given before */
    int limit;
    int64_t from_ms, to_ms;    /* execute_at in [from, to); -1: open */
    const char *key_prefix;    /* "" = any key */
    int runs;                  /* 1: the key is key_prefix and digits alone, a
                                * schedule's run (not another schedule's whose
                                * key goes on from this one's) */
} store_list_query;
#define STORE_CURSOR_MAX (TASK_SLICE_MAX + TASK_ID_MAX + 32)
/* n ids, next_cursor NULL at the end; or err. */
typedef void store_list_fn(const char *const *ids, int n, const char *next_cursor,
                           const char *err, void *priv);

/* Run a task again (RETRY: a failed or cancelled one, attempts reset, its
 * last error kept) or now (RUN: a scheduled one), due at due_ms. Answers as
 * cancel: ST_OK, ST_NOTFOUND, ST_CONFLICT (detail = its status) or
 * ST_UNAVAILABLE (detail = reason). */
typedef enum { MOVE_RETRY, MOVE_RUN } store_move_kind;
/* A retry's ST_CONFLICT detail when the task's expires_at is not after it */
#define STORE_PAST_EXPIRY "past_expiry"

/* ---- flow control (flow.h) ----
 * Queues and destinations with limits, enforced cluster-wide by the store;
 * keys: "q:<queue>", "d:<destination>". A task of a queue or to a
 * destination with settings asks before its callback goes (admit); one held
 * back is parked in its slice (OUT_PARK) and waits in its queue's list
 * (enqueue) until a pump lets it go: then take makes its parked entry due at
 * once, and the admit of the claim that follows says go. A task a pump let
 * go while a claim held its entry to park it again is answered by that
 * enqueue, to be taken where it is parked now. The end of every callback let
 * go frees its slots (pump). */
typedef struct store_flow_task {
    const char *id, *queue, *dest;
    const char *slice;          /* enqueue: the slice holding its parked entry */
    const char *reason;         /* enqueue: paused | concurrency | rate */
    int64_t due_ms, timeout_ms;
} store_flow_task;
typedef enum { FLOW_GO, FLOW_WAIT } store_flow_kind;
typedef struct store_flow_verdict {
    store_flow_kind kind;
    int64_t at_ms;              /* GO: when the callback may go */
    int64_t waited_from_ms;     /* GO: the due it waited from (0: it did not) */
    const char *reason;         /* why it waits, or waited */
} store_flow_verdict;
typedef void store_flow_admit_fn(const store_flow_verdict *v, int n, const char *err, void *priv);
/* A callback let go has ended: its slots free; until_ms: no callback to its
 * destination before then (a Retry-After; 0: none). */
typedef struct store_flow_end {
    const char *id, *queue, *dest;
    int64_t until_ms;
    int failed;                 /* the task ended failed */
    int back;                   /* not ended: let go, its parked entry was not
                                 * there to take; it waits again */
    const char *slice;          /* back: the slice the take looked in */
} store_flow_end;
typedef struct store_flow_go {
    const char *id, *slice;
    int64_t at_ms;
    const char *queue, *dest;
} store_flow_go;
typedef void store_flow_pump_fn(const store_flow_go *g, int n, const char *err, void *priv);
typedef void store_flow_done_fn(int n, const char *err, void *priv);
/* A queue's or destination's settings (JSON, NULL: none) and live counts. */
typedef struct store_flow_info {
    const char *key, *settings;
    int64_t waiting, in_flight, failed_hour, until_ms;
    int64_t open;               /* queues: tasks stored and not yet ended */
} store_flow_info;
typedef void store_flow_info_fn(const store_flow_info *items, int n, const char *err, void *priv);
/* A page of queues or destinations in name order; next: the cursor of the
 * page after (NULL: none). */
typedef void store_flow_list_fn(const store_flow_info *items, int n, const char *next,
                                const char *err, void *priv);
/* A page of the changes since a change number (flow_snapshot): per key its
 * settings (NULL: none) and, for a destination, its hold (until_ms). */
typedef struct store_flow_snap {
    int fresh;                  /* the changes are a copy from scratch */
    int more;                   /* more changes follow: ask again at once */
    int64_t version;            /* the change number to ask from next */
    int64_t waiting;            /* tasks waiting, all queues */
} store_flow_snap;
typedef void store_flow_snap_fn(const store_flow_info *items, int n, const store_flow_snap *m,
                                const char *err, void *priv);

/* ---- the console: history, replicas, nodes ----
 * History: what the schedulers of all replicas counted, per UTC minute,
 * summed by the store (each replica adds its own counts). The lateness
 * buckets are metrics.c's (METRICS_BUCKETS bounds, then +Inf). Failures per
 * queue are bounded: per minute, cluster-wide, at most STORE_HIST_QUEUES
 * queues are counted apart and the rest under STORE_HIST_OTHER (a name no
 * queue can have: task_queue_valid refuses '~'). */
#define STORE_HIST_BUCKETS (METRICS_BUCKETS + 1)
#define STORE_HIST_QUEUES 32
#define STORE_HIST_OTHER "~other"
typedef struct store_hist_queue {
    char name[TASK_QUEUE_MAX];
    int64_t failed;             /* tasks of the queue that ended failed */
} store_hist_queue;
typedef struct store_hist {
    int64_t minute;             /* UTC minute: ms / 60000 */
    int64_t succeeded;          /* tasks whose callback succeeded */
    int64_t attempts_failed;    /* attempts that failed, retried or not */
    int64_t retried;            /* failed attempts scheduled again */
    int64_t failed;             /* tasks that ended failed */
    int64_t expired;            /* tasks that ended expired */
    int64_t lateness[STORE_HIST_BUCKETS]; /* attempts per lateness bucket */
    int nqueues;
    store_hist_queue *queues;   /* failed per queue, nqueues of them */
} store_hist;
/* A write's end: err NULL when done. */
typedef void store_done_fn(const char *err, void *priv);
/* The minutes asked for that hold counts, oldest first (m and its queues
 * live until the callback returns), or err. */
typedef void store_hist_fn(const store_hist *m, int n, const char *err, void *priv);

/* A replica's report of itself (replica.h); seen_ms: when it was written. */
typedef struct store_replica {
    const char *id, *listen, *version;
    int64_t started_at_ms, seen_ms;
    int64_t inflight, held;
} store_replica;
/* The replicas whose last report has not outlived its ttl, by id. */
typedef void store_replicas_fn(const store_replica *r, int n, const char *err, void *priv);

/* A backend node as it answered now (INFO). */
typedef struct store_node {
    const char *addr;
    const char *role;           /* master | replica */
    const char *primary;        /* a replica: its master's address; else NULL */
    int reachable;              /* a replica: online as its master sees it */
    const char *err;            /* not reachable: why */
    const char *version;        /* redis_version; NULL: not known */
    int64_t used_memory, maxmemory; /* bytes; maxmemory 0: no limit; -1: not known */
    const char *policy;         /* maxmemory_policy; NULL: not known */
    const char *refusing;       /* why writes to it are refused now; NULL: they are not */
} store_node;
typedef void store_nodes_fn(const store_node *nodes, int n, void *priv);

typedef struct store_type {
    const char *name;
    void (*add)(store *s, const task_input *t, store_add_fn *cb, void *priv);
    void (*get)(store *s, const char *id, store_get_fn *cb, void *priv);
    void (*cancel)(store *s, const char *id, store_cancel_fn *cb, void *priv);
    void (*health)(store *s, store_health_fn *cb, void *priv);
    /* lease what `ask` allows of slice (bucket, minute), expired leases
     * first, then oldest first */
    void (*claim)(store *s, int bucket, int64_t minute, const store_claim_ask *ask,
                  store_claim_fn *cb, void *priv);
    /* record attempts; `a` is copied, its strings must live until their
     * callback runs */
    void (*settle)(store *s, const store_attempt *a, int n, store_settled_fn *cb, void *priv);
    /* set the watermark of each bucket that has none to `minute` (at start,
     * before the loop runs; 0 or -1 + err) */
    int (*wm_init)(store *s, int64_t minute, char *err, size_t errlen);
    void (*wm_get)(store *s, int bucket, store_wm_fn *cb, void *priv);
    /* compare-and-set from -> to; answers the watermark after the call */
    void (*wm_advance)(store *s, int bucket, int64_t from, int64_t to, store_wm_fn *cb,
                       void *priv);
    /* CREATE (id, def, next): ST_OK; ST_EXISTS with the same def, ST_CONFLICT
     * with another (sc: the stored one). REPLACE (def, next; -1 completes):
     * runs and history kept, version + 1. PAUSE; RESUME (next); DELETE.
     * ST_NOTFOUND, or ST_CONFLICT (pause/resume of a completed schedule).
     * sc: the schedule after the write, prev its state before. */
    void (*sch_write)(store *s, store_sch_op op, const char *id, const char *def, int64_t next,
                      store_sch_fn *cb, void *priv);
    void (*sch_get)(store *s, const char *id, store_sch_fn *cb, void *priv);
    /* up to `limit` schedules of a bucket with ids after `after` ("" = from
     * the first), in id order */
    void (*sch_list)(store *s, int bucket, const char *after, int limit, store_sch_list_fn *cb,
                     void *priv);
    /* lease to the caller, for lease_ms, up to `limit` active schedules of a
     * bucket whose next run is before `until` and that no runner holds (a
     * lease that ended holds nothing) */
    void (*sch_claim)(store *s, int bucket, int64_t until, int limit, int64_t lease_ms,
                      store_sch_list_fn *cb, void *priv);
    /* record a pass and end its lease; ST_CONFLICT when the lease was lost
     * (another runner claimed it since: nothing written) */
    void (*sch_advance)(store *s, const char *id, const store_sch_pass *a, store_sch_fn *cb,
                        void *priv);
    void (*list)(store *s, const store_list_query *q, store_list_fn *cb, void *priv);
    void (*move)(store *s, const char *id, store_move_kind kind, int64_t due_ms,
                 store_cancel_fn *cb, void *priv);
    /* scheduled tasks, cancelled ones not counted: O(slices holding due
     * entries), so callers cache it */
    void (*count)(store *s, store_count_fn *cb, void *priv);
    void (*counters)(const store *s, store_counters *out);
    /* NULL in a store without a backend */
    void (*alerts)(const store *s, store_alerts *out);
    /* flow control; NULL in a store without it */
    void (*flow_admit)(store *s, const store_flow_task *t, int n, int64_t horizon_ms,
                       store_flow_admit_fn *cb, void *priv);
    /* answers the tasks let go meanwhile, as a pump does */
    void (*flow_enqueue)(store *s, const store_flow_task *t, int n, store_flow_pump_fn *cb,
                         void *priv);
    /* end callbacks, then let up to max waiting tasks go */
    void (*flow_pump)(store *s, const store_flow_end *e, int n, int max, int64_t horizon_ms,
                      store_flow_pump_fn *cb, void *priv);
    /* n = 1: the parked entry is due at at_ms; 0: it is gone */
    void (*flow_take)(store *s, const char *id, const char *slice, int64_t at_ms,
                      store_flow_done_fn *cb, void *priv);
    void (*flow_snapshot)(store *s, int64_t since, store_flow_snap_fn *cb, void *priv);
    /* settings JSON, or NULL to delete (n = 0: there were none), or
     * "+paused" / "-paused" to set only that */
    void (*flow_put)(store *s, const char *key, const char *settings, store_flow_done_fn *cb,
                     void *priv);
    /* one key's settings and counts */
    void (*flow_info)(store *s, const char *key, store_flow_info_fn *cb, void *priv);
    /* a page of queues (kind 'q') or destinations ('d') after name after
     * ("": from the first), at most limit */
    void (*flow_list)(store *s, char kind, const char *after, int limit, store_flow_list_fn *cb,
                      void *priv);
    int64_t (*now_us)(const store *s); /* the store's time line, in microseconds */
    void (*sync_clock)(store *s);     /* re-read the backend's clock */
    void (*stats)(const store *s, cJSON *obj);
    /* end every call in flight (their callbacks run, failed); free after */
    void (*close)(store *s);
    void (*free)(store *s);
    /* the console (store.h's history, replicas, nodes) */
    /* add one replica's counts of a minute to it (kept keep_ms) */
    void (*hist_add)(store *s, const store_hist *m, int64_t keep_ms, store_done_fn *cb,
                     void *priv);
    /* the minutes [from, to), at most STORE_HIST_RANGE_MAX */
    void (*hist_read)(store *s, int64_t from_minute, int64_t to_minute, store_hist_fn *cb,
                      void *priv);
    /* write r (seen now), alive for ttl_ms; drop reports past theirs */
    void (*replica_put)(store *s, const store_replica *r, int64_t ttl_ms, store_done_fn *cb,
                        void *priv);
    void (*replica_del)(store *s, const char *id, store_done_fn *cb, void *priv);
    void (*replicas)(store *s, store_replicas_fn *cb, void *priv);
    /* NULL in a store without a backend */
    void (*nodes)(store *s, store_nodes_fn *cb, void *priv);
} store_type;

struct store {
    const store_type *type;
    const config *cfg;
    store_added_fn *added;
    void *added_priv;
};

/* Redis at cfg->nodes (the scripts in scripts_dir), or NULL + err, with
 * *fatal = 1 when trying again cannot help (a refused password, another
 * keyspace's bucket count, an evicting Redis not allowed...), 0 when the
 * store may come up later (unreachable, failing over, loading). Each try
 * waits for no node: the caller paces the tries. */
store *store_redis_create(struct event_base *base, const config *cfg, const char *scripts_dir,
                          int *fatal, char *err, size_t errlen);
/* Whether Redis at cfg->nodes answers: the seeds, then every master, each
 * with blocking calls of redis.timeout_ms (on a thread of the caller's: it
 * touches nothing else). 0, or -1 + err and *fatal as store_redis_create. */
int store_redis_probe(const config *cfg, int *fatal, char *err, size_t errlen);

/* Memory, never fails. */
store *store_memory_create(struct event_base *base, const config *cfg);
/* The memory store's clock, in ms since the epoch: every "now" it uses
 * (due, leases, retention, expiry, store_now_ms) is read from clock(priv).
 * NULL, the default, is the real clock; tests drive a fake one. */
typedef int64_t store_clock_fn(void *priv);
void store_memory_set_clock(store *s, store_clock_fn *clock, void *priv);

#define STORE_SCHEMA 2

static inline void store_add(store *s, const task_input *t, store_add_fn *cb, void *priv)
{
    s->type->add(s, t, cb, priv);
}
static inline void store_get(store *s, const char *id, store_get_fn *cb, void *priv)
{
    s->type->get(s, id, cb, priv);
}
static inline void store_cancel(store *s, const char *id, store_cancel_fn *cb, void *priv)
{
    s->type->cancel(s, id, cb, priv);
}
static inline void store_health(store *s, store_health_fn *cb, void *priv)
{
    s->type->health(s, cb, priv);
}
static inline void store_claim_slice(store *s, int bucket, int64_t minute,
                                     const store_claim_ask *ask, store_claim_fn *cb, void *priv)
{
    s->type->claim(s, bucket, minute, ask, cb, priv);
}
static inline void store_settle(store *s, const store_attempt *a, int n, store_settled_fn *cb,
                                void *priv)
{
    s->type->settle(s, a, n, cb, priv);
}
static inline int store_wm_init(store *s, int64_t minute, char *err, size_t errlen)
{
    return s->type->wm_init(s, minute, err, errlen);
}
static inline void store_wm_get(store *s, int bucket, store_wm_fn *cb, void *priv)
{
    s->type->wm_get(s, bucket, cb, priv);
}
static inline void store_wm_advance(store *s, int bucket, int64_t from, int64_t to,
                                    store_wm_fn *cb, void *priv)
{
    s->type->wm_advance(s, bucket, from, to, cb, priv);
}
static inline void store_sch_write(store *s, store_sch_op op, const char *id, const char *def,
                                   int64_t next, store_sch_fn *cb, void *priv)
{
    s->type->sch_write(s, op, id, def, next, cb, priv);
}
static inline void store_sch_get(store *s, const char *id, store_sch_fn *cb, void *priv)
{
    s->type->sch_get(s, id, cb, priv);
}
static inline void store_sch_list(store *s, int bucket, const char *after, int limit,
                                  store_sch_list_fn *cb, void *priv)
{
    s->type->sch_list(s, bucket, after, limit, cb, priv);
}
static inline void store_sch_claim(store *s, int bucket, int64_t until, int limit,
                                   int64_t lease_ms, store_sch_list_fn *cb, void *priv)
{
    s->type->sch_claim(s, bucket, until, limit, lease_ms, cb, priv);
}
static inline void store_sch_advance(store *s, const char *id, const store_sch_pass *a,
                                     store_sch_fn *cb, void *priv)
{
    s->type->sch_advance(s, id, a, cb, priv);
}
static inline void store_list(store *s, const store_list_query *q, store_list_fn *cb, void *priv)
{
    s->type->list(s, q, cb, priv);
}
static inline void store_move(store *s, const char *id, store_move_kind kind, int64_t due_ms,
                              store_cancel_fn *cb, void *priv)
{
    s->type->move(s, id, kind, due_ms, cb, priv);
}
static inline void store_count(store *s, store_count_fn *cb, void *priv)
{
    s->type->count(s, cb, priv);
}
static inline void store_get_counters(const store *s, store_counters *out)
{
    s->type->counters(s, out);
}
static inline void store_get_alerts(const store *s, store_alerts *out)
{
    *out = (store_alerts){0};
    if (s->type->alerts) s->type->alerts(s, out);
}
static inline int store_has_flow(const store *s) { return s->type->flow_admit != NULL; }
static inline void store_flow_admit(store *s, const store_flow_task *t, int n, int64_t horizon_ms,
                                    store_flow_admit_fn *cb, void *priv)
{
    s->type->flow_admit(s, t, n, horizon_ms, cb, priv);
}
static inline void store_flow_enqueue(store *s, const store_flow_task *t, int n,
                                      store_flow_pump_fn *cb, void *priv)
{
    s->type->flow_enqueue(s, t, n, cb, priv);
}
static inline void store_flow_pump(store *s, const store_flow_end *e, int n, int max,
                                   int64_t horizon_ms, store_flow_pump_fn *cb, void *priv)
{
    s->type->flow_pump(s, e, n, max, horizon_ms, cb, priv);
}
static inline void store_flow_take(store *s, const char *id, const char *slice, int64_t at_ms,
                                   store_flow_done_fn *cb, void *priv)
{
    s->type->flow_take(s, id, slice, at_ms, cb, priv);
}
static inline void store_flow_snapshot(store *s, int64_t since, store_flow_snap_fn *cb,
                                       void *priv)
{
    s->type->flow_snapshot(s, since, cb, priv);
}
static inline void store_flow_put(store *s, const char *key, const char *settings,
                                  store_flow_done_fn *cb, void *priv)
{
    s->type->flow_put(s, key, settings, cb, priv);
}
static inline void store_flow_get(store *s, const char *key, store_flow_info_fn *cb, void *priv)
{
    s->type->flow_info(s, key, cb, priv);
}
static inline void store_flow_list(store *s, char kind, const char *after, int limit,
                                   store_flow_list_fn *cb, void *priv)
{
    s->type->flow_list(s, kind, after, limit, cb, priv);
}
static inline int64_t store_now_us(const store *s) { return s->type->now_us(s); }
static inline int64_t store_now_ms(const store *s) { return store_now_us(s) / 1000; }
static inline void store_sync_clock(store *s) { s->type->sync_clock(s); }
static inline void store_stats(const store *s, cJSON *obj) { s->type->stats(s, obj); }
static inline void store_close(store *s) { s->type->close(s); }
static inline void store_free(store *s)
{
    if (s) s->type->free(s);
}
/* Listen to fresh adds (one listener). */
static inline void store_listen(store *s, store_added_fn *fn, void *priv)
{
    s->added = fn;
    s->added_priv = priv;
}

/* ---- the console ---- */
#define STORE_HIST_RANGE_MAX (7 * 1440)
static inline void store_hist_add(store *s, const store_hist *m, int64_t keep_ms,
                                  store_done_fn *cb, void *priv)
{
    s->type->hist_add(s, m, keep_ms, cb, priv);
}
static inline void store_hist_read(store *s, int64_t from_minute, int64_t to_minute,
                                   store_hist_fn *cb, void *priv)
{
    s->type->hist_read(s, from_minute, to_minute, cb, priv);
}
static inline void store_replica_put(store *s, const store_replica *r, int64_t ttl_ms,
                                     store_done_fn *cb, void *priv)
{
    s->type->replica_put(s, r, ttl_ms, cb, priv);
}
static inline void store_replica_del(store *s, const char *id, store_done_fn *cb, void *priv)
{
    s->type->replica_del(s, id, cb, priv);
}
static inline void store_replicas(store *s, store_replicas_fn *cb, void *priv)
{
    s->type->replicas(s, cb, priv);
}
static inline int store_has_nodes(const store *s) { return s->type->nodes != NULL; }
static inline void store_nodes(store *s, store_nodes_fn *cb, void *priv)
{
    s->type->nodes(s, cb, priv);
}

#endif
