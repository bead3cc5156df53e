/* api_queues.c -- the routes of queues and destinations (doc/api.md "Flow
 * control"): flow control's settings and live counts (flow.h).
 *   GET    /v1/queues, /v1/destinations            a page in name order
 *   GET    /v1/queues/{name}, /v1/destinations/{d} the settings and counts
 *   PUT    ...                                     set them
 *   DELETE ...                                     drop them
 *   POST   /v1/queues/{name}/pause|resume */
#include "edge/api_queues.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "core/flow.h"
#include "edge/api_reply.h"
#include "model/task.h"

/* a listing's page: default and largest */
#define FLOW_LIST_DEFAULT 100
#define FLOW_LIST_MAX 200

typedef struct flow_req {
    api_req *r;
    char key[FLOW_KEY_MAX];
    int status;               /* the status to answer with the info */
    /* DELETE of a destination spelled otherwise than its one form: the key
     * as spelled goes first (settings stored before destinations were taken
     * to one form are found by no task, but can still be deleted) */
    char spelled[FLOW_KEY_MAX];
    int deleted;              /* what deleting it removed */
} flow_req;

/* A path segment, percent-decoded into out: 0, or -1 when malformed, too
 * long, or holding a NUL or a '/'. */
static int api_segment(const char *s, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *s; s++) {
        int c = (unsigned char)*s;
        if (c == '%') {
            int hi = api_hex(s[1]), lo = hi < 0 ? -1 : api_hex(s[2]);
            if (lo < 0) return -1;
            c = hi * 16 + lo;
            s += 2;
        }
        if (c == 0 || c == '/' || n + 1 >= outlen) return -1;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return n ? 0 : -1;
}

static void api_flow_item(const store_flow_info *it, cJSON *o)
{
    int queue = it->key[0] == 'q';
    cJSON_AddStringToObject(o, queue ? "name" : "destination", it->key + 2);
    flow_settings_render(it->settings, queue, o);
    if (queue) cJSON_AddNumberToObject(o, "scheduled", (double)it->open);
    if (queue) cJSON_AddNumberToObject(o, "waiting", (double)it->waiting);
    cJSON_AddNumberToObject(o, "in_flight", (double)it->in_flight);
    if (queue) cJSON_AddNumberToObject(o, "failed_last_hour", (double)it->failed_hour);
    else if (it->until_ms) cJSON_AddNumberToObject(o, "held_until", (double)it->until_ms);
    else cJSON_AddNullToObject(o, "held_until");
}

static void api_flow_info_cb(const store_flow_info *items, int n, const char *err, void *priv)
{
    flow_req *f = priv;
    if (err) {
        api_finish_error(f->r, 503, "unavailable", err);
    } else if (f->key[0]) {
        cJSON *o = cJSON_CreateObject();
        store_flow_info none = {.key = f->key};
        api_flow_item(n > 0 ? &items[0] : &none, o);
        api_finish(f->r, f->status, f->status == 201 ? "Created" : "OK", o);
        cJSON_Delete(o);
    }
    free(f);
}

/* a page of the listing: {queues | destinations: [...], next_cursor} */
static void api_flow_list_cb(const store_flow_info *items, int n, const char *next,
                             const char *err, void *priv)
{
    flow_req *f = priv;
    if (err) {
        api_finish_error(f->r, 503, "unavailable", err);
        free(f);
        return;
    }
    int queues = f->key[0] == 'q';
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, queues ? "queues" : "destinations");
    for (int i = 0; i < n; i++) {
        if (items[i].key[0] != f->key[0]) continue;
        cJSON *x = cJSON_CreateObject();
        api_flow_item(&items[i], x);
        cJSON_AddItemToArray(arr, x);
    }
    if (next) cJSON_AddStringToObject(o, "next_cursor", next);
    else cJSON_AddNullToObject(o, "next_cursor");
    api_finish(f->r, 200, "OK", o);
    cJSON_Delete(o);
    free(f);
}

static void api_flow_written_cb(int n, const char *err, void *priv)
{
    flow_req *f = priv;
    api *a = f->r->a;
    if (err) {
        api_finish_error(f->r, 503, "unavailable", err);
        free(f);
        return;
    }
    if (f->spelled[0]) {
        f->deleted = n;
        f->spelled[0] = '\0';
        store_flow_put(a->s, f->key, NULL, api_flow_written_cb, f);
        return;
    }
    /* this replica acts on it at once; the others within FLOW_SNAPSHOT_MS */
    if (a->on_flow) a->on_flow(a->on_flow_priv);
    if (f->status == 204) {
        if (n + f->deleted == 0) api_finish_error(f->r, 404, "not_found", "no settings to delete");
        else api_finish(f->r, 204, "No Content", NULL);
        free(f);
        return;
    }
    store_flow_get(a->s, f->key, api_flow_info_cb, f);
}

/* spelled: a DELETE's key as the path spelled it, when that differs (else
 * NULL) */
static void api_flow_write(api *a, http_req *req, const char *key, const char *settings,
                           int status, const char *spelled)
{
    flow_req *f = xcalloc(1, sizeof(*f));
    f->r = api_req_new(a, req);
    f->status = status;
    util_copy(f->key, sizeof(f->key), key);
    if (spelled) snprintf(f->spelled, sizeof(f->spelled), "%s", spelled);
    store_flow_put(a->s, spelled ? spelled : key, settings, api_flow_written_cb, f);
}

static void api_flow_fetch(api *a, http_req *req, const char *key)
{
    flow_req *f = xcalloc(1, sizeof(*f));
    f->r = api_req_new(a, req);
    f->status = 200;
    util_copy(f->key, sizeof(f->key), key);
    store_flow_get(a->s, key, api_flow_info_cb, f);
}

/* GET /v1/queues, /v1/destinations: a page in name order, limit and cursor
 * as the task listing has them; the cursor is the last name of the page
 * before. The work of a call is bounded by its page, whatever exists. */
static void api_flow_list(api *a, http_req *req, int queues)
{
    /* one more than a name: a longer cursor is told apart (api_page_query) */
    char after[FLOW_DEST_MAX + 1];
    int64_t limit = FLOW_LIST_DEFAULT;
    if (api_page_query(req, FLOW_LIST_MAX, &limit, after, sizeof(after)) != 0) return;
    if (*after && !(queues ? strlen(after) < TASK_QUEUE_MAX && task_queue_valid(after)
                           : flow_dest_valid(after))) {
        api_error(req, 400, "invalid_argument", "cursor: malformed (pass next_cursor as given)");
        return;
    }
    flow_req *f = xcalloc(1, sizeof(*f));
    f->r = api_req_new(a, req);
    f->key[0] = queues ? 'q' : 'd';
    store_flow_list(a->s, f->key[0], after, (int)limit, api_flow_list_cb, f);
}

static void api_flow_set(api *a, http_req *req, const char *key)
{
    int queue = key[0] == 'q';
    cJSON *body = api_body(req);
    flow_settings fs;
    char err[256];
    if (!body) return;
    if (flow_settings_parse(body, queue, &fs, err, sizeof(err)) != 0) {
        cJSON_Delete(body);
        api_error(req, 400, "invalid_argument", "%s", err);
        return;
    }
    cJSON_Delete(body);
    char *json = flow_settings_json(&fs, queue);
    api_flow_write(a, req, key, json, 200, NULL);
    free(json);
}

/* The routes of /v1/queues and /v1/destinations: flow control lives in
 * Redis alone, so the memory store answers 501 for all of them, before
 * anything in the path or the method is looked at. */
int api_queues_ready(api *a, http_req *req)
{
    if (store_has_flow(a->s)) return 0;
    api_error(req, 501, "not_implemented",
              "flow control: queues and destinations need the Redis store");
    return -1;
}

/* {queue}: a queue's name, percent-decoded; its value becomes the key
 * "q:<name>". */
int api_queues_param(api *a, http_req *req, api_param *p)
{
    char name[FLOW_DEST_MAX];
    (void)a;
    if (api_segment(p->value, name, sizeof(name)) != 0 || strlen(name) >= TASK_QUEUE_MAX ||
        !task_queue_valid(name)) {
        api_error(req, 400, "invalid_argument", "queue: must be 1-%d characters of A-Z a-z 0-9 . _ -",
                  TASK_QUEUE_MAX - 1);
        return -1;
    }
    snprintf(p->value, sizeof(p->value), "q:%s", name);
    return 1;
}

/* {destination}: the rest of the path, percent-decoded, a destination in
 * its one form (flow_dest_canon); its value becomes the key "d:<name>". A
 * '/' in it is a malformed destination, not another route. */
int api_queues_destination_param(api *a, http_req *req, api_param *p)
{
    char given[FLOW_DEST_MAX], name[FLOW_DEST_MAX];
    (void)a;
    if (api_segment(p->value, given, sizeof(given)) != 0 || flow_dest_canon(given, name) != 0) {
        api_error(req, 400, "invalid_argument",
                  "destination: must be host or host:port (lower case, no scheme, path or "
                  "user; an IPv6 address in brackets)");
        return -1;
    }
    snprintf(p->value, sizeof(p->value), "d:%s", name);
    return 1;
}

void api_queues_list(api *a, http_req *req, const api_params *p)
{
    (void)p;
    api_flow_list(a, req, 1);
}

void api_queues_list_destinations(api *a, http_req *req, const api_params *p)
{
    (void)p;
    api_flow_list(a, req, 0);
}

void api_queues_get(api *a, http_req *req, const api_params *p)
{
    api_flow_fetch(a, req, p->param[0].value);
}

void api_queues_put(api *a, http_req *req, const api_params *p)
{
    api_flow_set(a, req, p->param[0].value);
}

void api_queues_delete(api *a, http_req *req, const api_params *p)
{
    const char *key = p->param[0].value;
    char seg[API_PATH_MAX], given[FLOW_DEST_MAX], spelled[FLOW_KEY_MAX];
    /* a destination as the path spelled it, when that is not its one form */
    int other = 0;
    if (key[0] == 'd') {
        snprintf(seg, sizeof(seg), "%.*s", (int)p->param[0].len, p->param[0].at);
        other = api_segment(seg, given, sizeof(given)) == 0 && strcmp(given, key + 2) != 0;
        if (other) snprintf(spelled, sizeof(spelled), "d:%s", given);
    }
    api_flow_write(a, req, key, NULL, 204, other ? spelled : NULL);
}

void api_queues_pause(api *a, http_req *req, const api_params *p)
{
    api_flow_write(a, req, p->param[0].value, "+paused", 200, NULL);
}

void api_queues_resume(api *a, http_req *req, const api_params *p)
{
    api_flow_write(a, req, p->param[0].value, "-paused", 200, NULL);
}
