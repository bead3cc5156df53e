/* metrics.c -- see metrics.h. */
#include "base/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"

static const double lateness_le[METRICS_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                    0.25,  0.5,    1,     2.5,  5,     10,  60};
static const double duration_le[METRICS_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                    1,     2.5,  5,     10,   15,  30,   60};

static const double flow_le[METRICS_BUCKETS] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                                                30, 60, 300, 900, 3600};
struct tickd_metrics metrics = {.lateness = {.le = lateness_le}, .duration = {.le = duration_le},
                                .flow_wait = {{.le = flow_le}, {.le = flow_le}, {.le = flow_le}}};
static const char *flow_reasons[3] = FLOW_REASONS;

int metrics_flow_reason(const char *reason)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(reason, flow_reasons[i]) == 0) return i;
    return 2;
}

void metrics_observe(metrics_hist *h, double seconds)
{
    int i = 0;
    if (seconds < 0) seconds = 0;
    while (i < METRICS_BUCKETS && seconds > h->le[i]) i++;
    h->count[i]++;
    h->total++;
    h->sum += seconds;
}

/* ---- the text format ---------------------------------------------------- */

typedef struct out {
    char *p;
    size_t len, cap;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        o->cap *= 2;
        o->p = xrealloc(o->p, o->cap);
    }
}

static void head(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(out *o, const char *name, const char *help, uint64_t v)
{
    head(o, name, "counter", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(out *o, const char *name, const char *help, double v)
{
    head(o, name, "gauge", help);
    put(o, "%s %.15g\n", name, v);
}

/* The series of one histogram; lab: "" or a label pair and a comma
 * ("reason=\"rate\","). */
static void hist_series(out *o, const char *name, const char *lab, const metrics_hist *h)
{
    uint64_t cum = 0;
    size_t n = strlen(lab);
    for (int i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->count[i];
        put(o, "%s_bucket{%sle=\"%g\"} %llu\n", name, lab, h->le[i], (unsigned long long)cum);
    }
    put(o, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, lab, (unsigned long long)h->total);
    put(o, n ? "%s_sum{%.*s} %.15g\n" : "%s_sum%.*s %.15g\n", name, (int)(n ? n - 1 : 0), lab,
        h->sum);
    put(o, n ? "%s_count{%.*s} %llu\n" : "%s_count%.*s %llu\n", name, (int)(n ? n - 1 : 0), lab,
        (unsigned long long)h->total);
}

static void hist(out *o, const char *name, const char *help, const metrics_hist *h)
{
    head(o, name, "histogram", help);
    hist_series(o, name, "", h);
}

/* A label value as the format wants it: \, " and newline escaped. */
static void label(out *o, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') put(o, "\\%c", *v);
        else if (*v == '\n') put(o, "\\n");
        else put(o, "%c", *v);
    }
}

char *metrics_render(const metrics_now *now, size_t *len)
{
    static const char *outcome[MO_COUNT] = {"2xx", "http_error", "timeout", "connect_error",
                                            "denied"};
    const struct tickd_metrics *m = &metrics;
    out o = {xmalloc(8192), 0, 8192};

    head(&o, "tickd_build_info", "gauge", "tickd's version and store; always 1");
    put(&o, "tickd_build_info{version=\"");
    label(&o, now->version);
    put(&o, "\",store=\"");
    label(&o, now->store);
    put(&o, "\"} 1\n");
    gauge(&o, "tickd_start_time_seconds", "When this tickd started, in seconds since the epoch",
          (double)now->start_ms / 1000.0);
    counter(&o, "tickd_tasks_created_total",
            "Tasks stored by this replica (API requests and schedule runs)", m->tasks_created);
    head(&o, "tickd_callback_attempts_total", "counter",
         "Callback attempts made by this replica, by how they ended");
    for (int i = 0; i < MO_COUNT; i++)
        put(&o, "tickd_callback_attempts_total{outcome=\"%s\"} %llu\n", outcome[i],
            (unsigned long long)m->attempts[i]);
    counter(&o, "tickd_tasks_succeeded_total", "Tasks whose callback got a 2xx answer",
            m->succeeded);
    counter(&o, "tickd_tasks_failed_total", "Tasks that ended failed (the dead letters)",
            m->failed);
    counter(&o, "tickd_tasks_cancelled_total", "Tasks cancelled through this replica",
            m->cancelled);
    counter(&o, "tickd_tasks_expired_total",
            "Tasks that ended expired: their expires_at passed before an attempt began",
            m->expired);
    counter(&o, "tickd_task_retries_total", "Failed attempts scheduled to go again", m->retries);
    counter(&o, "tickd_callbacks_deferred_total",
            "Callbacks not made for a reason of tickd's own (out of descriptors, memory or "
            "local ports), tried again without counting an attempt", m->deferred);
    counter(&o, "tickd_callbacks_late_total",
            "Callbacks reached too late to begin within their task's lease: not begun, made "
            "again once the lease is over, without counting an attempt", m->late);
    counter(&o, "tickd_schedule_runs_total", "Schedule runs made into tasks by this replica",
            m->schedule_runs);
    counter(&o, "tickd_redis_errors_total", "Redis commands that failed (error reply, lost "
            "connection, timeout)", now->redis_errors);
    counter(&o, "tickd_redis_reconnects_total", "Redis connections made again after one was "
            "lost", now->redis_reconnects);
    counter(&o, "tickd_store_data_lost_total",
            "Times a Redis master was found without tickd's data (restarted empty, flushed, "
            "failed over to a replica without it): the tasks stored there are gone",
            now->store_data_lost);
    gauge(&o, "tickd_store_refusing_adds",
          "1 while adds are refused because a Redis master may evict keys (maxmemory-policy)",
          now->store_refusing);
    gauge(&o, "tickd_store_evicting_masters",
          "Redis masters whose maxmemory-policy may evict keys, with maxmemory set",
          now->store_evicting);
    gauge(&o, "tickd_store_memory_used_ratio",
          "used_memory / maxmemory of the fullest Redis master (0: no maxmemory)",
          now->store_memory_ratio);
    hist(&o, "tickd_callback_lateness_seconds",
         "From a task's due time to its callback request being sent (for a task a limit held "
         "back, from the time the limit let it go)", &m->lateness);
    hist(&o, "tickd_callback_duration_seconds",
         "From a callback request being sent to its answer's end (or failure)", &m->duration);
    gauge(&o, "tickd_callbacks_in_flight", "Callbacks being made now", now->inflight);
    gauge(&o, "tickd_tasks_held", "Tasks claimed by this replica and not yet recorded",
          now->held);
    gauge(&o, "tickd_api_connections", "Open connections to the HTTP API",
          now->api_connections);
    head(&o, "tickd_flow_held_total", "counter",
         "Callbacks a queue's or destination's limit held back, by reason");
    for (int i = 0; i < 3; i++)
        put(&o, "tickd_flow_held_total{reason=\"%s\"} %llu\n", flow_reasons[i],
            (unsigned long long)m->flow_held[i]);
    head(&o, "tickd_flow_wait_seconds", "histogram",
         "From a held-back task's due time to the time its limit let it go, by reason (not "
         "part of tickd_callback_lateness_seconds)");
    for (int i = 0; i < 3; i++) {
        char lab[40];
        snprintf(lab, sizeof(lab), "reason=\"%s\",", flow_reasons[i]);
        hist_series(&o, "tickd_flow_wait_seconds", lab, &m->flow_wait[i]);
    }
    if (now->flow_waiting >= 0)
        gauge(&o, "tickd_flow_waiting_tasks",
              "Due tasks held back by a limit, in the whole store", (double)now->flow_waiting);
    if (now->scheduled >= 0) {
        gauge(&o, "tickd_tasks_scheduled",
              "Tasks waiting to be due, in the whole store (every replica's, counted every few "
              "seconds)", (double)now->scheduled);
        gauge(&o, "tickd_tasks_scheduled_age_seconds",
              "How old tickd_tasks_scheduled is", now->scheduled_age_s);
    }
    *len = o.len;
    return o.p;
}
