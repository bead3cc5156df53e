/* api.c -- see api.h. The API object, its route table (api_routes: every
 * route's method, pattern, handler and scope), the router that matches a
 * request to its row, and the gate that checks its token against the row's
 * scope. The handlers are in one file per resource (api_handler.h). */
#include "edge/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/util.h"
#include "edge/api_handler.h"
#include "edge/api_console.h"
#include "edge/api_metrics.h"
#include "edge/api_queues.h"
#include "edge/api_reply.h"
#include "edge/api_schedules.h"
#include "edge/api_tasks.h"
#include "edge/http_server.h"
#include "edge/openapi.h"
#include "edge/ui.h"

static void api_openapi(api *a, http_req *req, const api_params *p)
{
    (void)a, (void)p;
    http_reply(req, 200, "OK", "application/json", openapi_json, openapi_json_len);
}

void api_set_waiting(api *a, const char *why)
{
    free(a->waiting_for);
    a->waiting_for = xstrdup(why);
}

void api_set_store(api *a, store *s)
{
    a->s = s;
    free(a->waiting_for);
    a->waiting_for = NULL;
}

/* Before the store is reached: every request is answered 503, /healthz with
 * the reason. */
static void api_route_waiting(api *a, http_req *req, const char *path)
{
    const char *why = a->waiting_for ? a->waiting_for : "starting";
    if (strcmp(path, "/healthz") == 0) {
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "redis", why);
        cJSON_AddStringToObject(body, "status", "starting");
        api_send_json(req, 503, "Service Unavailable", body);
        cJSON_Delete(body);
        return;
    }
    http_add_header(req, "Retry-After", "1");
    api_error(req, 503, "unavailable", "store: not reached yet: %.300s", why);
}

/* ---- routes ------------------------------------------------------------ */

/* Who may use a route: anyone (also with tokens set), a read-only token
 * (server.read_tokens) or better, or only a full one (server.api_token). */
enum { API_OPEN, API_READ, API_ADMIN };

/* One route: a method (HEAD comes as GET), a pattern, its handler and who
 * may use it. A pattern is the path, a {name} standing for a segment of the
 * kind named in api_kinds. The rows of one pattern make the Allow header of
 * its 405, in their order. ready, when set, runs as soon as the path is
 * known to be under the route, before its parameters' checks: a store that
 * cannot serve it answers there. */
typedef struct api_route_row {
    const char *method;
    const char *pattern;
    api_handler *fn;
    int scope;
    api_ready_fn *ready;
} api_route_row;

/* What a {name} of a pattern matches. check (NULL: any segment, the
 * handler looks at it) runs as the path is matched, so that a segment that
 * cannot name one is answered before the method is looked at. rest: the
 * segment is the rest of the path, slashes and all. unknown: the 404's
 * message for a path below a good one that no route takes (NULL: the
 * message names the path). */
typedef struct api_kind {
    const char *name;
    api_param_fn *check;
    int rest;
    const char *unknown;
} api_kind;

static const api_kind api_kinds[] = {
    {"id", NULL, 0, NULL},
    {"task", api_tasks_param, 0, NULL},
    {"schedule", api_schedules_param, 0, "path: no such resource"},
    {"queue", api_queues_param, 0, NULL},
    {"destination", api_queues_destination_param, 1, NULL},
};

static void api_whoami(api *a, http_req *req, const api_params *p);

/* Every route of the API; a new one is a row. The first pattern that
 * matches a path is its route: a fixed segment goes before a {name} in the
 * same place (/v1/tasks/batch before /v1/tasks/{id}). */
static const api_route_row api_routes[] = {
    {"GET", "/v1/tasks", api_tasks_list, API_READ, NULL},
    {"POST", "/v1/tasks", api_tasks_add, API_ADMIN, NULL},
    {"POST", "/v1/tasks/batch", api_tasks_add_batch, API_ADMIN, NULL},
    {"POST", "/v1/tasks/retry", api_tasks_retry_matching, API_ADMIN, NULL},
    {"GET", "/v1/tasks/{id}", api_tasks_get, API_READ, NULL},
    {"DELETE", "/v1/tasks/{id}", api_tasks_cancel, API_ADMIN, NULL},
    {"POST", "/v1/tasks/{task}/retry", api_tasks_retry, API_ADMIN, NULL},
    {"POST", "/v1/tasks/{task}/run", api_tasks_run, API_ADMIN, NULL},

    {"GET", "/v1/schedules", api_schedules_list, API_READ, NULL},
    {"GET", "/v1/schedules:preview", api_console_preview, API_READ, NULL},
    {"POST", "/v1/schedules", api_schedules_add, API_ADMIN, NULL},
    {"GET", "/v1/schedules/{schedule}", api_schedules_get, API_READ, NULL},
    {"PUT", "/v1/schedules/{schedule}", api_schedules_replace, API_ADMIN, NULL},
    {"DELETE", "/v1/schedules/{schedule}", api_schedules_delete, API_ADMIN, NULL},
    {"POST", "/v1/schedules/{schedule}/pause", api_schedules_pause, API_ADMIN, NULL},
    {"POST", "/v1/schedules/{schedule}/resume", api_schedules_resume, API_ADMIN, NULL},

    {"GET", "/v1/queues", api_queues_list, API_READ, api_queues_ready},
    {"GET", "/v1/queues/{queue}", api_queues_get, API_READ, api_queues_ready},
    {"PUT", "/v1/queues/{queue}", api_queues_put, API_ADMIN, api_queues_ready},
    {"DELETE", "/v1/queues/{queue}", api_queues_delete, API_ADMIN, api_queues_ready},
    {"POST", "/v1/queues/{queue}/pause", api_queues_pause, API_ADMIN, api_queues_ready},
    {"POST", "/v1/queues/{queue}/resume", api_queues_resume, API_ADMIN, api_queues_ready},
    {"GET", "/v1/destinations", api_queues_list_destinations, API_READ, api_queues_ready},
    {"GET", "/v1/destinations/{destination}", api_queues_get, API_READ, api_queues_ready},
    {"PUT", "/v1/destinations/{destination}", api_queues_put, API_ADMIN, api_queues_ready},
    {"DELETE", "/v1/destinations/{destination}", api_queues_delete, API_ADMIN, api_queues_ready},

    {"GET", "/v1/stats", api_metrics_stats, API_READ, NULL},
    {"GET", "/v1/history", api_console_history, API_READ, NULL},
    {"GET", "/v1/cluster", api_console_cluster, API_READ, NULL},
    {"GET", "/v1/whoami", api_whoami, API_READ, NULL},
    {"GET", "/v1/openapi.json", api_openapi, API_OPEN, NULL},
    {"GET", "/healthz", api_metrics_health, API_OPEN, NULL},
    {"GET", "/metrics", api_metrics_scrape, API_OPEN, NULL},
};

/* A 405's message where it says more than "method: use <Allow>". */
static const struct {
    const char *pattern, *msg;
} api_not_allowed_msgs[] = {
    {"/v1/tasks", "method: use POST to create a task, GET to list"},
    {"/v1/tasks/batch", "method: use POST for a batch"},
    {"/v1/tasks/retry", "method: use POST to retry tasks"},
    {"/v1/tasks/{id}", "method: use GET or DELETE on a task"},
    {"/v1/schedules", "method: use POST to create a schedule, GET to list"},
    {"/v1/schedules/{schedule}", "method: use GET, PUT or DELETE on a schedule"},
};

#define API_NROUTES (sizeof(api_routes) / sizeof(*api_routes))

/* A path's route, as api_find finds it. */
typedef struct api_match {
    const api_route_row *route;   /* the row of the path and the method, or NULL */
    const api_route_row *path;    /* the path's first row (405 when route is NULL), or NULL (404) */
    const char *unknown;      /* the 404's message when a {name}'s kind has one */
    int answered;             /* a check or a ready answered the request */
    api_params params;
} api_match;

static const api_kind *api_kind_find(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof(api_kinds) / sizeof(*api_kinds); i++)
        if (strlen(api_kinds[i].name) == n && strncmp(api_kinds[i].name, name, n) == 0)
            return &api_kinds[i];
    return NULL;
}

/* Whether path is row's pattern: 1, 0, or -1 when req was answered (a
 * ready or a parameter's check). Without req (the gate: the store may not
 * be there yet) the pattern alone decides. */
static int api_match_row(api *a, http_req *req, const api_route_row *row, const char *path,
                         api_match *m)
{
    const char *s = path, *pt = row->pattern;
    const api_kind *last = NULL;
    int readied = !req || !row->ready;
    m->params.n = 0;
    while (*pt) {
        if (*pt != '{') {
            if (*pt != *s) goto differs;
            pt++, s++;
            continue;
        }
        size_t nl = strcspn(pt + 1, "}");
        const api_kind *k = api_kind_find(pt + 1, nl);
        api_param *p = &m->params.param[m->params.n++];
        pt += nl + 2;
        p->at = s;
        p->len = k->rest ? strlen(s) : strcspn(s, "/");
        memcpy(p->value, s, p->len);
        p->value[p->len] = '\0';
        s += p->len;
        if (!readied) {
            readied = 1;
            if (row->ready(a, req) != 0) return -1;
        }
        if (req && k->check) {
            int r = k->check(a, req, p);
            if (r <= 0) return r;
        }
        last = k;
    }
    if (*s) goto differs;
    if (!readied && row->ready(a, req) != 0) return -1;
    return 1;
differs:
    if (last && last->unknown) m->unknown = last->unknown;
    return 0;
}

/* The route of method and path (shorter than API_PATH_MAX) into m. With
 * req, checks run and may answer it (m->answered). */
static void api_find(api *a, http_req *req, const char *method, const char *path, api_match *m)
{
    m->route = m->path = NULL;
    m->unknown = NULL;
    m->answered = 0;
    m->params.path = path;
    for (size_t i = 0; i < API_NROUTES && !m->path; i++) {
        int r = api_match_row(a, req, &api_routes[i], path, m);
        if (r < 0) {
            m->answered = 1;
            return;
        }
        if (r) m->path = &api_routes[i];
    }
    for (const api_route_row *row = m->path; row && row < api_routes + API_NROUTES; row++)
        if (strcmp(row->pattern, m->path->pattern) == 0 && strcmp(row->method, method) == 0) {
            m->route = row;
            break;
        }
}

/* 405: the path's methods, from the table. */
static void api_not_allowed(http_req *req, const api_route_row *path)
{
    char allow[64] = "";
    size_t n = 0;
    for (const api_route_row *row = path; row < api_routes + API_NROUTES; row++)
        if (strcmp(row->pattern, path->pattern) == 0 && n + 16 < sizeof(allow))
            n += (size_t)snprintf(allow + n, sizeof(allow) - n, "%s%s", n ? ", " : "",
                                  row->method);
    http_add_header(req, "Allow", allow);
    for (size_t i = 0; i < sizeof(api_not_allowed_msgs) / sizeof(*api_not_allowed_msgs); i++)
        if (strcmp(api_not_allowed_msgs[i].pattern, path->pattern) == 0) {
            api_error(req, 405, "method_not_allowed", "%s", api_not_allowed_msgs[i].msg);
            return;
        }
    api_error(req, 405, "method_not_allowed", "method: use %s", allow);
}

/* Every {name} of the table has a kind, and no route more of them than a
 * request holds: a wrong row stops tickd at its start. */
static void api_routes_check(void)
{
    for (size_t i = 0; i < API_NROUTES; i++) {
        int n = 0;
        for (const char *pt = strchr(api_routes[i].pattern, '{'); pt; pt = strchr(pt + 1, '{')) {
            if (!api_kind_find(pt + 1, strcspn(pt + 1, "}")) || ++n > API_PARAMS_MAX)
                log_panic("api route %s %s: {%.*s}: no such kind, or too many", api_routes[i].method,
                          api_routes[i].pattern, (int)strcspn(pt + 1, "}"), pt + 1);
        }
    }
}

static void api_route(http_req *req, void *arg)
{
    api *a = arg;
    const char *uri = http_target(req);
    char path[API_PATH_MAX];
    size_t n = strcspn(uri, "?");
    if (n >= sizeof(path)) {
        api_error(req, 404, "not_found", "path: no such resource");
        return;
    }
    memcpy(path, uri, n);
    path[n] = '\0';
    if (ui_route(req, path)) return;
    if (!a->s) {
        api_route_waiting(a, req, path);
        return;
    }
    api_match m;
    api_find(a, req, http_method(req), path, &m);
    if (m.answered) return;
    if (m.route) m.route->fn(a, req, &m.params);
    else if (m.path) api_not_allowed(req, m.path);
    else if (m.unknown) api_error(req, 404, "not_found", "%s", m.unknown);
    else api_error(req, 404, "not_found", "path: no such resource: %.200s", path);
}

/* ---- access ------------------------------------------------------------ */

/* What the request's token may do: use the open routes alone (no or a
 * wrong token), read, or everything. Every token is compared, each over its
 * whole length, whatever the bytes: the time taken tells neither a token's
 * bytes nor which token matched. */
static int api_authorized(const api *a, http_req *req)
{
    const char *h = http_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return API_OPEN;
    for (h += 7; *h == ' '; h++) {}
    size_t m = strlen(h);
    unsigned char admin = 0, read = 0;
    for (int t = 0; t < a->ntokens; t++) {
        const char *tok = a->tokens[t];
        size_t n = strlen(tok);
        unsigned char diff = n != m;
        for (size_t i = 0; i < n; i++) diff |= (unsigned char)(tok[i] ^ (i < m ? h[i] : 0));
        unsigned char hit = (unsigned char)(diff == 0);
        admin |= (unsigned char)(hit & (t < a->nadmin));
        read |= hit;
    }
    return admin ? API_ADMIN : read ? API_READ : API_OPEN;
}

/* GET /v1/whoami: what the request's token may do (the console shows no
 * action to a read-only one). */
static void api_whoami(api *a, http_req *req, const api_params *p)
{
    (void)p;
    if (!a->ntokens) ui_whoami(req, "open");
    else ui_whoami(req, api_authorized(a, req) == API_ADMIN ? "admin" : "read");
}

/* Who may send the request, by the route table. One that no route takes
 * (404, 405) is open outside /v1/ and on an open route's path; under /v1/
 * it needs a token, a full one unless it is a GET: no read-only token has
 * a body read. */
static int api_scope(api *a, http_req *req)
{
    const char *target = http_target(req), *method = http_method(req);
    char path[API_PATH_MAX];
    size_t n = strcspn(target, "?");
    api_match m = {0};
    if (n < sizeof(path)) {
        memcpy(path, target, n);
        path[n] = '\0';
        api_find(a, NULL, method, path, &m);
        if (m.route) return m.route->scope;
    }
    if (strncmp(target, "/v1/", 4) != 0 || (m.path && m.path->scope == API_OPEN)) return API_OPEN;
    return strcmp(method, "GET") == 0 ? API_READ : API_ADMIN;
}

/* The HTTP server's gate, with an API token set: a request without the
 * token its route needs, or a body sent to an open route, is refused on
 * its head, before the body is read. */
static int api_gate(http_req *req, void *arg, http_refusal *out)
{
    api *a = arg;
    int need = api_scope(a, req);
    if (need == API_OPEN) {
        /* the open routes take no body: without the token, no client may
         * have the server buffer server.max_body per connection */
        if (!http_body_coming(req)) return 0;
        *out = (http_refusal){413, "Payload Too Large", "payload_too_large", ""};
        snprintf(out->msg, sizeof(out->msg), "body: only /v1/ requests carry one");
        return 1;
    }
    if (http_header_count(req, "Authorization") > 1) {
        *out = (http_refusal){400, "Bad Request", "invalid_argument", ""};
        snprintf(out->msg, sizeof(out->msg), "Authorization: given more than once");
        return 1;
    }
    int has = api_authorized(a, req);
    if (has == API_READ && need == API_ADMIN) {
        *out = (http_refusal){403, "Forbidden", "forbidden", ""};
        const char *target = http_target(req);
        size_t n = strcspn(target, "?");
        snprintf(out->msg, sizeof(out->msg), "Authorization: a read-only token "
                 "(server.read_tokens); %.16s %.*s needs a token of server.api_token",
                 http_method(req), (int)(n < 120 ? n : 120), target);
        return 1;
    }
    if (has != API_OPEN) return 0;
    int given = http_header(req, "Authorization") != NULL;
    http_add_header(req, "WWW-Authenticate", given ? "Bearer error=\"invalid_token\"" : "Bearer");
    *out = (http_refusal){401, "Unauthorized", "unauthorized", ""};
    snprintf(out->msg, sizeof(out->msg), "Authorization: %s",
             given ? "wrong token (want Bearer and server.api_token)"
                   : "missing (send Authorization: Bearer <server.api_token>)");
    return 1;
}

static void api_free_tokens(api *a)
{
    for (int t = 0; t < a->ntokens; t++) free(a->tokens[t]);
    free(a->tokens);
    a->tokens = NULL;
    a->ntokens = a->nadmin = 0;
}

/* Add the space-separated tokens of list (as config_validate checked them),
 * but those already there: a token in both lists stays a full one. */
static void api_add_tokens(api *a, const char *list)
{
    for (const char *t = list ? list : ""; *(t += strspn(t, " "));) {
        size_t n = strcspn(t, " "), have = 0;
        for (int i = 0; i < a->ntokens && !have; i++)
            have = strlen(a->tokens[i]) == n && memcmp(a->tokens[i], t, n) == 0;
        if (!have) {
            a->tokens = xrealloc(a->tokens, (size_t)(a->ntokens + 1) * sizeof(*a->tokens));
            a->tokens[a->ntokens++] = xstrndup(t, n);
        }
        t += n;
    }
}

int api_set_tokens(api *a, const char *token, const char *read_tokens, int *nread)
{
    api_free_tokens(a);
    api_add_tokens(a, token);
    a->nadmin = a->ntokens;
    /* read-only tokens without a full one would guard nothing
     * (config_validate refuses it; the API stays open rather than half shut) */
    if (a->nadmin) api_add_tokens(a, read_tokens);
    if (nread) *nread = a->ntokens - a->nadmin;
    http_server_set_gate(a->http, a->ntokens ? api_gate : NULL);
    return a->nadmin;
}

api *api_create(struct event_base *base, const char *listen, int64_t max_body,
                int64_t idle_timeout_ms, const char *token, const char *read_tokens, store *s,
                api_stats_fn *stats, void *stats_priv, char *err, size_t errlen)
{
    api_routes_check();
    api *a = xcalloc(1, sizeof(*a));
    a->s = s;
    a->req_pool.keep = a->item_pool.keep = UTIL_POOL_KEEP;
    a->stats = stats;
    a->stats_priv = stats_priv;
    a->http = http_server_new(base, listen, (size_t)max_body, idle_timeout_ms, api_route, a, err,
                              errlen);
    if (!a->http) {
        free(a);
        return NULL;
    }
    api_set_tokens(a, token, read_tokens, NULL);
    return a;
}

void api_on_schedule(api *a, api_schedule_fn *fn, void *priv)
{
    a->on_schedule = fn;
    a->on_schedule_priv = priv;
}

int api_port(const api *a) { return http_server_port(a->http); }
http_server *api_http(const api *a) { return a->http; }
int api_busy(const api *a) { return a->busy; }

void api_stop_accepting(api *a) { http_server_stop_accepting(a->http); }

void api_on_flow(api *a, api_flow_fn *fn, void *priv)
{
    a->on_flow = fn;
    a->on_flow_priv = priv;
}

void api_on_metrics(api *a, api_gauges_fn *fn, void *priv)
{
    a->gauges = fn;
    a->gauges_priv = priv;
}

void api_free(api *a)
{
    if (!a) return;
    free(a->count_waiting);
    free(a->waiting_for);
    http_server_free(a->http);
    api_free_tokens(a);
    util_pool_drain(&a->req_pool);
    util_pool_drain(&a->item_pool);
    free(a);
}
