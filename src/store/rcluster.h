/* rcluster.h -- async Redis client for one server or a Redis Cluster, on a
 * libevent loop, over hiredis' async API (hiredis 0.14 has no cluster client).
 *
 * Mode is found at start: a node that answers CLUSTER SLOTS makes a cluster
 * client (slot map, one connection per master, MOVED / ASK followed, map
 * refreshed when a connection drops); otherwise the first reachable seed is
 * the one server. Connections that drop are re-made with backoff; a node that
 * stays silent past timeout_ms (a PING watchdog) is dropped and re-made.
 *
 * Every command is routed by the slot of `route` (a key; its {hash tag} counts,
 * as in Redis). Contract of rc_reply_fn: it runs exactly once per rc_command,
 * never from inside rc_command itself; `reply` is the server's answer (an
 * error reply included) and lives until the callback returns, or NULL when the
 * command could not be delivered or its connection was lost, in which case
 * `err` says why. */
#ifndef TICKD_RCLUSTER_H
#define TICKD_RCLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

struct event_base;
typedef struct rcluster rcluster;

typedef void rc_reply_fn(redisReply *reply, const char *err, void *priv);

/* One connection of one node, as it was when a reply came on it. */
typedef struct rc_conn {
    int node, lane;
    uint64_t gen;
} rc_conn;

/* Called after each successful (re)connection of a node (its lane 0), with
 * that connection: what rc_command_on() sends there goes before any command
 * routed to it, and is not sent again should the connection go (the next
 * one calls this again). */
typedef void rc_connect_fn(rcluster *c, rc_conn conn, void *priv);

/* Connect to the seeds ("host:port,host:port"), waiting and retrying until one
 * answers or `wait_ms` passes (0: each seed tried once). Every connection
 * sends AUTH [user] pass first when `pass` is not empty; a refused password
 * fails at once. Returns NULL with the reason in err; *fatal (when not NULL)
 * is then 1 when waiting cannot mend it (the seeds' spelling, a refused
 * password, a user without the rights), 0 when a later try may succeed. */
/* With base NULL: only the seeds are read (CLUSTER SLOTS); no link is made,
 * and the rcluster serves only rc_sync_*_command and rc_free. */
rcluster *rc_create(struct event_base *base, const char *seeds, const char *user,
                    const char *pass, int64_t timeout_ms, int64_t wait_ms, int *fatal,
                    char *err, size_t errlen);
void rc_free(rcluster *c);

void rc_set_connect_cb(rcluster *c, rc_connect_fn *fn, void *priv);

/* Send a command; see the contract above. */
void rc_command(rcluster *c, const char *route, rc_reply_fn *cb, void *priv,
                int argc, const char **argv, const size_t *argvlen);

/* The same on lane 1: a second connection per node for commands that may
 * block it (WAIT), so they never hold up the others. */
void rc_command_lane(rcluster *c, const char *route, int lane, rc_reply_fn *cb, void *priv,
                     int argc, const char **argv, const size_t *argvlen);

/* The same for a command the caller wrote in RESP, cmd[0..len): not
 * copied; the caller keeps it whole until cb has returned. It is sent again
 * as it is on a retry or a redirect, except that *again (when not NULL: the
 * one byte of an argument of cmd) is set to '1' first, so that a write told
 * so knows it may have run before, its answer lost with a connection
 * (add.lua). */
void rc_command_resp(rcluster *c, const char *route, int lane, rc_reply_fn *cb, void *priv,
                     char *cmd, size_t len, char *again);
/* Writing RESP: "*n\r\n" at p, and an argument ("$len\r\n" s "\r\n"),
 * each returning the end. RC_RESP_ARG(len): the most an argument of len
 * bytes takes; RC_RESP_HEAD: the most "*n\r\n" takes. */
#define RC_RESP_HEAD 24
#define RC_RESP_ARG(len) ((len) + 26)
char *rc_resp_count(char *p, size_t n);
char *rc_resp_arg(char *p, const char *s, size_t len);

/* Inside a reply callback: the connection that reply came on. */
rc_conn rc_reply_conn(const rcluster *c);
/* Inside a reply callback given no reply (r NULL): 1 when the command had
 * been handed to a connection (queued on it: perhaps one that never
 * connected, so 1 may say more than happened), so it may have run, its
 * answer lost; 0 when it never left. */
int rc_reply_sent(const rcluster *c);

/* Send a command on that connection and no other: never redirected nor
 * sent again; fails ("connection lost") if it was lost since, or while the
 * command waits. For WAIT, which counts the writes of its own connection
 * only. Same contract otherwise. */
void rc_command_on(rcluster *c, rc_conn conn, rc_reply_fn *cb, void *priv, int argc,
                   const char **argv, const size_t *argvlen);

/* Send a command to node `node` (not redirected). Same contract. */
void rc_node_command(rcluster *c, int node, rc_reply_fn *cb, void *priv,
                     int argc, const char **argv, const size_t *argvlen);

/* Number of nodes known (masters in cluster mode). */
/* Failed replies seen, each try of a retried command counted (error
 * replies but redirects, and replies lost with their connection or never
 * sent) and connections made again
 * after one was lost. */
void rc_counters(const rcluster *c, uint64_t *errors, uint64_t *reconnects);

int rc_node_count(const rcluster *c);
const char *rc_node_name(const rcluster *c, int node);

/* 1 if node i serves at least one slot (always, for a single server). */
int rc_node_serves(const rcluster *c, int node);

/* Slot of a key (CRC16 of its hash tag, mod 16384). */
unsigned rc_key_slot(const char *key, size_t len);

/* The node serving a slot, or -1 if unknown. */
int rc_slot_node(const rcluster *c, unsigned slot);

/* ---- parts exposed for unit tests ---- */

/* An rcluster with no loop and no connections: slot map and parsing only. */
rcluster *rc_create_offline(void);

/* Apply a CLUSTER SLOTS reply (nodes with an empty address are `from`).
 * Returns the number of slot ranges, or -1 if it is not a slot map. */
int rc_apply_slots(rcluster *c, const redisReply *r, const char *from);

/* Parse "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381". Returns 0
 * and fills ask (1 for ASK), slot, host and port; -1 if malformed. */
int rc_parse_redirect(const char *s, int *ask, unsigned *slot, char *host, size_t hostlen,
                      int *port);

/* Run a blocking command on the first reachable node and return its reply
 * (caller frees with freeReplyObject), or NULL + err. For start-up checks
 * before the loop runs. */
redisReply *rc_sync_command(rcluster *c, const char *route, char *err, size_t errlen,
                            const char *fmt, ...);
/* The same on node `node` (not redirected). */
redisReply *rc_sync_node_command(rcluster *c, int node, char *err, size_t errlen,
                                 const char *fmt, ...);

/* hiredis's reply functions for a reader whose replies are built in blocks
 * of their own and freed whole (the async links' readers use them). A reply
 * made by them is freed by its reader's fn->freeObject, never by
 * freeReplyObject. Exposed for the tests and the fuzz target. */
redisReplyObjectFunctions *rc_reply_functions(void);

#endif
