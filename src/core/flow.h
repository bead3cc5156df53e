/* flow.h -- flow control: queues and destinations with limits.
 *
 * A task names a queue (task.h, "default" when it names none); its callback
 * goes to a destination, "host:port" of its URL, the port the scheme's
 * default when the URL names none. The host is in one form however the URL
 * spells it (flow_dest_of_url): an address as the SSRF guard names it
 * (netpolicy_address_form: IPv4-mapped IPv6 is IPv4; 127.1, 0x7f.1 and
 * 2130706433 are 127.0.0.1, as the URL parser reads them), a name in lower
 * case without its final dot. A name is not resolved: limits are decided
 * before the connection, the same on every replica, and a name's addresses
 * are known only when it connects (and may change, and differ between
 * replicas), so localhost and 127.0.0.1 are two destinations. A queue may
 * have a rate (callbacks a second, fractional allowed, with
 * a burst), a max_concurrency (callbacks in flight at once, all replicas
 * together) and be paused; a destination the same limits but no pause. A
 * destination "host" applies to every port of the host that has no
 * "host:port" of its own. A receiver answering 429 or 503 with Retry-After
 * holds its destination back that long.
 *
 * The limits live in the store (store.h: flow_*), which enforces them
 * atomically for the whole cluster; each replica keeps a copy of the
 * settings (flow_cache), read again every FLOW_SNAPSHOT_MS and at once after
 * its own writes, to know which tasks must ask before their callback goes:
 * a task of an unlimited queue to an unlimited destination never does. */
#ifndef TICKD_FLOW_H
#define TICKD_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "model/task.h"
#include "model/task_spec.h"

#define FLOW_DEST_MAX 272          /* "host:port" + NUL */
#define FLOW_KEY_MAX (FLOW_DEST_MAX + 2)
#define FLOW_REASON_MAX 16
#define FLOW_SNAPSHOT_MS 100
/* a task held back comes round again after this long and up to as long
 * again (spread), if no pump let it go sooner (the pump lets it go as soon
 * as the limit allows) */
#define FLOW_PARK_MS 30000
/* the longest Retry-After obeyed */
#define FLOW_RETRY_AFTER_MAX_MS 3600000
/* a rate's bounds: the slowest, one callback in 10,000 s, keeps the time
 * between two callbacks (1000 / rate ms) a finite number of ms */
#define FLOW_RATE_MIN 0.0001
#define FLOW_RATE_MAX 1000000.0
#define FLOW_INT_MAX 1000000

typedef struct flow_settings {
    double rate;                /* callbacks a second; 0: no limit */
    int64_t burst;              /* callbacks at once after a pause (0: 1) */
    int64_t max_concurrency;    /* 0: no limit */
    int paused;
} flow_settings;

/* A PUT body into out: fields rate, burst, max_concurrency, and paused for a
 * queue; null or absent = none. 0, or -1 + err naming the field. */
int flow_settings_parse(const cJSON *body, int queue, flow_settings *out, char *err,
                        size_t errlen);
/* Stored JSON (malloc'd), as flow_settings_parse reads it back. */
char *flow_settings_json(const flow_settings *fs, int queue);
/* Stored JSON into fields of obj (nothing for none). */
void flow_settings_render(const char *json, int queue, cJSON *obj);

/* The destination of a callback URL into out (FLOW_DEST_MAX): 0, or -1
 * (out then unspecified). */
int flow_dest_of_url(const char *url, char *out);
/* 1 when s names a destination: host or host:port (lower case letters,
 * digits, '.', '-', or an [IPv6] literal; port 1-65535), nothing else. */
int flow_dest_valid(const char *s);
/* A destination named in the API (flow_dest_valid), in the form
 * flow_dest_of_url gives, into out (FLOW_DEST_MAX); a port only when named.
 * 0, or -1 when it is not valid. */
int flow_dest_canon(const char *name, char *out);

typedef struct flow_cache flow_cache;
/* holds_max: destinations held back (Retry-After) kept at once; past it the
 * oldest set is forgotten, with a warning. */
flow_cache *flow_cache_new(size_t holds_max);
void flow_cache_free(flow_cache *fc);
/* Changes from the store: items as store_flow_snap_fn gives them (settings
 * NULL or "": none; until_ms: the store's hold of a destination). fresh: the
 * first page of a copy from scratch, built aside (the one in use keeps
 * answering) and put in use with its last page (done); otherwise each page
 * changes the copy in use. Holds seen here are kept until they end. */
struct store_flow_info;
void flow_cache_apply(flow_cache *fc, const struct store_flow_info *items, int n, int fresh,
                      int done, int64_t now_ms);
void flow_cache_set_waiting(flow_cache *fc, int64_t waiting);
/* A Retry-After seen here: known at once, before the next snapshot. */
void flow_cache_hold(flow_cache *fc, const char *dest, int64_t until_ms, int64_t now_ms);
/* Destinations held back here now (ended holds may count until dropped). */
size_t flow_cache_holds(const flow_cache *fc);
/* 1 when nothing is configured and no destination is held back. */
int flow_cache_empty(const flow_cache *fc);
/* Changes whenever settings or holds are read into the copy: a route that
 * found no limit (0) finds none again while this stays the same (holds
 * that end only lift limits). */
uint64_t flow_cache_gen(const flow_cache *fc);
int64_t flow_cache_waiting(const flow_cache *fc);
/* The queue and destination key of a task (its spec, read once): 1 when a
 * limit may apply (it must ask), 0 when none does, -1 if the spec is
 * unreadable. */
int flow_cache_route(const flow_cache *fc, const task_spec *spec, int64_t now_ms,
                     char queue[TASK_QUEUE_MAX], char dest[FLOW_DEST_MAX]);

#endif
