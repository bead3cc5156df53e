/* memstore.c -- see memstore.h. */
#include "memstore.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "util.h"
#include "wheel.h"

typedef struct mtask {
    job j;                  /* j.timer: the next attempt */
    wheel_timer expire;     /* removal after the retention, once final */
    struct mtask *hnext;    /* id index chain */
    uint64_t hash;
    char status[16];
    int attempts;
    int64_t code;           /* 0: none */
    char err[256];
    int64_t fin_ms;
} mtask;

struct memstore {
    struct event_base *base;
    const config *cfg;
    dispatch *d;
    wheel *w;
    struct event *wheel_ev;
    mtask **tab;
    size_t tabsize, count;
    int calling;
    int64_t fired;
};

static int64_t mem_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t memstore_now(void *self)
{
    (void)self;
    return mem_now_ms();
}

static uint64_t mem_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static mtask *mem_find(memstore *m, const char *id)
{
    uint64_t h = mem_hash(id);
    for (mtask *t = m->tab[h & (m->tabsize - 1)]; t; t = t->hnext)
        if (t->hash == h && strcmp(t->j.id, id) == 0) return t;
    return NULL;
}

static void mem_insert(memstore *m, mtask *t)
{
    if (m->count >= m->tabsize) {
        size_t n = m->tabsize * 2;
        mtask **tab = xcalloc(n, sizeof(*tab));
        for (size_t i = 0; i < m->tabsize; i++)
            for (mtask *e = m->tab[i], *next; e; e = next) {
                next = e->hnext;
                e->hnext = tab[e->hash & (n - 1)];
                tab[e->hash & (n - 1)] = e;
            }
        free(m->tab);
        m->tab = tab;
        m->tabsize = n;
    }
    t->hash = mem_hash(t->j.id);
    t->hnext = m->tab[t->hash & (m->tabsize - 1)];
    m->tab[t->hash & (m->tabsize - 1)] = t;
    m->count++;
}

static void mem_remove(memstore *m, mtask *t)
{
    mtask **p = &m->tab[t->hash & (m->tabsize - 1)];
    while (*p && *p != t) p = &(*p)->hnext;
    if (*p) {
        *p = t->hnext;
        m->count--;
    }
}

/* The state JSON, in the same form as the Redis store's (lua/lib.lua). */
static char *mem_state(const mtask *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "s", t->status);
    cJSON_AddNumberToObject(o, "a", t->attempts);
    cJSON_AddNumberToObject(o, "due", (double)t->j.due_ms);
    if (t->code) cJSON_AddNumberToObject(o, "code", (double)t->code);
    if (t->err[0]) cJSON_AddStringToObject(o, "err", t->err);
    if (t->fin_ms) cJSON_AddNumberToObject(o, "fin", (double)t->fin_ms);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) abort();
    return s;
}

/* ---- answers, always from the loop ------------------------------------- */

enum { R_ADD, R_GET, R_CANCEL, R_HEALTH };

typedef struct mreply {
    int kind;
    store_status st;
    char *a, *b, *c;        /* add: id, state; get: spec, state; cancel: detail */
    void *cb, *priv;
} mreply;

static void mem_reply_cb(evutil_socket_t fd, short what, void *arg)
{
    mreply *r = arg;
    (void)fd, (void)what;
    switch (r->kind) {
    case R_ADD: ((store_add_fn *)r->cb)(r->st, r->a, r->b, NULL, r->priv); break;
    case R_GET: ((store_get_fn *)r->cb)(r->st, r->a, r->b, NULL, r->priv); break;
    case R_CANCEL: ((store_cancel_fn *)r->cb)(r->st, r->a, r->priv); break;
    default: ((store_health_fn *)r->cb)(1, NULL, r->priv);
    }
    free(r->a);
    free(r->b);
    free(r);
}

static void mem_reply(memstore *m, int kind, store_status st, char *a, char *b, void *cb,
                      void *priv)
{
    mreply *r = xcalloc(1, sizeof(*r));
    struct timeval tv = {0, 0};
    r->kind = kind;
    r->st = st;
    r->a = a;
    r->b = b;
    r->cb = cb;
    r->priv = priv;
    if (event_base_once(m->base, -1, EV_TIMEOUT, mem_reply_cb, r, &tv) != 0) abort();
}

/* ---- the wheel --------------------------------------------------------- */

static void mem_arm(memstore *m)
{
    uint64_t next = wheel_next_due(m->w);
    if (next == WHEEL_NEVER) {
        event_del(m->wheel_ev);
        return;
    }
    int64_t delay = (int64_t)next - mem_now_ms();
    if (delay < 0) delay = 0;
    struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
    event_add(m->wheel_ev, &tv);
}

static void mem_wheel_cb(evutil_socket_t fd, short what, void *arg)
{
    memstore *m = arg;
    (void)fd, (void)what;
    wheel_advance(m->w, (uint64_t)mem_now_ms());
    mem_arm(m);
}

static void mem_fire(wheel *w, wheel_timer *tm, void *arg)
{
    memstore *m = arg;
    mtask *t = (mtask *)((char *)tm - offsetof(mtask, j) - offsetof(job, timer));
    (void)w;
    snprintf(t->status, sizeof(t->status), "running");
    t->j.attempt = t->attempts + 1;
    m->calling++;
    m->fired++;
    dispatch_submit(m->d, &t->j);
}

static void mem_expire(wheel *w, wheel_timer *tm, void *arg)
{
    memstore *m = arg;
    mtask *t = (mtask *)((char *)tm - offsetof(mtask, expire));
    (void)w;
    mem_remove(m, t);
    free(t->j.spec);
    free(t);
}

static void mem_final(memstore *m, mtask *t, const char *status)
{
    snprintf(t->status, sizeof(t->status), "%s", status);
    t->fin_ms = mem_now_ms();
    wheel_add(m->w, &t->expire, NULL, (uint64_t)(t->fin_ms + m->cfg->retention_ms), 0, 1);
}

void memstore_on_done(memstore *m, job *j)
{
    mtask *t = (mtask *)((char *)j - offsetof(mtask, j));
    m->calling--;
    if (j->aborted) {
        /* stopping: the memory store has nowhere to keep it */
        snprintf(t->status, sizeof(t->status), "scheduled");
        return;
    }
    if (j->uncounted) j->attempt--; /* not an attempt: see sched_on_done */
    t->attempts = j->attempt;
    if (!j->ok || j->err[0]) {
        t->code = j->status_code;
        snprintf(t->err, sizeof(t->err), "%s", j->err);
    }
    if (j->ok) {
        mem_final(m, t, "succeeded");
    } else if (!j->uncounted && (j->permanent || j->attempt >= j->max_attempts)) {
        mem_final(m, t, "failed");
    } else {
        double jitter = (double)(random() % 1000) / 1000.0;
        j->due_ms = mem_now_ms() + (j->uncounted ? UNCOUNTED_RETRY_MS + random() % UNCOUNTED_RETRY_MS
                                                 : task_backoff_ms(j->backoff_ms, j->attempt, jitter));
        snprintf(t->status, sizeof(t->status), "scheduled");
        wheel_add(m->w, &j->timer, NULL, (uint64_t)j->due_ms, 0, 1);
    }
    mem_arm(m);
}

/* ---- the API backend --------------------------------------------------- */

void memstore_add(void *self, const task_input *ti, store_add_fn *cb, void *priv)
{
    memstore *m = self;
    char slice[TASK_SLICE_MAX], id[TASK_ID_MAX];
    int64_t now = mem_now_ms();
    /* the Redis store's rule, so both give the same ids */
    task_slice_name(task_home_ms(ti->execute_at_ms, now, m->cfg->slice_grace_ms),
                    task_bucket(ti->key, (int)m->cfg->buckets), slice);
    task_id_make(slice, ti->execute_at_ms, ti->key, id, sizeof(id));
    mtask *t = mem_find(m, id);
    if (t) {
        mem_reply(m, R_ADD, ST_EXISTS, xstrdup(id), mem_state(t), (void *)cb, priv);
        return;
    }
    t = xcalloc(1, sizeof(*t));
    snprintf(t->j.id, sizeof(t->j.id), "%s", id);
    snprintf(t->j.home, sizeof(t->j.home), "%s", slice);
    snprintf(t->j.src, sizeof(t->j.src), "%s", slice);
    snprintf(t->status, sizeof(t->status), "scheduled");
    t->j.due_ms = ti->due_ms;
    t->j.spec = xstrdup(ti->spec);
    wheel_timer_init(&t->j.timer, mem_fire, m);
    wheel_timer_init(&t->expire, mem_expire, m);
    mem_insert(m, t);
    wheel_add(m->w, &t->j.timer, NULL, (uint64_t)t->j.due_ms, 0, 1);
    mem_arm(m);
    mem_reply(m, R_ADD, ST_OK, xstrdup(id), mem_state(t), (void *)cb, priv);
}

void memstore_get(void *self, const char *id, store_get_fn *cb, void *priv)
{
    memstore *m = self;
    mtask *t = mem_find(m, id);
    if (!t) mem_reply(m, R_GET, ST_NOTFOUND, NULL, NULL, (void *)cb, priv);
    else mem_reply(m, R_GET, ST_OK, xstrdup(t->j.spec), mem_state(t), (void *)cb, priv);
}

void memstore_cancel(void *self, const char *id, store_cancel_fn *cb, void *priv)
{
    memstore *m = self;
    mtask *t = mem_find(m, id);
    if (!t) {
        mem_reply(m, R_CANCEL, ST_NOTFOUND, NULL, NULL, (void *)cb, priv);
    } else if (strcmp(t->status, "cancelled") == 0) {
        mem_reply(m, R_CANCEL, ST_OK, NULL, NULL, (void *)cb, priv);
    } else if (strcmp(t->status, "scheduled") != 0) {
        mem_reply(m, R_CANCEL, ST_CONFLICT, xstrdup(t->status), NULL, (void *)cb, priv);
    } else {
        wheel_cancel(m->w, &t->j.timer);
        mem_final(m, t, "cancelled");
        mem_arm(m);
        mem_reply(m, R_CANCEL, ST_OK, NULL, NULL, (void *)cb, priv);
    }
}

void memstore_health(void *self, store_health_fn *cb, void *priv)
{
    mem_reply(self, R_HEALTH, ST_OK, NULL, NULL, (void *)cb, priv);
}

int memstore_calling(const memstore *m) { return m->calling; }

void memstore_stats(void *self, cJSON *obj)
{
    memstore *m = self;
    cJSON_AddNumberToObject(obj, "fired", (double)m->fired);
    cJSON_AddNumberToObject(obj, "tasks", (double)m->count);
    cJSON_AddNumberToObject(obj, "calling", m->calling);
    if (m->d) cJSON_AddNumberToObject(obj, "hosts", (double)dispatch_hosts(m->d));
}

memstore *memstore_create(struct event_base *base, const config *cfg)
{
    memstore *m = xcalloc(1, sizeof(*m));
    m->base = base;
    m->cfg = cfg;
    m->w = wheel_create(1, (uint64_t)mem_now_ms());
    if (!m->w) abort();
    m->wheel_ev = evtimer_new(base, mem_wheel_cb, m);
    if (m->wheel_ev) event_priority_set(m->wheel_ev, 0); /* as in sched.c */
    m->tabsize = 1024;
    m->tab = xcalloc(m->tabsize, sizeof(*m->tab));
    return m;
}

void memstore_set_dispatch(memstore *m, dispatch *d) { m->d = d; }

void memstore_free(memstore *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->tabsize; i++)
        for (mtask *t = m->tab[i], *n; t; t = n) {
            n = t->hnext;
            free(t->j.spec);
            free(t);
        }
    free(m->tab);
    wheel_free(m->w);
    event_free(m->wheel_ev);
    free(m);
}
