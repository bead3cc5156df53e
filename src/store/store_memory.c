/* store_memory.c -- the memory store (store.h, `--store memory`): the Redis
 * store's model (slices, leases, watermarks) kept in this process. NOT
 * durable: a restart loses every task. For development and tests, and the
 * reference the Redis store is held to by tests/unit/test_store.c.
 *
 * Tasks are indexed by id; each not-final task is on the list of the slice
 * holding its due entry or its lease. A claim walks its slice's list (a
 * slice holds one minute of one bucket). Final tasks wait on a FIFO for the
 * retention to end. Every answer runs from the loop (mem_defer). */
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/schedule.h"
#include "base/util.h"

typedef struct mslice mslice;

typedef struct mtask {
    struct mtask *hnext;        /* id index chain */
    struct mtask *snext, *sprev;/* its slice's list */
    struct mtask *fnext;        /* finals, oldest first */
    mslice *slice;              /* NULL: final */
    uint32_t hash;
    char id[TASK_ID_MAX];
    char home[TASK_SLICE_MAX];
    char *spec;
    char status[16];
    int attempts;
    int64_t due_ms, timeout_ms;
    int64_t lease_ms;           /* leased until then; 0: due */
    int64_t code;               /* 0: none */
    char err[512];
    int64_t fin_ms;
    cJSON *hist;                /* the last STORE_HISTORY attempts (NULL: none) */
} mtask;

struct mslice {
    mslice *hnext;
    uint32_t hash;
    char name[TASK_SLICE_MAX];
    mtask *head;
    int64_t ndue, nrun;
};

#define SLICE_TAB 4096

typedef struct mdefer mdefer;

typedef struct mstore {
    store base;
    struct event_base *ev;
    mtask **tab;
    size_t tabsize, count;
    mslice *slices[SLICE_TAB];
    mtask *fin_head, *fin_tail;
    int64_t *wm;                /* per bucket; -1: none */
    mdefer *defer_head, **defer_tail;
    struct event *defer_ev;
    struct msch *schedules;
    struct mconsole *console;   /* history and replicas (the end of this file) */
    store_clock_fn *clock;      /* every "now" of this store; NULL: the real clock */
    void *clock_priv;
} mstore;

/* A schedule: its definition and its state object (the keys of store.h);
 * `at` is its index score, as the Redis store's :snext (-1: not indexed). */
typedef struct msch {
    struct msch *next;
    char *id, *def;
    int bucket;
    cJSON *st;
    int64_t at;
} msch;

static void ms_sch_free(msch *c);
static void ms_console_free(mstore *m);

#define MS(s) container_of(s, mstore, base)

/* The store's one clock: every "now" below is read here. */
static int64_t ms_now_us(const store *s)
{
    const mstore *m = MS(s);
    return m->clock ? m->clock(m->clock_priv) * 1000 : util_realtime_us();
}

static int64_t ms_now_ms(const store *s)
{
    return ms_now_us(s) / 1000;
}

/* ---- answers, always from the loop ------------------------------------- */

enum { R_ADD, R_GET, R_CANCEL, R_HEALTH, R_CLAIM, R_SETTLED, R_WM, R_COUNT, R_SCH, R_SCHLIST, R_LIST };

struct mdefer {
    mdefer *next;
    int kind;
    store_status st;
    char *a, *b;                /* add: id, state; get: spec, state; cancel: detail */
    int64_t v;                  /* wm */
    store_claim claim;
    store_schedule *items;      /* R_SCH: one; R_SCHLIST: n (strings owned) */
    char **ids;                 /* R_LIST: nitems ids (owned) */
    int nitems;
    void *owner;
    void *cb, *priv;
};

static void ms_free_items(mdefer *r)
{
    if (r->ids) {
        for (int i = 0; i < r->nitems; i++) free(r->ids[i]);
        free(r->ids);
        r->ids = NULL;
        r->nitems = 0;
        return;
    }
    for (int i = 0; i < r->nitems; i++) {
        free((char *)r->items[i].id);
        free((char *)r->items[i].def);
        free((char *)r->items[i].state);
        free((char *)r->items[i].prev);
    }
    free(r->items);
}

static void ms_defer_cb(evutil_socket_t fd, short what, void *arg)
{
    mstore *m = arg;
    mdefer *list = m->defer_head;
    (void)fd, (void)what;
    m->defer_head = NULL;
    m->defer_tail = &m->defer_head;
    for (mdefer *r = list, *next; r; r = next) {
        next = r->next;
        switch (r->kind) {
        case R_ADD: ((store_add_fn *)r->cb)(r->st, r->a, r->b, NULL, r->priv); break;
        case R_GET: ((store_get_fn *)r->cb)(r->st, r->a, r->b, NULL, r->priv); break;
        case R_CANCEL: ((store_cancel_fn *)r->cb)(r->st, r->a, r->priv); break;
        case R_HEALTH: ((store_health_fn *)r->cb)(1, NULL, r->priv); break;
        case R_CLAIM:
            ((store_claim_fn *)r->cb)(&r->claim, r->priv);
            free(r->claim.leases);
            break;
        case R_SETTLED: ((store_settled_fn *)r->cb)(r->owner, NULL, r->priv); break;
        case R_SCH:
            ((store_sch_fn *)r->cb)(r->st, r->st == ST_NOTFOUND ? NULL : r->items, NULL, r->priv);
            break;
        case R_SCHLIST: ((store_sch_list_fn *)r->cb)(r->items, r->nitems, NULL, r->priv); break;
        case R_LIST:
            ((store_list_fn *)r->cb)((const char *const *)r->ids, r->nitems, r->a, NULL, r->priv);
            break;
        default: ((store_wm_fn *)r->cb)(r->v, NULL, r->priv);
        }
        ms_free_items(r);
        free(r->a);
        free(r->b);
        free(r);
    }
}

static mdefer *ms_defer(mstore *m, int kind, void *cb, void *priv)
{
    mdefer *r = xcalloc(1, sizeof(*r));
    r->kind = kind;
    r->cb = cb;
    r->priv = priv;
    if (!m->defer_head) event_active(m->defer_ev, EV_READ, 0);
    *m->defer_tail = r;
    m->defer_tail = &r->next;
    return r;
}

/* ---- the index and the slices ------------------------------------------ */

static uint32_t ms_hash(const char *s)
{
    return util_fnv1a(s, strlen(s));
}

static mtask *ms_find(mstore *m, const char *id)
{
    uint32_t h = ms_hash(id);
    for (mtask *t = m->tab[h & (m->tabsize - 1)]; t; t = t->hnext)
        if (t->hash == h && strcmp(t->id, id) == 0) return t;
    return NULL;
}

static void ms_insert(mstore *m, mtask *t)
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
    t->hash = ms_hash(t->id);
    t->hnext = m->tab[t->hash & (m->tabsize - 1)];
    m->tab[t->hash & (m->tabsize - 1)] = t;
    m->count++;
}

static void ms_remove(mstore *m, mtask *t)
{
    mtask **p = &m->tab[t->hash & (m->tabsize - 1)];
    while (*p && *p != t) p = &(*p)->hnext;
    if (*p) {
        *p = t->hnext;
        m->count--;
    }
}

static mslice *ms_slice(mstore *m, const char *name, int create)
{
    uint32_t h = ms_hash(name);
    mslice **b = &m->slices[h % SLICE_TAB];
    for (mslice *s = *b; s; s = s->hnext)
        if (s->hash == h && strcmp(s->name, name) == 0) return s;
    if (!create) return NULL;
    mslice *s = xcalloc(1, sizeof(*s));
    s->hash = h;
    util_copy(s->name, sizeof(s->name), name);
    s->hnext = *b;
    *b = s;
    return s;
}

static void ms_unlink(mstore *m, mtask *t)
{
    mslice *s = t->slice;
    if (!s) return;
    if (t->sprev) t->sprev->snext = t->snext;
    else s->head = t->snext;
    if (t->snext) t->snext->sprev = t->sprev;
    if (t->lease_ms) s->nrun--;
    else s->ndue--;
    t->snext = t->sprev = NULL;
    t->slice = NULL;
    if (!s->head) {
        mslice **p = &m->slices[s->hash % SLICE_TAB];
        while (*p != s) p = &(*p)->hnext;
        *p = s->hnext;
        free(s);
    }
}

/* Put t on slice `name`'s list: due at t->due_ms, or leased (lease_ms). */
static void ms_link(mstore *m, mtask *t, const char *name)
{
    mslice *s = ms_slice(m, name, 1);
    t->slice = s;
    t->sprev = NULL;
    t->snext = s->head;
    if (s->head) s->head->sprev = t;
    s->head = t;
    if (t->lease_ms) s->nrun++;
    else s->ndue++;
}

/* Move a slice member between due and leased. */
static void ms_set_lease(mtask *t, int64_t lease_ms)
{
    if (t->slice) {
        if (t->lease_ms) t->slice->nrun--;
        else t->slice->ndue--;
        if (lease_ms) t->slice->nrun++;
        else t->slice->ndue++;
    }
    t->lease_ms = lease_ms;
}

static void ms_free_task(mtask *t)
{
    cJSON_Delete(t->hist);
    free(t->spec);
    free(t);
}

/* Finished tasks are forgotten after the retention. */
static void ms_expire(mstore *m, int64_t now)
{
    const config *cfg = m->base.cfg;
    /* a failed or expired task keeps the ones after it (bounded by failed_retention_ms) */
    while (m->fin_head &&
           m->fin_head->fin_ms + (strcmp(m->fin_head->status, "failed") == 0 ||
                                          strcmp(m->fin_head->status, "expired") == 0
                                      ? cfg->failed_retention_ms : cfg->retention_ms) <= now) {
        mtask *t = m->fin_head;
        m->fin_head = t->fnext;
        if (!m->fin_head) m->fin_tail = NULL;
        ms_remove(m, t);
        ms_free_task(t);
    }
}

static void ms_final(mstore *m, mtask *t, const char *status, int64_t now)
{
    ms_unlink(m, t);
    util_copy(t->status, sizeof(t->status), status);
    t->fin_ms = now;
    t->lease_ms = 0;
    t->fnext = NULL;
    if (m->fin_tail) m->fin_tail->fnext = t;
    else m->fin_head = t;
    m->fin_tail = t;
}

/* The state JSON, in the same form as the Redis store's (lua/lib.lua). */
static char *ms_state(const mtask *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "s", t->status);
    cJSON_AddNumberToObject(o, "a", t->attempts);
    cJSON_AddNumberToObject(o, "due", (double)t->due_ms);
    cJSON_AddNumberToObject(o, "to", (double)t->timeout_ms);
    if (t->code) cJSON_AddNumberToObject(o, "code", (double)t->code);
    if (t->err[0]) cJSON_AddStringToObject(o, "err", t->err);
    if (t->fin_ms) cJSON_AddNumberToObject(o, "fin", (double)t->fin_ms);
    if (t->hist) cJSON_AddItemToObject(o, "h", cJSON_Duplicate(t->hist, 1));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    log_assert(s);
    return s;
}

/* ---- API operations ---------------------------------------------------- */

static void ms_add(store *s, const task_input *ti, store_add_fn *cb, void *priv)
{
    mstore *m = MS(s);
    char id[TASK_ID_MAX], slice[TASK_SLICE_MAX];
    int64_t now = ms_now_ms(s);
    ms_expire(m, now);
    /* the Redis store's rule for a given key, so both give the same ids */
    task_slice_name(task_home_ms(ti->execute_at_ms, ti->home_now_ms ? ti->home_now_ms : now,
                                 s->cfg->slice_grace_ms),
                    task_bucket(ti->key, (int)s->cfg->buckets), slice);
    task_id_make(slice, ti->execute_at_ms, ti->key, id, sizeof(id));
    mtask *t = ms_find(m, id);
    mdefer *r = ms_defer(m, R_ADD, (void *)cb, priv);
    if (t) {
        r->st = ST_EXISTS;
        r->a = xstrdup(id);
        r->b = ms_state(t);
        return;
    }
    t = xcalloc(1, sizeof(*t));
    util_copy(t->id, sizeof(t->id), id);
    util_copy(t->home, sizeof(t->home), slice);
    snprintf(t->status, sizeof(t->status), "scheduled");
    t->due_ms = ti->due_ms;
    t->timeout_ms = ti->timeout_ms;
    t->spec = task_input_spec(ti);
    ms_insert(m, t);
    ms_link(m, t, slice);
    r->st = ST_OK;
    r->a = xstrdup(id);
    if (s->added) s->added(task_slice_bucket(slice), t->due_ms, s->added_priv);
}

static void ms_get(store *s, const char *id, store_get_fn *cb, void *priv)
{
    mstore *m = MS(s);
    ms_expire(m, ms_now_ms(s));
    mtask *t = ms_find(m, id);
    mdefer *r = ms_defer(m, R_GET, (void *)cb, priv);
    r->st = t ? ST_OK : ST_NOTFOUND;
    if (t) {
        r->a = xstrdup(t->spec);
        r->b = ms_state(t);
    }
}

static void ms_cancel(store *s, const char *id, store_cancel_fn *cb, void *priv)
{
    mstore *m = MS(s);
    int64_t now = ms_now_ms(s);
    ms_expire(m, now);
    mtask *t = ms_find(m, id);
    mdefer *r = ms_defer(m, R_CANCEL, (void *)cb, priv);
    if (!t) {
        r->st = ST_NOTFOUND;
    } else if (strcmp(t->status, "cancelled") == 0) {
        r->st = ST_OK;
    } else if (strcmp(t->status, "scheduled") != 0) {
        r->st = ST_CONFLICT;
        r->a = xstrdup(t->status);
    } else {
        ms_final(m, t, "cancelled", now);
        r->st = ST_OK;
    }
}

static void ms_health(store *s, store_health_fn *cb, void *priv)
{
    ms_defer(MS(s), R_HEALTH, (void *)cb, priv);
}

/* ---- the scheduler's operations ---------------------------------------- */

typedef struct cand {
    mtask *t;
    int64_t key;    /* expired leases first, then by due */
} cand;

static int cand_cmp(const void *a, const void *b)
{
    int64_t x = ((const cand *)a)->key, y = ((const cand *)b)->key;
    return x < y ? -1 : x > y;
}

static void ms_claim(store *s, int bucket, int64_t minute, const store_claim_ask *ask,
                     store_claim_fn *cb, void *priv)
{
    mstore *m = MS(s);
    char name[TASK_SLICE_MAX];
    int64_t now = ms_now_ms(s), horizon = now + ask->reach_ms;
    mdefer *r = ms_defer(m, R_CLAIM, (void *)cb, priv);
    store_claim *res = &r->claim;
    task_slice_name(minute * 60000, bucket, name);
    mslice *sl = ms_slice(m, name, 0);
    if (!sl) return;
    cand *c = xmalloc(sizeof(*c) * (size_t)(sl->ndue + sl->nrun + 1));
    int n = 0;
    for (mtask *t = sl->head; t; t = t->snext) {
        if (t->lease_ms && t->lease_ms <= now) c[n++] = (cand){t, INT64_MIN};
        else if (!t->lease_ms && t->due_ms < horizon) c[n++] = (cand){t, t->due_ms};
    }
    qsort(c, (size_t)n, sizeof(*c), cand_cmp);
    int limit = ask->limit, far = 0;
    for (int i = 0; i < n && i < limit; i++)
        if (c[i].key >= now + ask->near_ms && ++far > ask->far_limit) limit = i;
    if (n > limit) n = limit;
    res->taken = n;
    res->leases = xmalloc(sizeof(*res->leases) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        mtask *t = c[i].t;
        int64_t due = t->lease_ms ? now : t->due_ms;
        /* the id's own record decides: only scheduled tasks, or those whose
         * lease ran out while running, are leased */
        if (strcmp(t->status, "scheduled") != 0 &&
            !(t->lease_ms && strcmp(t->status, "running") == 0)) {
            ms_unlink(m, t);
            continue;
        }
        snprintf(t->status, sizeof(t->status), "running");
        ms_set_lease(t, (due > now ? due : now) + t->timeout_ms + s->cfg->lease_margin_ms);
        store_lease *l = &res->leases[res->n++];
        l->id = t->id;
        l->due_ms = t->due_ms;
        l->attempt = t->attempts + 1;
        l->spec = task_spec_read(t->spec, strlen(t->spec));
    }
    free(c);
    /* the slice may have gone with its last member */
    sl = ms_slice(m, name, 0);
    res->due_left = sl ? sl->ndue : 0;
    res->run_left = sl ? sl->nrun : 0;
}

static void ms_settle(store *s, const store_attempt *as, int n, store_settled_fn *cb, void *priv)
{
    mstore *m = MS(s);
    int64_t now = ms_now_ms(s);
    for (int i = 0; i < n; i++) {
        const store_attempt *a = &as[i];
        mtask *t = ms_find(m, a->id);
        ms_defer(m, R_SETTLED, (void *)cb, priv)->owner = a->owner;
        /* not running: a duplicate, settled already */
        if (!t || strcmp(t->status, "running") != 0) continue;
        if (a->outcome == OUT_RELEASE) {
            snprintf(t->status, sizeof(t->status), "scheduled");
            ms_set_lease(t, 0);
            continue;
        }
        t->attempts = a->attempt;
        if (a->sent_at_ms) {
            /* the history entry, as settle.lua writes it */
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "t", (double)a->sent_at_ms);
            cJSON_AddNumberToObject(e, "ms", (double)a->took_ms);
            if (a->status_code) cJSON_AddNumberToObject(e, "c", (double)a->status_code);
            if (a->err[0]) cJSON_AddStringToObject(e, "e", a->err);
            if (a->answer_len) {
                char *b = xstrndup(a->answer, a->answer_len);
                cJSON_AddStringToObject(e, "b", b);
                free(b);
            }
            if (!t->hist) t->hist = cJSON_CreateArray();
            cJSON_AddItemToArray(t->hist, e);
            if (cJSON_GetArraySize(t->hist) > STORE_HISTORY) cJSON_DeleteItemFromArray(t->hist, 0);
        }
        /* as settle.lua: a success keeps its status only when its body was
         * cut off; an attempt with no status or error keeps the last ones */
        if (a->status_code && (a->outcome != OUT_OK || a->err[0])) t->code = a->status_code;
        if (a->err[0]) snprintf(t->err, sizeof(t->err), "%s", a->err);
        if (a->outcome == OUT_RETRY) {
            char next[TASK_SLICE_MAX];
            task_slice_name(a->due_ms, task_slice_bucket(t->home), next);
            ms_unlink(m, t);
            snprintf(t->status, sizeof(t->status), "scheduled");
            t->due_ms = a->due_ms;
            t->lease_ms = 0;
            ms_link(m, t, next);
        } else {
            ms_final(m, t, a->outcome == OUT_OK       ? "succeeded"
                           : a->outcome == OUT_EXPIRE ? "expired"
                                                      : "failed",
                     now);
        }
    }
}

static int ms_wm_init(store *s, int64_t minute, char *err, size_t errlen)
{
    mstore *m = MS(s);
    (void)err, (void)errlen;
    for (int b = 0; b < (int)s->cfg->buckets; b++)
        if (m->wm[b] < 0) m->wm[b] = minute;
    return 0;
}

static void ms_wm_get(store *s, int bucket, store_wm_fn *cb, void *priv)
{
    mstore *m = MS(s);
    ms_defer(m, R_WM, (void *)cb, priv)->v = m->wm[bucket];
}

static void ms_wm_advance(store *s, int bucket, int64_t from, int64_t to, store_wm_fn *cb,
                          void *priv)
{
    mstore *m = MS(s);
    if (m->wm[bucket] == from && to > from) m->wm[bucket] = to;
    ms_defer(m, R_WM, (void *)cb, priv)->v = m->wm[bucket];
}

static void ms_sync_clock(store *s)
{
    (void)s;
}

static void ms_count(store *s, store_count_fn *cb, void *priv)
{
    mstore *m = MS(s);
    int64_t n = 0;
    for (int i = 0; i < SLICE_TAB; i++)
        for (const mslice *sl = m->slices[i]; sl; sl = sl->hnext) n += sl->ndue;
    ms_defer(m, R_COUNT, (void *)cb, priv)->v = n; /* answered as R_WM: the same signature */
}

static void ms_counters(const store *s, store_counters *out)
{
    (void)s;
    *out = (store_counters){0, 0};
}

static void ms_stats(const store *s, cJSON *obj)
{
    cJSON_AddNumberToObject(obj, "tasks", (double)MS(s)->count);
}

static void ms_close(store *s)
{
    (void)s;
}

static void ms_free(store *s)
{
    mstore *m = MS(s);
    for (size_t i = 0; i < m->tabsize; i++)
        for (mtask *t = m->tab[i], *n; t; t = n) {
            n = t->hnext;
            ms_free_task(t);
        }
    for (int i = 0; i < SLICE_TAB; i++)
        for (mslice *sl = m->slices[i], *n; sl; sl = n) {
            n = sl->hnext;
            free(sl);
        }
    for (mdefer *r = m->defer_head, *n; r; r = n) {
        n = r->next;
        if (r->kind == R_CLAIM) {
            for (int i = 0; i < r->claim.n; i++) task_spec_free(r->claim.leases[i].spec);
            free(r->claim.leases);
        }
        ms_free_items(r);
        free(r->a);
        free(r->b);
        free(r);
    }
    for (msch *c = m->schedules, *n; c; c = n) {
        n = c->next;
        ms_sch_free(c);
    }
    ms_console_free(m);
    free(m->tab);
    free(m->wm);
    event_free(m->defer_ev);
    free(m);
}

/* ---- finding tasks, running them again ---------------------------------- */

/* A task's place in a listing: its slice, score and id, as the Redis store's
 * lua/list.lua orders them. Finished tasks sit in their home slice. */
typedef struct mpos {
    int64_t minute;
    char slice[TASK_SLICE_MAX];
    int64_t score;
    const char *id;
} mpos;

static int mpos_cmp(const mpos *a, const mpos *b)
{
    if (a->minute != b->minute) return a->minute < b->minute ? -1 : 1;
    int c = strcmp(a->slice, b->slice);
    if (c) return c;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    return strcmp(a->id, b->id);
}

static int mpos_qcmp(const void *a, const void *b) { return mpos_cmp(a, b); }

/* Parse a cursor "<slice>~<score>~<id>"; 0 or -1. */
static int ms_cursor(const char *c, mpos *p, char *id, size_t idlen)
{
    const char *a = strchr(c, '~'), *b = a ? strchr(a + 1, '~') : NULL;
    if (!a || !b || (size_t)(a - c) >= TASK_SLICE_MAX) return -1;
    snprintf(p->slice, sizeof(p->slice), "%.*s", (int)(a - c), c);
    p->minute = task_slice_minute(p->slice);
    p->score = strtoll(a + 1, NULL, 10);
    util_copy(id, idlen, b + 1);
    p->id = id;
    return p->minute < 0 ? -1 : 0;
}

static void ms_list(store *s, const store_list_query *q, store_list_fn *cb, void *priv)
{
    mstore *m = MS(s);
    ms_expire(m, ms_now_ms(s));
    mpos *v = xmalloc(sizeof(*v) * (m->count ? m->count : 1)), after;
    char after_id[TASK_ID_MAX];
    int has_after = q->cursor[0] && ms_cursor(q->cursor, &after, after_id, sizeof(after_id)) == 0;
    size_t n = 0, plen = strlen(q->key_prefix);
    for (size_t i = 0; i < m->tabsize; i++)
        for (mtask *t = m->tab[i]; t; t = t->hnext) {
            int running = strcmp(t->status, "running") == 0;
            if (strcmp(t->status, q->status) != 0) continue;
            char sl[TASK_SLICE_MAX], key[TASK_KEY_MAX + 1];
            int64_t at;
            if (task_id_parse(t->id, sl, &at, key) != 0) continue;
            if ((q->from_ms >= 0 && at < q->from_ms) || (q->to_ms >= 0 && at >= q->to_ms) ||
                strncmp(key, q->key_prefix, plen) != 0 ||
                (q->runs && (!key[plen] || strspn(key + plen, "0123456789") != strlen(key + plen))))
                continue;
            mpos *p = &v[n++];
            util_copy(p->slice, sizeof(p->slice), t->slice ? t->slice->name : t->home);
            p->minute = task_slice_minute(p->slice);
            p->score = t->slice ? (running ? t->lease_ms : t->due_ms) : t->fin_ms;
            p->id = t->id;
        }
    qsort(v, n, sizeof(*v), mpos_qcmp);
    mdefer *r = ms_defer(m, R_LIST, (void *)cb, priv);
    r->ids = xcalloc((size_t)q->limit + 1, sizeof(char *));
    size_t last = 0;
    for (size_t k = 0; k < n && r->nitems < q->limit; k++) {
        size_t i = q->desc ? n - 1 - k : k;
        if (has_after && (q->desc ? mpos_cmp(&v[i], &after) >= 0 : mpos_cmp(&v[i], &after) <= 0))
            continue;
        r->ids[r->nitems++] = xstrdup(v[i].id);
        last = i;
    }
    if (r->nitems == q->limit) {
        char cur[STORE_CURSOR_MAX];
        snprintf(cur, sizeof(cur), "%s~%lld~%s", v[last].slice, (long long)v[last].score,
                 v[last].id);
        r->a = xstrdup(cur);
    }
    free(v);
}

static void ms_move(store *s, const char *id, store_move_kind kind, int64_t due_ms,
                    store_cancel_fn *cb, void *priv)
{
    mstore *m = MS(s);
    int64_t now = ms_now_ms(s);
    ms_expire(m, now);
    mtask *t = ms_find(m, id);
    mdefer *r = ms_defer(m, R_CANCEL, (void *)cb, priv);
    int ok = t && (kind == MOVE_RETRY ? strcmp(t->status, "failed") == 0 ||
                                            strcmp(t->status, "cancelled") == 0
                                      : strcmp(t->status, "scheduled") == 0);
    if (!t) {
        r->st = ST_NOTFOUND;
        return;
    }
    if (!ok) {
        r->st = ST_CONFLICT;
        r->a = xstrdup(t->status);
        return;
    }
    int64_t exp = task_spec_expires_ms(t->spec);
    if (kind == MOVE_RETRY && exp > 0 && due_ms >= exp) {
        /* never called after its expiry (as move.lua) */
        r->st = ST_CONFLICT;
        r->a = xstrdup(STORE_PAST_EXPIRY);
        return;
    }
    if (kind == MOVE_RETRY) {
        /* off the finals' list */
        mtask **pp = &m->fin_head, *prev = NULL;
        while (*pp && *pp != t) {
            prev = *pp;
            pp = &(*pp)->fnext;
        }
        if (*pp) {
            *pp = t->fnext;
            if (m->fin_tail == t) m->fin_tail = prev;
        }
        t->attempts = 0;
        t->fin_ms = 0;
        snprintf(t->status, sizeof(t->status), "scheduled");
    } else {
        ms_unlink(m, t);
    }
    char slice[TASK_SLICE_MAX];
    t->due_ms = due_ms;
    t->lease_ms = 0;
    task_slice_name(due_ms < now ? now : due_ms, task_slice_bucket(t->home), slice);
    ms_link(m, t, slice);
    r->st = ST_OK;
    if (s->added) s->added(task_slice_bucket(slice), t->due_ms, s->added_priv);
}

/* ---- schedules: the Redis store's lua/sched.lua, on a list ------------- */

static void ms_sch_free(msch *c)
{
    free(c->id);
    free(c->def);
    cJSON_Delete(c->st);
    free(c);
}

static msch *ms_sch_find(mstore *m, const char *id)
{
    for (msch *c = m->schedules; c; c = c->next)
        if (strcmp(c->id, id) == 0) return c;
    return NULL;
}

static int64_t ms_num(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

static const char *ms_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void ms_set(cJSON *o, const char *k, cJSON *v)
{
    if (cJSON_GetObjectItemCaseSensitive(o, k)) cJSON_ReplaceItemInObjectCaseSensitive(o, k, v);
    else cJSON_AddItemToObject(o, k, v);
}

static void ms_setn(cJSON *o, const char *k, int64_t v)
{
    ms_set(o, k, cJSON_CreateNumber((double)v));
}

static void ms_sets(cJSON *o, const char *k, const char *v)
{
    ms_set(o, k, cJSON_CreateString(v));
}

/* Write back: the index follows the state, unless a runner holds it. */
static void ms_sch_store(msch *c)
{
    cJSON *fut = cJSON_GetObjectItemCaseSensitive(c->st, "fut");
    if (fut && cJSON_GetArraySize(fut) == 0) cJSON_DeleteItemFromObjectCaseSensitive(c->st, "fut");
    if (cJSON_GetObjectItemCaseSensitive(c->st, "ct")) return;
    int64_t next = ms_num(c->st, "next", -1);
    c->at = strcmp(ms_str(c->st, "st"), "active") == 0 && next >= 0 ? next : -1;
}

static store_schedule ms_sch_copy(const msch *c, const char *prev)
{
    return (store_schedule){xstrdup(c->id), xstrdup(c->def), cJSON_PrintUnformatted(c->st),
                            prev ? xstrdup(prev) : NULL};
}

static void ms_sch_answer(mstore *m, store_sch_fn *cb, void *priv, store_status st,
                          const msch *c, const char *prev)
{
    mdefer *r = ms_defer(m, R_SCH, (void *)cb, priv);
    r->st = st;
    if (c) {
        r->items = xcalloc(1, sizeof(*r->items));
        r->items[0] = ms_sch_copy(c, prev);
        r->nitems = 1;
    }
}

static void ms_sch_write(store *s, store_sch_op op, const char *id, const char *def,
                         int64_t next, store_sch_fn *cb, void *priv)
{
    mstore *m = MS(s);
    msch *c = ms_sch_find(m, id);
    if (op == SCH_CREATE) {
        if (c) {
            ms_sch_answer(m, cb, priv, strcmp(c->def, def) == 0 ? ST_EXISTS : ST_CONFLICT, c, NULL);
            return;
        }
        const char *key = schedule_id_key(id);
        c = xcalloc(1, sizeof(*c));
        c->id = xstrdup(id);
        c->def = xstrdup(def);
        c->bucket = key ? task_bucket(key, (int)s->cfg->buckets) : 0;
        c->st = cJSON_CreateObject();
        ms_sets(c->st, "st", next >= 0 ? "active" : "completed");
        ms_setn(c->st, "next", next);
        ms_setn(c->st, "runs", 0);
        ms_setn(c->st, "skipped", 0);
        ms_setn(c->st, "v", 1);
        c->next = m->schedules;
        m->schedules = c;
        ms_sch_store(c);
        ms_sch_answer(m, cb, priv, ST_OK, c, NULL);
        return;
    }
    if (!c) {
        ms_sch_answer(m, cb, priv, ST_NOTFOUND, NULL, NULL);
        return;
    }
    char *prev = cJSON_PrintUnformatted(c->st);
    const char *st = ms_str(c->st, "st");
    if (op == SCH_DELETE) {
        msch **pp = &m->schedules;
        while (*pp != c) pp = &(*pp)->next;
        *pp = c->next;
        ms_sch_answer(m, cb, priv, ST_OK, c, prev);
        ms_sch_free(c);
        free(prev);
        return;
    }
    if ((op == SCH_PAUSE || op == SCH_RESUME) && strcmp(st, "completed") == 0) {
        ms_sch_answer(m, cb, priv, ST_CONFLICT, c, prev);
        free(prev);
        return;
    }
    if (op == SCH_RESUME && strcmp(st, "paused") != 0) {
        ms_sch_answer(m, cb, priv, ST_OK, c, prev);
        free(prev);
        return;
    }
    if (op == SCH_REPLACE) {
        free(c->def);
        c->def = xstrdup(def);
        ms_setn(c->st, "next", next);
        cJSON_DeleteItemFromObjectCaseSensitive(c->st, "fut");
        if (strcmp(st, "paused") != 0) ms_sets(c->st, "st", next >= 0 ? "active" : "completed");
    } else if (op == SCH_PAUSE) {
        ms_sets(c->st, "st", "paused");
        cJSON_DeleteItemFromObjectCaseSensitive(c->st, "fut");
    } else {
        ms_setn(c->st, "next", next);
        ms_sets(c->st, "st", next >= 0 ? "active" : "completed");
    }
    ms_setn(c->st, "v", ms_num(c->st, "v", 0) + 1);
    ms_sch_store(c);
    ms_sch_answer(m, cb, priv, ST_OK, c, prev);
    free(prev);
}

static void ms_sch_get(store *s, const char *id, store_sch_fn *cb, void *priv)
{
    mstore *m = MS(s);
    msch *c = ms_sch_find(m, id);
    ms_sch_answer(m, cb, priv, c ? ST_OK : ST_NOTFOUND, c, NULL);
}

static int ms_sch_cmp(const void *a, const void *b)
{
    return strcmp((*(msch *const *)a)->id, (*(msch *const *)b)->id);
}

/* The schedules of a bucket, in id order (the memory store is for
 * development: a list walk is enough). */
static msch **ms_sch_bucket(mstore *m, int bucket, int *n)
{
    int k = 0, cap = 16;
    msch **v = xmalloc(sizeof(*v) * (size_t)cap);
    for (msch *c = m->schedules; c; c = c->next) {
        if (c->bucket != bucket) continue;
        if (k == cap) v = xrealloc(v, sizeof(*v) * (size_t)(cap *= 2));
        v[k++] = c;
    }
    qsort(v, (size_t)k, sizeof(*v), ms_sch_cmp);
    *n = k;
    return v;
}

static void ms_sch_list(store *s, int bucket, const char *after, int limit,
                        store_sch_list_fn *cb, void *priv)
{
    mstore *m = MS(s);
    int n;
    msch **v = ms_sch_bucket(m, bucket, &n);
    mdefer *r = ms_defer(m, R_SCHLIST, (void *)cb, priv);
    r->items = xcalloc((size_t)(limit > 0 ? limit : 1), sizeof(*r->items));
    for (int i = 0; i < n && r->nitems < limit; i++)
        if (strcmp(v[i]->id, after) > 0) r->items[r->nitems++] = ms_sch_copy(v[i], NULL);
    free(v);
}

static void ms_sch_claim(store *s, int bucket, int64_t until, int limit, int64_t lease_ms,
                         store_sch_list_fn *cb, void *priv)
{
    mstore *m = MS(s);
    int64_t now = ms_now_ms(s), keep = schedule_keep_ms(s->cfg->slice_grace_ms);
    int n;
    msch **v = ms_sch_bucket(m, bucket, &n);
    mdefer *r = ms_defer(m, R_SCHLIST, (void *)cb, priv);
    r->items = xcalloc((size_t)(limit > 0 ? limit : 1), sizeof(*r->items));
    for (int i = 0; i < n && r->nitems < limit; i++) {
        msch *c = v[i];
        if (c->at < 0 || c->at > until) continue;
        if (strcmp(ms_str(c->st, "st"), "active") != 0) {
            c->at = -1;
            continue;
        }
        int64_t ct = ms_num(c->st, "ct", -1);
        if (ct >= 0 && ms_num(c->st, "le", 0) > now) continue; /* held by a runner */
        if (ct < 0 || now - ct > keep) ms_setn(c->st, "ct", now);
        ms_setn(c->st, "le", now + lease_ms);
        c->at = now + lease_ms;
        r->items[r->nitems++] = ms_sch_copy(c, NULL);
    }
    free(v);
}

static void ms_sch_advance(store *s, const char *id, const store_sch_pass *a,
                           store_sch_fn *cb, void *priv)
{
    mstore *m = MS(s);
    msch *c = ms_sch_find(m, id);
    if (!c) {
        ms_sch_answer(m, cb, priv, ST_NOTFOUND, NULL, NULL);
        return;
    }
    char *prev = cJSON_PrintUnformatted(c->st);
    if (ms_num(c->st, "ct", -1) != a->ct) {
        ms_sch_answer(m, cb, priv, ST_CONFLICT, c, prev);
        free(prev);
        return;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(c->st, "ct");
    cJSON_DeleteItemFromObjectCaseSensitive(c->st, "le");
    ms_setn(c->st, "runs", ms_num(c->st, "runs", 0) + a->made);
    ms_setn(c->st, "skipped", ms_num(c->st, "skipped", 0) + a->skipped);
    if (a->made > 0) {
        ms_setn(c->st, "last", a->last_at);
        ms_sets(c->st, "lid", a->last_id ? a->last_id : "");
    }
    /* runs made ahead and not yet due: earlier passes' still ahead, and
     * this one's */
    cJSON *fut = cJSON_CreateArray(), *e;
    int64_t now = ms_now_ms(s);
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c->st, "fut")) {
        char sl[TASK_SLICE_MAX], key[TASK_KEY_MAX + 1];
        int64_t at;
        if (cJSON_IsString(e) && task_id_parse(e->valuestring, sl, &at, key) == 0 && at > now)
            cJSON_AddItemToArray(fut, cJSON_CreateString(e->valuestring));
    }
    for (int i = 0; i < a->nfut; i++) cJSON_AddItemToArray(fut, cJSON_CreateString(a->fut[i]));
    ms_set(c->st, "fut", fut);
    if (ms_num(c->st, "v", 0) == a->v) {
        ms_setn(c->st, "next", a->next);
        if (a->next < 0 && strcmp(ms_str(c->st, "st"), "active") == 0)
            ms_sets(c->st, "st", "completed");
    }
    ms_sch_store(c);
    ms_sch_answer(m, cb, priv, ST_OK, c, prev);
    free(prev);
}

static void ms_hist_add(store *s, const store_hist *h, int64_t keep_ms, store_done_fn *cb,
                        void *priv);
static void ms_hist_read(store *s, int64_t from_minute, int64_t to_minute, store_hist_fn *cb,
                         void *priv);
static void ms_replica_put(store *s, const store_replica *r, int64_t ttl_ms, store_done_fn *cb,
                           void *priv);
static void ms_replica_del(store *s, const char *id, store_done_fn *cb, void *priv);
static void ms_replicas(store *s, store_replicas_fn *cb, void *priv);

static const store_type memory_type = {
    .name = "memory",
    .add = ms_add,
    .get = ms_get,
    .cancel = ms_cancel,
    .health = ms_health,
    .claim = ms_claim,
    .settle = ms_settle,
    .wm_init = ms_wm_init,
    .wm_get = ms_wm_get,
    .wm_advance = ms_wm_advance,
    .sch_write = ms_sch_write,
    .sch_get = ms_sch_get,
    .sch_list = ms_sch_list,
    .sch_claim = ms_sch_claim,
    .sch_advance = ms_sch_advance,
    .list = ms_list,
    .move = ms_move,
    .now_us = ms_now_us,
    .sync_clock = ms_sync_clock,
    .count = ms_count,
    .counters = ms_counters,
    .stats = ms_stats,
    .close = ms_close,
    .free = ms_free,
    .hist_add = ms_hist_add,
    .hist_read = ms_hist_read,
    .replica_put = ms_replica_put,
    .replica_del = ms_replica_del,
    .replicas = ms_replicas,
};

store *store_memory_create(struct event_base *base, const config *cfg)
{
    mstore *m = xcalloc(1, sizeof(*m));
    m->base.type = &memory_type;
    m->base.cfg = cfg;
    m->ev = base;
    m->tabsize = 1024;
    m->tab = xcalloc(m->tabsize, sizeof(*m->tab));
    m->wm = xmalloc(sizeof(*m->wm) * (size_t)(cfg->buckets > 0 ? cfg->buckets : 1));
    for (int b = 0; b < (int)cfg->buckets; b++) m->wm[b] = -1;
    m->defer_tail = &m->defer_head;
    m->defer_ev = event_new(base, -1, EV_READ, ms_defer_cb, m);
    log_assert(m->defer_ev);
    return &m->base;
}

/* ---- the console: history and replicas (store.h) -------------------------
 * Minutes in an array by minute, replicas in a list; every answer from the
 * loop, as the rest of this store's. */

typedef struct mreplica {
    char id[128], listen[128], version[64];
    int64_t started_at_ms, seen_ms, until_ms, inflight, held;
} mreplica;

typedef struct mconsole {
    store_hist *mins;           /* by minute, each with its own queues array */
    int nmins;
    mreplica *reps;
    int nreps;
} mconsole;

static mconsole *ms_console(mstore *m)
{
    if (!m->console) m->console = xcalloc(1, sizeof(*m->console));
    return m->console;
}

static void ms_console_free(mstore *m)
{
    mconsole *c = m->console;
    if (!c) return;
    for (int i = 0; i < c->nmins; i++) free(c->mins[i].queues);
    free(c->mins);
    free(c->reps);
    free(c);
}

/* An answer waiting for the loop: a done (err), the minutes or the replicas,
 * copied. */
typedef struct mconsole_answer {
    void *cb, *priv;
    int kind;                   /* 0 done, 1 minutes, 2 replicas */
    store_hist *mins;
    store_replica *reps;
    mreplica *copy;             /* the strings reps point to */
    int n;
} mconsole_answer;

static void ms_console_cb(evutil_socket_t fd, short what, void *arg)
{
    mconsole_answer *a = arg;
    (void)fd, (void)what;
    if (a->kind == 0) ((store_done_fn *)a->cb)(NULL, a->priv);
    else if (a->kind == 1) ((store_hist_fn *)a->cb)(a->mins, a->n, NULL, a->priv);
    else ((store_replicas_fn *)a->cb)(a->reps, a->n, NULL, a->priv);
    for (int i = 0; a->mins && i < a->n; i++) free(a->mins[i].queues);
    free(a->mins);
    free(a->reps);
    free(a->copy);
    free(a);
}

static void ms_console_answer(mstore *m, mconsole_answer *a)
{
    struct timeval tv = {0, 0};
    log_assert(event_base_once(m->ev, -1, EV_TIMEOUT, ms_console_cb, a, &tv) == 0);
}

static void ms_done_later(mstore *m, store_done_fn *cb, void *priv)
{
    mconsole_answer *a = xcalloc(1, sizeof(*a));
    *a = (mconsole_answer){.cb = (void *)cb, .priv = priv};
    ms_console_answer(m, a);
}

/* Add n failures of queue q to h, the bound kept as the Redis store keeps
 * it: a queue new to the minute past STORE_HIST_QUEUES counts as the rest. */
static void ms_hist_queue(store_hist *h, const char *q, int64_t n)
{
    int i = 0;
    while (i < h->nqueues && strcmp(h->queues[i].name, q) != 0) i++;
    if (i == h->nqueues && h->nqueues >= STORE_HIST_QUEUES) {
        q = STORE_HIST_OTHER;
        for (i = 0; i < h->nqueues && strcmp(h->queues[i].name, q) != 0; i++) {}
    }
    if (i == h->nqueues) {
        h->queues = xrealloc(h->queues, sizeof(*h->queues) * (size_t)(h->nqueues + 1));
        h->queues[i] = (store_hist_queue){.failed = 0};
        snprintf(h->queues[i].name, sizeof(h->queues[i].name), "%s", q);
        h->nqueues++;
    }
    h->queues[i].failed += n;
}

static void ms_hist_add(store *s, const store_hist *h, int64_t keep_ms, store_done_fn *cb,
                        void *priv)
{
    mstore *m = MS(s);
    mconsole *c = ms_console(m);
    /* minutes past keep_ms go, as the Redis store's keys expire */
    int64_t oldest = (ms_now_ms(s) - keep_ms) / 60000;
    int drop = 0;
    while (drop < c->nmins && c->mins[drop].minute < oldest) free(c->mins[drop++].queues);
    if (drop) memmove(c->mins, c->mins + drop, sizeof(*c->mins) * (size_t)(c->nmins - drop));
    c->nmins -= drop;
    int i = 0;
    while (i < c->nmins && c->mins[i].minute < h->minute) i++;
    if (i == c->nmins || c->mins[i].minute != h->minute) {
        c->mins = xrealloc(c->mins, sizeof(*c->mins) * (size_t)(c->nmins + 1));
        memmove(c->mins + i + 1, c->mins + i, sizeof(*c->mins) * (size_t)(c->nmins - i));
        c->mins[i] = (store_hist){.minute = h->minute};
        c->nmins++;
    }
    store_hist *t = &c->mins[i];
    t->succeeded += h->succeeded;
    t->attempts_failed += h->attempts_failed;
    t->retried += h->retried;
    t->failed += h->failed;
    t->expired += h->expired;
    for (int b = 0; b < STORE_HIST_BUCKETS; b++) t->lateness[b] += h->lateness[b];
    for (int q = 0; q < h->nqueues; q++) ms_hist_queue(t, h->queues[q].name, h->queues[q].failed);
    ms_done_later(m, cb, priv);
}

static void ms_hist_read(store *s, int64_t from_minute, int64_t to_minute, store_hist_fn *cb,
                         void *priv)
{
    mstore *m = MS(s);
    mconsole *c = ms_console(m);
    mconsole_answer *a = xcalloc(1, sizeof(*a));
    *a = (mconsole_answer){.cb = (void *)cb, .priv = priv, .kind = 1};
    if (to_minute - from_minute > STORE_HIST_RANGE_MAX) to_minute = from_minute + STORE_HIST_RANGE_MAX;
    for (int i = 0; i < c->nmins; i++) {
        const store_hist *h = &c->mins[i];
        if (h->minute < from_minute || h->minute >= to_minute) continue;
        a->mins = xrealloc(a->mins, sizeof(*a->mins) * (size_t)(a->n + 1));
        store_hist *o = &a->mins[a->n++];
        *o = *h;
        o->queues = xmalloc(sizeof(*o->queues) * (size_t)(h->nqueues + 1));
        if (h->nqueues) memcpy(o->queues, h->queues, sizeof(*o->queues) * (size_t)h->nqueues);
    }
    ms_console_answer(m, a);
}

/* Reports past their time go. */
static void ms_replicas_prune(mconsole *c, int64_t now)
{
    int k = 0;
    for (int i = 0; i < c->nreps; i++)
        if (c->reps[i].until_ms > now) c->reps[k++] = c->reps[i];
    c->nreps = k;
}

static void ms_replica_put(store *s, const store_replica *r, int64_t ttl_ms, store_done_fn *cb,
                           void *priv)
{
    mstore *m = MS(s);
    mconsole *c = ms_console(m);
    int64_t now = ms_now_ms(s);
    ms_replicas_prune(c, now);
    int i = 0;
    while (i < c->nreps && strcmp(c->reps[i].id, r->id) != 0) i++;
    if (i == c->nreps) {
        c->reps = xrealloc(c->reps, sizeof(*c->reps) * (size_t)(c->nreps + 1));
        c->nreps++;
    }
    mreplica *t = &c->reps[i];
    *t = (mreplica){.started_at_ms = r->started_at_ms, .seen_ms = now, .until_ms = now + ttl_ms,
                    .inflight = r->inflight, .held = r->held};
    snprintf(t->id, sizeof(t->id), "%s", r->id);
    snprintf(t->listen, sizeof(t->listen), "%s", r->listen);
    snprintf(t->version, sizeof(t->version), "%s", r->version);
    ms_done_later(m, cb, priv);
}

static void ms_replica_del(store *s, const char *id, store_done_fn *cb, void *priv)
{
    mstore *m = MS(s);
    mconsole *c = ms_console(m);
    for (int i = 0; i < c->nreps; i++)
        if (strcmp(c->reps[i].id, id) == 0) c->reps[i].until_ms = 0;
    ms_replicas_prune(c, ms_now_ms(s));
    ms_done_later(m, cb, priv);
}

static int ms_replica_cmp(const void *a, const void *b)
{
    return strcmp(((const mreplica *)a)->id, ((const mreplica *)b)->id);
}

static void ms_replicas(store *s, store_replicas_fn *cb, void *priv)
{
    mstore *m = MS(s);
    mconsole *c = ms_console(m);
    ms_replicas_prune(c, ms_now_ms(s));
    if (c->nreps) qsort(c->reps, (size_t)c->nreps, sizeof(*c->reps), ms_replica_cmp);
    mconsole_answer *a = xcalloc(1, sizeof(*a));
    *a = (mconsole_answer){.cb = (void *)cb, .priv = priv, .kind = 2, .n = c->nreps};
    a->reps = xcalloc((size_t)(c->nreps + 1), sizeof(*a->reps));
    a->copy = xcalloc((size_t)(c->nreps + 1), sizeof(*a->copy));
    if (c->nreps) memcpy(a->copy, c->reps, sizeof(*c->reps) * (size_t)c->nreps);
    for (int i = 0; i < c->nreps; i++) {
        const mreplica *t = &a->copy[i];
        a->reps[i] = (store_replica){t->id, t->listen, t->version, t->started_at_ms,
                                     t->seen_ms, t->inflight, t->held};
    }
    ms_console_answer(m, a);
}

void store_memory_set_clock(store *s, store_clock_fn *clock, void *priv)
{
    mstore *m = MS(s);
    log_assert(s->type == &memory_type);
    m->clock = clock;
    m->clock_priv = priv;
}
