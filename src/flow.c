/* flow.c -- see flow.h. */
#include "flow.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "netpolicy.h"
#include "store.h"
#include "util.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int flow_int(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
        v->valuedouble > FLOW_INT_MAX)
        return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

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
            if (!cJSON_IsNumber(f) || !(f->valuedouble > 0) || f->valuedouble > FLOW_RATE_MAX)
                FAIL("rate: must be a number of callbacks a second, above 0 and at most %.0f",
                     FLOW_RATE_MAX);
            out->rate = f->valuedouble;
        } else if (strcmp(f->string, "burst") == 0) {
            if (is_null) continue;
            if (flow_int(f, &out->burst) != 0)
                FAIL("burst: must be an integer from 1 to %d", FLOW_INT_MAX);
        } else if (strcmp(f->string, "max_concurrency") == 0) {
            if (is_null) continue;
            if (flow_int(f, &out->max_concurrency) != 0)
                FAIL("max_concurrency: must be an integer from 1 to %d", FLOW_INT_MAX);
        } else if (queue && strcmp(f->string, "paused") == 0) {
            if (!cJSON_IsBool(f)) FAIL("paused: must be true or false");
            out->paused = cJSON_IsTrue(f);
        } else if (!queue && strcmp(f->string, "paused") == 0) {
            FAIL("paused: a destination cannot be paused (pause its queues)");
        } else {
            char name[80];
            snprintf(name, sizeof(name), "%s", f->string);
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

int flow_dest_of_url(const char *url, char *out)
{
    return flow_dest_make(url, 1, out);
}

int flow_dest_canon(const char *name, char *out)
{
    char url[FLOW_DEST_MAX + 16];
    if (!flow_dest_valid(name)) return -1;
    snprintf(url, sizeof(url), "http://%s/", name);
    return flow_dest_make(url, 0, out);
}

/* ---- the replica's copy ---------------------------------------------------- */

typedef struct flow_entry {
    char key[FLOW_KEY_MAX];     /* q:.. or d:.. */
    int64_t until_ms;           /* d: held back until (0: not) */
    int configured;
} flow_entry;

struct flow_cache {
    flow_entry *e;
    int n, cap;
    int64_t waiting;
};

flow_cache *flow_cache_new(void)
{
    return xcalloc(1, sizeof(flow_cache));
}

void flow_cache_free(flow_cache *fc)
{
    if (!fc) return;
    free(fc->e);
    free(fc);
}

static flow_entry *flow_find(const flow_cache *fc, char kind, const char *name)
{
    for (int i = 0; i < fc->n; i++)
        if (fc->e[i].key[0] == kind && strcmp(fc->e[i].key + 2, name) == 0) return &fc->e[i];
    return NULL;
}

static flow_entry *flow_add(flow_cache *fc, char kind, const char *name)
{
    flow_entry *e = flow_find(fc, kind, name);
    if (e) return e;
    if (strlen(name) + 3 > FLOW_KEY_MAX) return NULL;
    if (fc->n == fc->cap) {
        fc->cap = fc->cap ? fc->cap * 2 : 16;
        fc->e = xrealloc(fc->e, sizeof(*fc->e) * (size_t)fc->cap);
    }
    e = &fc->e[fc->n++];
    memset(e, 0, sizeof(*e));
    snprintf(e->key, sizeof(e->key), "%c:%s", kind, name);
    return e;
}

void flow_cache_load(flow_cache *fc, const store_flow_info *items, int n, int64_t waiting,
                     int64_t now_ms)
{
    /* holds seen here and not yet in the store's copy are kept */
    flow_entry *old = fc->e;
    int nold = fc->n;
    fc->e = NULL;
    fc->n = fc->cap = 0;
    fc->waiting = waiting;
    for (int i = 0; i < nold; i++)
        if (old[i].until_ms > now_ms) flow_cache_hold(fc, old[i].key + 2, old[i].until_ms);
    free(old);
    for (int i = 0; i < n; i++) {
        const char *k = items[i].key;
        if (items[i].settings) {
            if ((k[0] != 'q' && k[0] != 'd') || k[1] != ':') continue;
            flow_entry *e = flow_add(fc, k[0], k + 2);
            if (e) e->configured = 1;
        } else {
            flow_cache_hold(fc, k, items[i].until_ms);
        }
    }
}

void flow_cache_hold(flow_cache *fc, const char *dest, int64_t until_ms)
{
    flow_entry *e = flow_add(fc, 'd', dest);
    if (e && until_ms > e->until_ms) e->until_ms = until_ms;
}

int flow_cache_empty(const flow_cache *fc) { return fc->n == 0; }
int64_t flow_cache_waiting(const flow_cache *fc) { return fc->waiting; }

int flow_cache_route(const flow_cache *fc, const char *spec, int64_t now_ms,
                     char queue[TASK_QUEUE_MAX], char dest[FLOW_DEST_MAX], int64_t *timeout_ms)
{
    cJSON *o = cJSON_Parse(spec);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "queue");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(o, "timeout_ms");
    if (cJSON_IsNumber(to) && to->valuedouble > 0) *timeout_ms = (int64_t)to->valuedouble;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "callback_url");
    int rc = -1;
    if (!cJSON_IsString(u) || flow_dest_of_url(u->valuestring, dest) != 0) goto done;
    snprintf(queue, TASK_QUEUE_MAX, "%s",
             cJSON_IsString(q) && task_queue_valid(q->valuestring) ? q->valuestring
                                                                   : TASK_QUEUE_DEFAULT);
    const flow_entry *qe = flow_find(fc, 'q', queue), *de = flow_find(fc, 'd', dest);
    if (!(de && de->configured)) {
        /* a host-wide destination, when the URL names a port */
        char host[FLOW_DEST_MAX];
        snprintf(host, sizeof(host), "%s", dest);
        char *c = host[0] == '[' ? strstr(host, "]:") : strchr(host, ':');
        if (c) {
            *(host[0] == '[' ? c + 1 : c) = '\0';
            const flow_entry *he = flow_find(fc, 'd', host);
            if (he && he->configured) {
                snprintf(dest, FLOW_DEST_MAX, "%s", host);
                de = he;
            }
        }
    }
    rc = (qe && qe->configured) || (de && (de->configured || de->until_ms > now_ms));
done:
    cJSON_Delete(o);
    return rc;
}
