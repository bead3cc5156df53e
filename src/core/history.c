/* history.c -- see history.h. */
#include "core/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"

/* Minutes counted and not yet written: the present one and, across a
 * minute's end, the one before (more only while the loop stalls). */
#define HISTORY_SLOTS 4

typedef struct hist_slot {
    int used;
    store_hist h;
    store_hist_queue queues[STORE_HIST_QUEUES + 1];
} hist_slot;

struct history {
    store *s;
    struct event *ev;
    hist_slot slot[HISTORY_SLOTS];
    int writing;                /* writes under way */
    uint64_t failed;            /* writes that failed */
    log_limit warn;
};

static history *hist_on;

static void history_done_cb(const char *err, void *priv)
{
    history *h = priv;
    h->writing--;
    if (!err) return;
    h->failed++;
    log_warn_limited(&h->warn, util_mono_ms(), "history: a minute's counts not written: %s",
                     err);
}

static void history_write(history *h, hist_slot *sl)
{
    h->writing++;
    store_hist_add(h->s, &sl->h, HISTORY_KEEP_MS, history_done_cb, h);
    sl->used = 0;
}

static void history_flush(history *h)
{
    for (int i = 0; i < HISTORY_SLOTS; i++)
        if (h->slot[i].used) history_write(h, &h->slot[i]);
}

static void history_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    history_flush(arg);
}

/* The slot of the store's present minute (the oldest written at once when
 * every slot is taken). */
static hist_slot *history_slot(history *h)
{
    int64_t minute = store_now_ms(h->s) / 60000;
    hist_slot *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < HISTORY_SLOTS; i++) {
        hist_slot *sl = &h->slot[i];
        if (sl->used && sl->h.minute == minute) return sl;
        if (!sl->used && !free_slot) free_slot = sl;
        if (sl->used && (!oldest || sl->h.minute < oldest->h.minute)) oldest = sl;
    }
    if (!free_slot) {
        history_write(h, oldest);
        free_slot = oldest;
    }
    free_slot->used = 1;
    free_slot->h = (store_hist){.minute = minute, .queues = free_slot->queues};
    return free_slot;
}

history *history_create(struct event_base *base, store *s)
{
    history *h = xcalloc(1, sizeof(*h));
    h->s = s;
    h->ev = event_new(base, -1, EV_PERSIST, history_tick, h);
    struct timeval tv = {HISTORY_FLUSH_MS / 1000, (HISTORY_FLUSH_MS % 1000) * 1000};
    log_assert(h->ev && event_add(h->ev, &tv) == 0);
    hist_on = h;
    return h;
}

void history_attempt(int ok, int64_t late_ms)
{
    if (!hist_on) return;
    hist_slot *sl = history_slot(hist_on);
    if (!ok) sl->h.attempts_failed++;
    if (late_ms < 0) return;
    /* metrics.c's lateness buckets: the first bound at or above, else +Inf */
    int b = 0;
    while (b < METRICS_BUCKETS && (double)late_ms / 1000.0 > metrics.lateness.le[b]) b++;
    sl->h.lateness[b]++;
}

/* The queue a task names, from its spec ("default" when none). */
static void history_queue(const job *j, char out[TASK_QUEUE_MAX])
{
    if (j->queue[0]) {
        snprintf(out, TASK_QUEUE_MAX, "%s", j->queue);
        return;
    }
    cJSON *o = cJSON_Parse(j->spec ? j->spec : "");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "queue");
    snprintf(out, TASK_QUEUE_MAX, "%s",
             cJSON_IsString(q) && task_queue_valid(q->valuestring) ? q->valuestring
                                                                   : TASK_QUEUE_DEFAULT);
    cJSON_Delete(o);
}

void history_outcome(store_outcome o, const job *j)
{
    if (!hist_on) return;
    if (o != OUT_OK && o != OUT_FAIL && o != OUT_EXPIRE && (o != OUT_RETRY || j->uncounted))
        return;
    store_hist *h = &history_slot(hist_on)->h;
    if (o == OUT_OK) h->succeeded++;
    else if (o == OUT_RETRY) h->retried++;
    else if (o == OUT_EXPIRE) h->expired++;
    if (o != OUT_FAIL) return;
    h->failed++;
    char q[TASK_QUEUE_MAX];
    history_queue(j, q);
    /* at most STORE_HIST_QUEUES queues a minute, the rest together (the
     * store holds the same bound over all replicas) */
    int i = 0;
    while (i < h->nqueues && strcmp(h->queues[i].name, q) != 0) i++;
    if (i == h->nqueues && h->nqueues >= STORE_HIST_QUEUES) {
        snprintf(q, sizeof(q), "%s", STORE_HIST_OTHER);
        for (i = 0; i < h->nqueues && strcmp(h->queues[i].name, q) != 0; i++) {}
    }
    if (i == h->nqueues) {
        h->queues[i] = (store_hist_queue){.failed = 0};
        snprintf(h->queues[i].name, sizeof(h->queues[i].name), "%s", q);
        h->nqueues++;
    }
    h->queues[i].failed++;
}

void history_stop(history *h)
{
    if (!h) return;
    event_del(h->ev);
    history_flush(h);
}

int history_idle(const history *h) { return !h || h->writing == 0; }

void history_stats(const history *h, cJSON *obj)
{
    if (h) cJSON_AddNumberToObject(obj, "history_writes_failed", (double)h->failed);
}

void history_free(history *h)
{
    if (!h) return;
    if (hist_on == h) hist_on = NULL;
    event_free(h->ev);
    free(h);
}
