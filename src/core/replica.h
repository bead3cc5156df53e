/* replica.h -- this tickd's entry in the store's registry of replicas
 * (store.h), for the console (GET /v1/cluster): written every
 * REPLICA_REPORT_MS, alive for REPLICA_TTL_MS after each write. A replica
 * stopped cleanly removes its entry; one killed disappears when its TTL
 * ends. */
#ifndef TICKD_REPLICA_H
#define TICKD_REPLICA_H

#include <stdint.h>

#include "store/store.h"

struct event_base;
typedef struct replica replica;

#define REPLICA_REPORT_MS 2000
/* Five reports missed: a replica whose loop stalls through a Redis failover
 * stays listed; one killed is gone within 10 s. */
#define REPLICA_TTL_MS 10000
#define REPLICA_ID_MAX 128

/* What the report says of the moment: callbacks in flight, tasks held. */
typedef void replica_gauges_fn(void *priv, int64_t *inflight, int64_t *held);

/* Report at once and then every REPLICA_REPORT_MS. The id is
 * "<host>:<pid>.<6 random hex digits>", chosen now. listen: the API's
 * address as reached (host:port). */
replica *replica_create(struct event_base *base, store *s, const char *listen,
                        const char *version, int64_t started_at_ms, replica_gauges_fn *fn,
                        void *priv);
const char *replica_id(const replica *r);

/* Stop reporting and remove the entry (a clean stop; once). */
void replica_leave(replica *r);
/* 1 when no store call is under way. */
int replica_idle(const replica *r);

/* After the store is closed (its calls answered). */
void replica_free(replica *r);

#endif
