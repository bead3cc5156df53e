/* flow.c -- see flow.h. */
#include "core/flow.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/log.h"
#include "delivery/netpolicy.h"
#include "store/store.h"
#include "base/util.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

int flow_settings_parse(const cJSON *body, int queue, flow_settings *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(body))
        FAIL("body: must be a JSON object with rate, burst, max_concurrency%s",
             queue ? ", paused" : "");
    for (const cJSON *f = body->child; f; f = f->next) {
        for (const cJSON *d = body->child; d != f; d = d->next)
            if (strcmp(d->string, f->string) == 0) FAIL("%.64s: given more than once", f->string);
        int is_null = cJSON_IsNull(f);
        if (strcmp(f->string, "rate") == 0) {
            if (is_null) continue;
            if (task_json_num(f, FLOW_RATE_MIN, FLOW_RATE_MAX, 0, &out->rate) != 0)
                FAIL("rate: must be a number of callbacks a second from %g to %.0f, of at most "
                     "14 significant digits", FLOW_RATE_MIN, FLOW_RATE_MAX);
        } else if (strcmp(f->string, "burst") == 0) {
            if (is_null) continue;
            if (task_json_int(f, 1, FLOW_INT_MAX, &out->burst) != 0)
                FAIL("burst: must be an integer from 1 to %d", FLOW_INT_MAX);
        } else if (strcmp(f->string, "max_concurrency") == 0) {
            if (is_null) continue;
            if (task_json_int(f, 1, FLOW_INT_MAX, &out->max_concurrency) != 0)
                FAIL("max_concurrency: must be an integer from 1 to %d", FLOW_INT_MAX);
        } else if (queue && strcmp(f->string, "paused") == 0) {
            if (!cJSON_IsBool(f)) FAIL("paused: must be true or false");
            out->paused = cJSON_IsTrue(f);
        } else if (!queue && strcmp(f->string, "paused") == 0) {
            FAIL("paused: a destination cannot be paused (pause its queues)");
        } else {
            char name[80];
            util_copy(name, sizeof(name), f->string);
            util_text_clean(name, strlen(name));
            FAIL("%s: unknown field", name);
        }
    }
    if (out->burst && !out->rate) FAIL("burst: needs a rate");
    return 0;
}

char *flow_settings_json(const flow_settings *fs, int queue)
{
    cJSON *o = cJSON_CreateObject();
    if (fs->rate > 0) cJSON_AddNumberToObject(o, "rate", fs->rate);
    if (fs->rate > 0) cJSON_AddNumberToObject(o, "burst", (double)(fs->burst ? fs->burst : 1));
    if (fs->max_concurrency) cJSON_AddNumberToObject(o, "max_concurrency", (double)fs->max_concurrency);
    if (queue && fs->paused) cJSON_AddBoolToObject(o, "paused", 1);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

void flow_settings_render(const char *json, int queue, cJSON *obj)
{
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    static const char *names[] = {"rate", "burst", "max_concurrency"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, names[i]) : NULL;
        if (cJSON_IsNumber(v)) cJSON_AddNumberToObject(obj, names[i], v->valuedouble);
        else cJSON_AddNullToObject(obj, names[i]);
    }
    if (queue) {
        const cJSON *p = o ? cJSON_GetObjectItemCaseSensitive(o, "paused") : NULL;
        cJSON_AddBoolToObject(obj, "paused", cJSON_IsTrue(p));
    }
    cJSON_Delete(o);
}

/* ---- destinations -------------------------------------------------------- */

int flow_dest_valid(const char *s)
{
    const char *p = s, *colon;
    size_t n = strlen(s);
    if (n == 0 || n >= FLOW_DEST_MAX) return 0;
    if (*p == '[') {
        const char *e = strchr(p, ']');
        if (!e || e == p + 1) return 0;
        for (const char *q = p + 1; q < e; q++)
            if (!isxdigit((unsigned char)*q) && *q != ':' && *q != '.') return 0;
        colon = e[1] ? e + 1 : NULL;
        if (colon && *colon != ':') return 0;
    } else {
        colon = strchr(p, ':');
        const char *end = colon ? colon : p + n;
        if (end == p) return 0;
        for (const char *q = p; q < end; q++)
            if (!(islower((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '.' ||
                  *q == '-'))
                return 0;
    }
    if (!colon) return 1;
    const char *d = colon + 1;
    long port = 0;
    if (!*d || strlen(d) > 5) return 0;
    for (; *d; d++) {
        if (!isdigit((unsigned char)*d)) return 0;
        port = port * 10 + (*d - '0');
    }
    return port >= 1 && port <= 65535 && colon[1] != '0';
}

/* A host as libcurl's URL parser gives it, in place (cap bytes): the
 * destination's host. 0, or -1 when its address form does not fit. */
static int flow_dest_host(char *host, size_t cap)
{
    for (;;) {
        size_t n = strlen(host);
        for (char *p = host; *p; p++) *p = (char)tolower((unsigned char)*p);
        if (n < 2 || host[0] == '[' || host[n - 1] != '.') break;
        /* the final dot is the root, the same name; without it a name may be
         * an IPv4 address the parser spells as one ("127.1." is 127.0.0.1) */
        host[n - 1] = '\0';
        char url[FLOW_DEST_MAX + 16], *h = NULL;
        CURLU *u = curl_url();
        snprintf(url, sizeof(url), "http://%s/", host);
        int ok = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
                 curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK && strlen(h) < cap;
        if (ok) memcpy(host, h, strlen(h) + 1);
        curl_free(h);
        curl_url_cleanup(u);
        if (!ok) break;       /* not a URL's host without it: the name as it is */
    }
    char a[FLOW_DEST_MAX];
    if (netpolicy_address_form(host, a, sizeof(a)) == 0) {
        if (strlen(a) >= cap) return -1;
        memcpy(host, a, strlen(a) + 1);
    }
    return 0;
}

/* The destination of url: its port the scheme's default when it names none
 * (default_port), else only when it names one. */
static int flow_dest_make(const char *url, int default_port, char *out)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, h[FLOW_DEST_MAX];
    int rc = -1;
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || strlen(host) >= sizeof(h))
        goto done;
    if (curl_url_get(u, CURLUPART_PORT, &port, default_port ? CURLU_DEFAULT_PORT : 0) !=
        CURLUE_OK)
        port = NULL;
    memcpy(h, host, strlen(host) + 1);
    if (flow_dest_host(h, sizeof(h)) != 0) goto done;
    int n = port ? snprintf(out, FLOW_DEST_MAX, "%s:%s", h, port)
                 : snprintf(out, FLOW_DEST_MAX, "%s", h);
    rc = n > 0 && n < FLOW_DEST_MAX ? 0 : -1;
done:
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

/* The last URL read here, this thread's, and what it gave: a burst's tasks
 * mostly share their callback URL, and its parse by libcurl costs more than
 * the rest of a route (flow_cache_route, at a claim and again at a fire). A
 * function of the URL's text alone, so a hit gives what a parse would. */
#define FLOW_URL_MEMO_MAX 512
static _Thread_local char memo_url[FLOW_URL_MEMO_MAX], memo_dest[FLOW_DEST_MAX];
static _Thread_local int memo_rc = 1; /* 1: nothing kept */

int flow_dest_of_url(const char *url, char *out)
{
    size_t n = strlen(url);
    if (memo_rc != 1 && n < FLOW_URL_MEMO_MAX && memcmp(memo_url, url, n + 1) == 0) {
        if (memo_rc == 0) memcpy(out, memo_dest, strlen(memo_dest) + 1);
        return memo_rc;
    }
    int rc = flow_dest_make(url, 1, out);
    if (n < FLOW_URL_MEMO_MAX) {
        memcpy(memo_url, url, n + 1);
        if (rc == 0) memcpy(memo_dest, out, strlen(out) + 1);
        memo_rc = rc;
    }
    return rc;
}

int flow_dest_canon(const char *name, char *out)
{
    char url[FLOW_DEST_MAX + 16];
    if (!flow_dest_valid(name)) return -1;
    snprintf(url, sizeof(url), "http://%s/", name);
    return flow_dest_make(url, 0, out);
}

/* ---- the replica's copy ---------------------------------------------------- */

/* One queue or destination known here: configured (it has settings in the
 * store) or held back (a Retry-After), or both. Entries are found by hash
 * (O(1) a lookup, whatever their number); held ones are also linked oldest
 * set first, so that expiry and eviction take from the front and nothing
 * walks every hold. */
typedef struct flow_entry {
    struct flow_entry *next;            /* hash chain */
    struct flow_entry *hprev, *hnext;   /* holds, oldest set first */
    int64_t until_ms;                   /* held back until (0: not) */
    int configured;
    char key[];                         /* q:.. or d:.. */
} flow_entry;

typedef struct flow_table {
    flow_entry **b;
    size_t nb, n;
    flow_entry *hhead, *htail;
    size_t nholds;
} flow_table;

struct flow_cache {
    flow_table live;
    flow_table stage;           /* a reload from scratch being built */
    int staging;
    int64_t waiting;
    size_t holds_max;
    log_limit warn;
    uint64_t gen;               /* flow_cache_gen */
};

/* holds dropped from the front per reload once expired */
#define FLOW_EXPIRE_STEP 256

flow_cache *flow_cache_new(size_t holds_max)
{
    flow_cache *fc = xcalloc(1, sizeof(flow_cache));
    fc->holds_max = holds_max ? holds_max : 1;
    return fc;
}

static void flow_table_clear(flow_table *t)
{
    for (size_t i = 0; i < t->nb; i++)
        for (flow_entry *e = t->b[i], *n; e; e = n) {
            n = e->next;
            free(e);
        }
    free(t->b);
    memset(t, 0, sizeof(*t));
}

void flow_cache_free(flow_cache *fc)
{
    if (!fc) return;
    flow_table_clear(&fc->live);
    flow_table_clear(&fc->stage);
    free(fc);
}

static size_t flow_slot(const flow_table *t, const char *key)
{
    return util_fnv1a(key, strlen(key)) & (t->nb - 1);
}

static flow_entry *flow_table_find(const flow_table *t, const char *key)
{
    if (!t->nb) return NULL;
    for (flow_entry *e = t->b[flow_slot(t, key)]; e; e = e->next)
        if (strcmp(e->key, key) == 0) return e;
    return NULL;
}

/* on the claim path: the key is put together without snprintf */
static flow_entry *flow_find(const flow_cache *fc, char kind, const char *name)
{
    char key[FLOW_KEY_MAX];
    size_t n = strlen(name);
    if (n + 3 > sizeof(key)) return NULL;
    key[0] = kind;
    key[1] = ':';
    memcpy(key + 2, name, n + 1);
    return flow_table_find(&fc->live, key);
}

static void flow_table_grow(flow_table *t)
{
    size_t nb = t->nb ? t->nb * 2 : 64;
    flow_entry **b = xcalloc(nb, sizeof(*b));
    for (size_t i = 0; i < t->nb; i++)
        for (flow_entry *e = t->b[i], *n; e; e = n) {
            n = e->next;
            size_t s = util_fnv1a(e->key, strlen(e->key)) & (nb - 1);
            e->next = b[s];
            b[s] = e;
        }
    free(t->b);
    t->b = b;
    t->nb = nb;
}

static flow_entry *flow_table_add(flow_table *t, const char *key)
{
    flow_entry *e = flow_table_find(t, key);
    if (e) return e;
    size_t len = strlen(key);
    if (len + 1 > FLOW_KEY_MAX) return NULL;
    if (t->n >= t->nb) flow_table_grow(t);
    e = xcalloc(1, sizeof(*e) + len + 1);
    memcpy(e->key, key, len + 1);
    size_t s = flow_slot(t, key);
    e->next = t->b[s];
    t->b[s] = e;
    t->n++;
    return e;
}

static void flow_table_del(flow_table *t, flow_entry *e)
{
    for (flow_entry **p = &t->b[flow_slot(t, e->key)]; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            t->n--;
            free(e);
            return;
        }
}

static void flow_unhold(flow_table *t, flow_entry *e)
{
    if (!e->until_ms) return;
    if (e->hprev) e->hprev->hnext = e->hnext;
    else t->hhead = e->hnext;
    if (e->hnext) e->hnext->hprev = e->hprev;
    else t->htail = e->hprev;
    e->hprev = e->hnext = NULL;
    e->until_ms = 0;
    t->nholds--;
}

/* e no longer held: gone unless it has settings */
static void flow_release(flow_table *t, flow_entry *e)
{
    flow_unhold(t, e);
    if (!e->configured) flow_table_del(t, e);
}

/* Hold dest until until_ms in t (a later hold wins). Past holds_max holds,
 * the oldest set goes first. */
static void flow_table_hold(flow_cache *fc, flow_table *t, const char *dest, int64_t until_ms,
                            int64_t now_ms)
{
    char key[FLOW_KEY_MAX];
    if (until_ms <= now_ms) return;
    if (snprintf(key, sizeof(key), "d:%s", dest) >= (int)sizeof(key)) return;
    flow_entry *e = flow_table_find(t, key);
    if (e && e->until_ms >= until_ms) return;
    if (!(e && e->until_ms) && t->nholds >= fc->holds_max) {
        flow_entry *old = t->hhead;
        log_warn_limited(&fc->warn, now_ms,
                         "destination %s: more than %zu destinations held back by Retry-After "
                         "(flow_holds_max); the oldest hold (%s) is forgotten here",
                         dest, fc->holds_max, old->key + 2);
        flow_release(t, old);
    }
    e = flow_table_add(t, key);
    if (!e) return;
    /* set again: it moves to the back, the newest */
    flow_unhold(t, e);
    e->until_ms = until_ms;
    e->hprev = t->htail;
    if (t->htail) t->htail->hnext = e;
    else t->hhead = e;
    t->htail = e;
    t->nholds++;
}

/* Drop expired holds from the front (a bounded number: the rest go on the
 * next calls, and a lookup reads an expired one as not held meanwhile). */
static void flow_table_expire(flow_table *t, int64_t now_ms)
{
    for (int i = 0; i < FLOW_EXPIRE_STEP && t->hhead && t->hhead->until_ms <= now_ms; i++)
        flow_release(t, t->hhead);
}

void flow_cache_apply(flow_cache *fc, const store_flow_info *items, int n, int fresh, int done,
                      int64_t now_ms)
{
    if (fresh) {
        flow_table_clear(&fc->stage);
        fc->staging = 1;
    }
    flow_table *t = fc->staging ? &fc->stage : &fc->live;
    for (int i = 0; i < n; i++) {
        const char *k = items[i].key;
        if ((k[0] != 'q' && k[0] != 'd') || k[1] != ':') continue;
        flow_entry *e = flow_table_find(t, k);
        if (items[i].settings && items[i].settings[0]) {
            if (!e) e = flow_table_add(t, k);
            if (e) e->configured = 1;
        } else if (e) {
            e->configured = 0;
            if (!e->until_ms) flow_table_del(t, e);
        }
        if (k[0] == 'd' && items[i].until_ms > now_ms)
            flow_table_hold(fc, t, k + 2, items[i].until_ms, now_ms);
    }
    if (n > 0) fc->gen++;
    if (fc->staging && done) {
        fc->gen++;
        /* holds seen here and not in the store's copy are kept, oldest first */
        for (flow_entry *e = fc->live.hhead; e; e = e->hnext)
            flow_table_hold(fc, &fc->stage, e->key + 2, e->until_ms, now_ms);
        flow_table_clear(&fc->live);
        fc->live = fc->stage;
        memset(&fc->stage, 0, sizeof(fc->stage));
        fc->staging = 0;
    }
    flow_table_expire(&fc->live, now_ms);
}

void flow_cache_set_waiting(flow_cache *fc, int64_t waiting)
{
    fc->waiting = waiting;
}

void flow_cache_hold(flow_cache *fc, const char *dest, int64_t until_ms, int64_t now_ms)
{
    fc->gen++;
    flow_table_hold(fc, &fc->live, dest, until_ms, now_ms);
}

uint64_t flow_cache_gen(const flow_cache *fc) { return fc->gen; }

size_t flow_cache_holds(const flow_cache *fc) { return fc->live.nholds; }
int flow_cache_empty(const flow_cache *fc) { return fc->live.n == 0; }
int64_t flow_cache_waiting(const flow_cache *fc) { return fc->waiting; }

int flow_cache_route(const flow_cache *fc, const task_spec *spec, int64_t now_ms,
                     char queue[TASK_QUEUE_MAX], char dest[FLOW_DEST_MAX])
{
    if (spec->bad || flow_dest_of_url(spec->url, dest) != 0) return -1;
    snprintf(queue, TASK_QUEUE_MAX, "%s",
             task_queue_valid(spec->queue) ? spec->queue : TASK_QUEUE_DEFAULT);
    const flow_entry *qe = flow_find(fc, 'q', queue), *de = flow_find(fc, 'd', dest);
    if (!(de && de->configured)) {
        /* a host-wide destination, when the URL names a port */
        char host[FLOW_DEST_MAX];
        util_copy(host, sizeof(host), dest);
        char *c = host[0] == '[' ? strstr(host, "]:") : strchr(host, ':');
        if (c) {
            *(host[0] == '[' ? c + 1 : c) = '\0';
            const flow_entry *he = flow_find(fc, 'd', host);
            if (he && he->configured) {
                util_copy(dest, FLOW_DEST_MAX, host);
                de = he;
            }
        }
    }
    return (qe && qe->configured) || (de && (de->configured || de->until_ms > now_ms));
}
