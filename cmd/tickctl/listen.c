/* listen.c -- see listen.h. */
#include "listen.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>

#include "client.h"
#include "show.h"
#include "base/trace.h"
#include "base/util.h"
#include "delivery/webhook.h"

typedef struct listener {
    const listen_opts *o;
    struct event_base *base;
    const webhook_keys *keys; /* NULL: no verification */
    webhook_ctx *wctx;
    long served;           /* requests answered */
    int invalid;           /* a signature was invalid */
} listener;

static const char *method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "?";
}

static const char *reason_of(int code)
{
    static const struct { int code; const char *reason; } r[] = {
        {200, "OK"}, {201, "Created"}, {202, "Accepted"}, {204, "No Content"},
        {400, "Bad Request"}, {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"},
        {409, "Conflict"}, {410, "Gone"}, {429, "Too Many Requests"},
        {500, "Internal Server Error"}, {502, "Bad Gateway"}, {503, "Service Unavailable"},
        {504, "Gateway Timeout"}};
    for (size_t i = 0; i < sizeof(r) / sizeof(*r); i++)
        if (r[i].code == code) return r[i].reason;
    return code < 400 ? "OK" : "Error";
}

/* headers of the transport, left out of what is printed */
static int header_framing(const char *name)
{
    static const char *skip[] = {"Host", "Content-Length", "Connection", "Transfer-Encoding",
                                 "Expect", "Accept", "Accept-Encoding", "Keep-Alive"};
    for (size_t i = 0; i < sizeof(skip) / sizeof(*skip); i++)
        if (strcasecmp(name, skip[i]) == 0) return 1;
    return 0;
}

/* tickd-scheduled-at as Unix ms, or -1 when absent or not digits */
static int64_t due_of(const char *v)
{
    int64_t n = 0;
    size_t nd = v ? strspn(v, "0123456789") : 0;
    if (nd == 0 || nd > 18 || v[nd]) return -1;
    for (size_t i = 0; i < nd; i++) n = n * 10 + (v[i] - '0');
    return n;
}

/* What one request was, for printing. */
typedef struct seen {
    int64_t at_ms, due_ms;
    const char *method;
    char *target;            /* printable */
    const unsigned char *body;
    size_t len;
    int sig;                 /* -1 not checked, 0 valid, 1 invalid */
    char why[200];
    int answer;
} seen;

static void print_text(struct evkeyvalq *hdrs, const seen *s)
{
    char *out = NULL, t[40];
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    if (!f) return;
    show_time(s->at_ms, t, sizeof(t));
    fprintf(f, "--- %s %s (%s)\n", s->method, s->target, t);
    for (struct evkeyval *h = hdrs->tqh_first; h; h = h->next.tqe_next) {
        if (header_framing(h->key)) continue;
        char *k = show_clean(h->key, strlen(h->key), 1), *v = show_clean(h->value, strlen(h->value), 1);
        fprintf(f, "%s: %s", k, v);
        if (strcasecmp(h->key, "tickd-scheduled-at") == 0 && due_of(h->value) >= 0) {
            show_time(due_of(h->value), t, sizeof(t));
            fprintf(f, " (%s)", t);
        }
        fputc('\n', f);
        free(k);
        free(v);
    }
    if (s->due_ms >= 0) fprintf(f, "lateness: %" PRId64 " ms\n", s->at_ms - s->due_ms);
    else fprintf(f, "lateness: unknown (no tickd-scheduled-at header)\n");
    const char *tph = evhttp_find_header(hdrs, "traceparent");
    char tp[TRACE_PARENT_LEN + 1], why[160];
    if (tph && trace_parent_parse(tph, tp, why, sizeof(why)) == 0)
        fprintf(f, "trace: %.32s (span %.16s)\n", trace_id_of(tp), tp + 36);
    if (s->sig == 0) fprintf(f, "signature: valid\n");
    else if (s->sig == 1) fprintf(f, "signature: INVALID (%s)\n", s->why);
    if (s->len == 0) {
        fprintf(f, "body: (empty)\n");
    } else {
        size_t shown = s->len < LISTEN_SHOW_MAX ? s->len : LISTEN_SHOW_MAX;
        char *b = show_clean((const char *)s->body, shown, 0);
        size_t blen = strlen(b); /* the cleaner may shorten it */
        fprintf(f, "body (%zu bytes):\n%s%s", s->len, b, blen && b[blen - 1] == '\n' ? "" : "\n");
        if (shown < s->len) fprintf(f, "... (%zu more bytes not shown)\n", s->len - shown);
        free(b);
    }
    fprintf(f, "answered: %d\n\n", s->answer);
    fclose(f);
    fwrite(out, 1, outlen, stdout);
    fflush(stdout);
    free(out);
}

static void print_json(struct evkeyvalq *hdrs, const seen *s)
{
    cJSON *o = cJSON_CreateObject(), *h = cJSON_AddObjectToObject(o, "headers");
    cJSON_AddNumberToObject(o, "at", (double)s->at_ms);
    cJSON_AddStringToObject(o, "method", s->method);
    cJSON_AddStringToObject(o, "path", s->target);
    for (struct evkeyval *e = hdrs->tqh_first; e; e = e->next.tqe_next) {
        char *k = show_clean(e->key, strlen(e->key), 1), *v = show_clean(e->value, strlen(e->value), 1);
        for (char *p = k; *p; p++)
            if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
        if (!cJSON_GetObjectItemCaseSensitive(h, k)) cJSON_AddStringToObject(h, k, v);
        free(k);
        free(v);
    }
    char *b = show_clean((const char *)s->body, s->len, 0);
    cJSON_AddStringToObject(o, "body", b);
    free(b);
    cJSON_AddNumberToObject(o, "body_bytes", (double)s->len);
    if (s->due_ms >= 0) cJSON_AddNumberToObject(o, "lateness_ms", (double)(s->at_ms - s->due_ms));
    else cJSON_AddNullToObject(o, "lateness_ms");
    if (s->sig < 0) cJSON_AddNullToObject(o, "signature");
    else cJSON_AddStringToObject(o, "signature", s->sig ? "invalid" : "valid");
    if (s->sig == 1) cJSON_AddStringToObject(o, "signature_error", s->why);
    cJSON_AddNumberToObject(o, "answered", s->answer);
    char *line = cJSON_PrintUnformatted(o);
    if (line) printf("%s\n", line);
    fflush(stdout);
    free(line);
    cJSON_Delete(o);
}

static void on_complete(struct evhttp_request *req, void *arg)
{
    listener *l = arg;
    (void)req;
    if (l->o->count && l->served >= l->o->count) event_base_loopexit(l->base, NULL);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    listener *l = arg;
    struct evkeyvalq *hdrs = evhttp_request_get_input_headers(req);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    const char *uri = evhttp_request_get_uri(req);
    seen s = {.at_ms = util_realtime_ms(), .sig = -1};
    s.method = method_name(evhttp_request_get_command(req));
    s.target = show_clean(uri ? uri : "?", uri ? strlen(uri) : 1, 1);
    s.len = evbuffer_get_length(in);
    s.body = s.len ? evbuffer_pullup(in, -1) : (const unsigned char *)"";
    s.due_ms = due_of(evhttp_find_header(hdrs, "tickd-scheduled-at"));
    if (l->keys) {
        s.sig = webhook_verify(l->keys, l->wctx, evhttp_find_header(hdrs, "webhook-id"),
                               evhttp_find_header(hdrs, "webhook-timestamp"),
                               evhttp_find_header(hdrs, "webhook-signature"),
                               (const char *)s.body, s.len, s.at_ms / 1000, s.why,
                               sizeof(s.why)) == 0 ? 0 : 1;
        if (s.sig) l->invalid = 1;
    }
    s.answer = s.sig == 1 ? 401 : l->o->status;
    if (l->o->json) print_json(hdrs, &s);
    else print_text(hdrs, &s);

    struct evbuffer *out = evbuffer_new();
    if (s.sig == 1) evbuffer_add_printf(out, "invalid signature: %s\n", s.why);
    else evbuffer_add_printf(out, "%s\n", reason_of(s.answer));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    l->served++;
    if (l->o->count && l->served >= l->o->count) {
        /* the last one: stop once its answer is written */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        evhttp_request_set_on_complete_cb(req, on_complete, l);
    }
    evhttp_send_reply(req, s.answer, reason_of(s.answer), out);
    evbuffer_free(out);
    free(s.target);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig, (void)what;
    event_base_loopbreak(arg);
}

int listen_run(const listen_opts *o)
{
    listener l = {.o = o, .keys = o->keys};
    struct evhttp *http = NULL;
    struct event *sint = NULL, *sterm = NULL;
    int rc = CTL_API;

    signal(SIGPIPE, SIG_IGN);
    l.wctx = l.keys ? webhook_ctx_new() : NULL;
    l.base = event_base_new();
    http = l.base ? evhttp_new(l.base) : NULL;
    if (!http) {
        fprintf(stderr, "tickctl: listen: libevent could not start\n");
        goto done;
    }
    evhttp_set_max_headers_size(http, LISTEN_HEAD_MAX);
    evhttp_set_max_body_size(http, LISTEN_BODY_MAX);
    evhttp_set_timeout(http, LISTEN_TIMEOUT_S);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                         EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                         EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(http, on_request, &l);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, o->bind,
                                                                    (ev_uint16_t)o->port);
    if (!bs) {
        fprintf(stderr, "tickctl: listen: cannot listen on %s:%d: %s\n", o->bind, o->port,
                evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
        goto done;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = o->port;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
            port = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
            port = ntohs(a->sin_port);
        }
    }
    fprintf(stderr, "tickctl: listening on http://%s%s%s:%d/ (answering %d; %s)\n",
            ss.ss_family == AF_INET6 ? "[" : "", host, ss.ss_family == AF_INET6 ? "]" : "",
            port, o->status, l.keys ? "verifying signatures" : "signatures not checked");
    sint = evsignal_new(l.base, SIGINT, on_signal, l.base);
    sterm = evsignal_new(l.base, SIGTERM, on_signal, l.base);
    if (!sint || !sterm || evsignal_add(sint, NULL) != 0 || evsignal_add(sterm, NULL) != 0) {
        fprintf(stderr, "tickctl: listen: cannot catch signals\n");
        goto done;
    }
    event_base_dispatch(l.base);
    rc = l.invalid ? CTL_INVALID_SIG : CTL_OK;
done:
    if (sint) event_free(sint);
    if (sterm) event_free(sterm);
    if (http) evhttp_free(http);
    if (l.base) event_base_free(l.base);
    webhook_ctx_free(l.wctx);
    return rc;
}
