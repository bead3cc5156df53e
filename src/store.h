/* store.h -- tickd's Redis keyspace: the Lua scripts (the .lua files in lua/), the slice
 * keys, and the operations the API and the scheduler run on them.
 *
 * Key schema v1 is documented in lua/lib.lua. Every operation here touches the
 * keys of one slice (one hash tag) per Redis call, so it runs on one node of a
 * cluster. Callbacks follow rcluster's contract: each runs exactly once, from
 * the event loop, never from inside the call that started it. */
#ifndef TICKD_STORE_H
#define TICKD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "rcluster.h"
#include "task.h"

#define STORE_SCHEMA 1

typedef enum {
    SCRIPT_ADD, SCRIPT_CANCEL, SCRIPT_CLAIM, SCRIPT_FETCH, SCRIPT_SETTLE,
    SCRIPT_PTR, SCRIPT_WM, SCRIPT_COUNT
} store_script;

struct event;
typedef struct store_add_batch store_add_batch;

typedef struct store {
    rcluster *rc;
    char prefix[64];
    int buckets;
    int64_t slice_grace_ms;
    int64_t retention_ms;
    int64_t wait_replicas, wait_timeout_ms;
    char *src[SCRIPT_COUNT];   /* lib.lua + the script */
    char sha[SCRIPT_COUNT][41];
    int64_t clock_offset_ms;   /* Redis TIME - local realtime */
    store_add_batch *adds;     /* adds gathered in this loop turn */
    int add_bucket;            /* this turn's bucket for tasks without a key */
    struct event *flush_ev;    /* sends them at the end of the turn */
} store;

/* The five keys of a slice: due, task, del, run, ptr. */
typedef struct slice_keys {
    char k[5][128];
} slice_keys;

/* Load the scripts from dir, check or set P:meta (schema, buckets), SCRIPT
 * LOAD everywhere, and keep scripts loaded on every (re)connection. base is
 * rc's event loop. Returns 0 or -1 + err. */
int store_init(store *s, struct event_base *base, rcluster *rc, const char *prefix, const char *scripts_dir,
               int buckets, char *err, size_t errlen);
void store_free(store *s);

void store_slice_keys(const store *s, const char *slice, slice_keys *out);
/* The hash tag route of a slice: "{slice}". */
void store_route(const char *slice, char *out, size_t outlen);

/* Redis-corrected wall clock, ms. */
int64_t store_now_ms(const store *s);

/* Run a script; routed by the first key. Retries as EVAL on NOSCRIPT.
 * keys/args are copied. cb as in rcluster. */
void store_eval(store *s, store_script sc, int nkeys, const char **keys, int nargs,
                const char **args, rc_reply_fn *cb, void *priv);

/* The same on a given rcluster lane (see rc_command_lane). */
void store_eval_lane(store *s, int lane, store_script sc, int nkeys, const char **keys,
                     int nargs, const char **args, rc_reply_fn *cb, void *priv);

/* ---- API operations ---- */

typedef enum { ST_OK, ST_EXISTS, ST_NOTFOUND, ST_CONFLICT, ST_UNAVAILABLE } store_status;

/* add: cb(status, id, state JSON, err). ST_OK = stored, ST_EXISTS = the same
 * id was stored before (nothing new written), ST_UNAVAILABLE = not stored, or
 * (id set) stored but not confirmed by the replicas. The adds of one loop turn
 * are sent together: one script call per home slice. */
typedef void store_add_fn(store_status st, const char *id, const char *state,
                          const char *err, void *priv);
void store_add(store *s, const task_input *t, store_add_fn *cb, void *priv);

/* get: cb(status, spec, state): ST_OK, ST_NOTFOUND or ST_UNAVAILABLE. */
typedef void store_get_fn(store_status st, const char *spec, const char *state,
                          const char *err, void *priv);
void store_get(store *s, const char *id, store_get_fn *cb, void *priv);

/* cancel: cb(status, detail): ST_OK, ST_NOTFOUND, ST_CONFLICT (detail = the
 * task's status) or ST_UNAVAILABLE (detail = reason). */
typedef void store_cancel_fn(store_status st, const char *detail, void *priv);
void store_cancel(store *s, const char *id, store_cancel_fn *cb, void *priv);

/* Ping every node; cb(1) if all answer. */
typedef void store_health_fn(int ok, const char *err, void *priv);
void store_health(store *s, store_health_fn *cb, void *priv);

#endif
