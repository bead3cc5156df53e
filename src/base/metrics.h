/* metrics.h -- the process's counters and histograms, and GET /metrics.
 *
 * As Redis keeps its stat_* fields in the server struct, tickd keeps its
 * counters in one global, `metrics`, written on the main loop only (the
 * dispatch threads hand their jobs back to it before anything is counted):
 * plain integers, no atomics, nothing on a hot path but an increment.
 * metrics_render() writes them, with the gauges the caller reads at scrape
 * time, in the Prometheus text format 0.0.4. */
#ifndef TICKD_METRICS_H
#define TICKD_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* How a callback attempt ended (the outcome label). */
typedef enum metrics_outcome {
    MO_2XX,           /* a 2xx answer */
    MO_HTTP_ERROR,    /* another answer */
    MO_TIMEOUT,       /* no (whole) answer within the task's timeout */
    MO_CONNECT_ERROR, /* no answer: DNS, connect, TLS, a broken connection */
    MO_DENIED,        /* every address refused by callback.allow / deny */
    MO_COUNT
} metrics_outcome;

/* Why a limit held a callback back (flow.h), as the reason label. */
#define FLOW_REASONS {"paused", "concurrency", "rate"}
int metrics_flow_reason(const char *reason);

/* Bucket upper bounds in seconds, +Inf implied. */
#define METRICS_BUCKETS 14
typedef struct metrics_hist {
    const double *le;                    /* METRICS_BUCKETS bounds, rising */
    uint64_t count[METRICS_BUCKETS + 1]; /* per bucket (not cumulative), the last is +Inf */
    uint64_t total;
    double sum;
} metrics_hist;

struct tickd_metrics {
    uint64_t tasks_created;            /* stored by this replica (API and schedules) */
    uint64_t attempts[MO_COUNT];
    uint64_t succeeded, failed, cancelled;
    uint64_t expired;                  /* ended expired: no attempt began by expires_at */
    uint64_t retries;                  /* attempts that failed and were scheduled again */
    uint64_t deferred;                 /* callbacks not made for tickd's own reason (no attempt) */
    uint64_t late;                     /* callbacks reached too late to begin within their
                                          lease: not begun (no attempt) */
    uint64_t schedule_runs;            /* runs made by this replica's runner */
    metrics_hist lateness;             /* due time (or the time a limit let the
                                          callback go) to the request sent */
    metrics_hist flow_wait[3];         /* due time to the time a limit let the
                                          callback go, by reason (FLOW_REASONS) */
    uint64_t flow_held[3];             /* callbacks held back, by reason */
    metrics_hist duration;             /* request sent to the answer's end */
};
extern struct tickd_metrics metrics;

/* Gauges and counters other modules own, read when scraped. scheduled < 0:
 * not known yet. */
typedef struct metrics_now {
    int inflight, held, api_connections;
    long long scheduled;
    long long flow_waiting;            /* tasks held back by a limit (< 0: no limits) */
    double scheduled_age_s;
    uint64_t redis_errors, redis_reconnects;
    /* the store's backend (store.h's store_alerts) */
    int store_refusing, store_evicting;
    double store_memory_ratio;
    uint64_t store_data_lost;
    int64_t start_ms;                  /* wall clock at start */
    const char *version, *store;       /* tickd_build_info's labels */
} metrics_now;

void metrics_observe(metrics_hist *h, double seconds);

/* The exposition text, malloc'd, *len its length. */
char *metrics_render(const metrics_now *now, size_t *len);

#endif
