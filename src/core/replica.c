/* replica.c -- see replica.h. */
#include "core/replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/log.h"
#include "base/util.h"

struct replica {
    store *s;
    struct event *ev;
    char id[REPLICA_ID_MAX], listen[128], version[32];
    int64_t started_at_ms;
    replica_gauges_fn *gauges;
    void *priv;
    int writing;                /* store calls under way */
    int reporting;              /* a report is under way: the next waits */
    int left;                   /* replica_leave was called */
    log_limit warn;
};

static void replica_done_cb(const char *err, void *priv)
{
    replica *r = priv;
    r->writing--;
    r->reporting = 0;
    if (err)
        log_warn_limited(&r->warn, util_mono_ms(), "replica registry: not written: %s", err);
}

static void replica_report(evutil_socket_t fd, short what, void *arg)
{
    replica *r = arg;
    (void)fd, (void)what;
    if (r->reporting) return;
    int64_t inflight = 0, held = 0;
    if (r->gauges) r->gauges(r->priv, &inflight, &held);
    store_replica rep = {r->id, r->listen, r->version, r->started_at_ms, 0, inflight, held};
    r->writing++;
    r->reporting = 1;
    store_replica_put(r->s, &rep, REPLICA_TTL_MS, replica_done_cb, r);
}

replica *replica_create(struct event_base *base, store *s, const char *listen,
                        const char *version, int64_t started_at_ms, replica_gauges_fn *fn,
                        void *priv)
{
    replica *r = xcalloc(1, sizeof(*r));
    char host[64] = "";
    if (gethostname(host, sizeof(host) - 1) != 0 || !host[0]) snprintf(host, sizeof(host), "tickd");
    host[strcspn(host, ".")] = '\0'; /* the short name: ids stay short */
    snprintf(r->id, sizeof(r->id), "%s:%ld.%06lx", host, (long)getpid(),
             (unsigned long)(random() & 0xffffff));
    snprintf(r->listen, sizeof(r->listen), "%s", listen);
    snprintf(r->version, sizeof(r->version), "%s", version);
    r->s = s;
    r->started_at_ms = started_at_ms;
    r->gauges = fn;
    r->priv = priv;
    r->ev = event_new(base, -1, EV_PERSIST, replica_report, r);
    struct timeval tv = {REPLICA_REPORT_MS / 1000, (REPLICA_REPORT_MS % 1000) * 1000};
    log_assert(r->ev && event_add(r->ev, &tv) == 0);
    replica_report(-1, 0, r);
    return r;
}

const char *replica_id(const replica *r) { return r ? r->id : ""; }

void replica_leave(replica *r)
{
    if (!r || r->left) return;
    r->left = 1;
    event_del(r->ev);
    r->writing++;
    store_replica_del(r->s, r->id, replica_done_cb, r);
}

int replica_idle(const replica *r) { return !r || r->writing == 0; }

void replica_free(replica *r)
{
    if (!r) return;
    event_free(r->ev);
    free(r);
}
