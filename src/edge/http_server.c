/* http_server.c -- see http_server.h. */
#include "edge/http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

#define HTTP_MAX_OUT (64 * 1024)    /* unsent answers: above this, stop reading */
#define HTTP_LINGER_MS 2000         /* after an error answer: read and drop */
#define HTTP_READ_MIN 4096

typedef struct hconn hconn;

struct http_req {
    hconn *c;
    http_request p;                   /* parsed in place: offsets into c->in */
    char extra[1024];                 /* headers added by http_add_header */
    size_t extra_len;
};

struct hconn {
    http_server *srv;
    hconn *prev, *next;
    int fd;
    struct event *rev, *wev;
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_off, out_cap;
    int64_t last_ms;                 /* last byte read or written (closing: written) */
    int parsed;                      /* req's head parsed, body still coming */
    int pending;                     /* req is with the handler */
    int closing;                     /* close once out is written */
    int lingering;                   /* written and shut down: drop input */
    int dead;                        /* fd closed; freed when req is answered */
    int in_parse;                    /* inside http_conn_run */
    int reading;                     /* rev is added */
    char saved;                      /* the byte under the body's NUL */
    int64_t head_ms;                 /* the head's first byte came (0: no head begun) */
    int64_t body_ms;                 /* the head ended and the body began */
    http_req req;
};

struct http_server {
    struct event_base *base;
    struct evconnlistener *lev;
    struct event *sweep;
    struct event *resume;            /* accepting again after an accept error */
    int64_t accept_warned_ms;
    http_handler *handler;
    http_gate *gate;
    void *arg;
    size_t max_body;
    int64_t idle_ms, header_ms, body_ms;
    int port;
    int max_conns, nconns;
    int access_log;                  /* a log line per answered request */
    int at_limit;                    /* accepting paused at max_conns */
    int64_t limit_warned_ms;
    hconn *conns;
};

static int64_t http_now_ms(http_server *s)
{
    struct timeval tv;
    event_base_gettimeofday_cached(s->base, &tv);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ---- connection lifetime --------------------------------------------- */

static void http_conn_free(hconn *c)
{
    http_server *s = c->srv;
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->rev) event_free(c->rev);
    if (c->wev) event_free(c->wev);
    if (c->fd >= 0) close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
    s->nconns--;
    if (s->at_limit && s->nconns < s->max_conns) {
        s->at_limit = 0;
        if (s->lev) evconnlistener_enable(s->lev);
    }
}

/* The client is gone (or must be): close now, or, with a request at the
 * handler, close the socket and keep c until its answer comes. */
static void http_conn_close(hconn *c)
{
    if (!c->pending) {
        http_conn_free(c);
        return;
    }
    c->dead = 1;
    event_free(c->rev);
    event_free(c->wev);
    c->rev = c->wev = NULL;
    close(c->fd);
    c->fd = -1;
}

static void http_read_on(hconn *c, int on)
{
    if (on == c->reading || c->dead) return;
    if (on) event_add(c->rev, NULL);
    else event_del(c->rev);
    c->reading = on;
}

/* Read only while what piles up stays small: unsent answers under
 * HTTP_MAX_OUT, and behind a request at the handler at most one more head.
 * On a steady connection neither bound is reached, so this costs no
 * syscall. */
static void http_want_read(hconn *c)
{
    int on = c->lingering || c->closing ||
             (c->out_len - c->out_off < HTTP_MAX_OUT &&
              !(c->pending && c->in_len - c->req.p.len >= HTTP_MAX_HEAD));
    http_read_on(c, on);
}

/* ---- output -------------------------------------------------------------- */

static void http_out_reserve(hconn *c, size_t n)
{
    if (c->out_len + n <= c->out_cap) return;
    if (c->out_off) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
        if (c->out_len + n <= c->out_cap) return;
    }
    size_t cap = c->out_cap ? c->out_cap : 1024;
    while (cap < c->out_len + n) cap *= 2;
    c->out = xrealloc(c->out, cap);
    c->out_cap = cap;
}

static void http_out_add(hconn *c, const char *p, size_t n)
{
    http_out_reserve(c, n);
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static void http_after_write(hconn *c)
{
    if (c->closing) {
        /* answered; read what the client still sends so that it sees the
         * answer rather than a reset, then close */
        shutdown(c->fd, SHUT_WR);
        c->lingering = 1;
        c->last_ms = http_now_ms(c->srv);
        http_read_on(c, 1);
    }
}

/* Write what is queued; 0, or -1 when the connection was closed. */
static int http_flush(hconn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n > 0) {
            c->out_off += (size_t)n;
            c->last_ms = http_now_ms(c->srv);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            event_add(c->wev, NULL);
            return 0;
        }
        http_conn_close(c);
        return -1;
    }
    c->out_off = c->out_len = 0;
    http_after_write(c);
    return 0;
}

static void http_run(hconn *c);

static void http_write_cb(evutil_socket_t fd, short what, void *arg)
{
    hconn *c = arg;
    (void)fd;
    (void)what;
    if (http_flush(c) != 0) return;
    if (c->out_len == 0) {
        event_del(c->wev);
        http_run(c);
    }
}

/* The head's lines from the status line's end to Content-Length's value,
 * "\r\nDate: <IMF-fixdate>\r\nContent-Length: ", made once a second (every
 * answer has them): its length in *n. */
static const char *http_date_lines(http_server *s, size_t *n)
{
    static char buf[96];
    static size_t len;
    static time_t at = -1;
    struct timeval tv;
    event_base_gettimeofday_cached(s->base, &tv);
    if (tv.tv_sec != at) {
        struct tm tm;
        at = tv.tv_sec;
        gmtime_r(&at, &tm);
        len = strftime(buf, sizeof(buf), "\r\nDate: %a, %d %b %Y %H:%M:%S GMT\r\nContent-Length: ",
                       &tm);
    }
    *n = len;
    return buf;
}

/* Queue the answer to c's current request; unless keep_alive, the
 * connection closes after it. The answer to a HEAD has no content. */
static void http_out_reply(hconn *c, int status, const char *reason, const char *type,
                           const char *body, size_t len, int keep_alive)
{
    http_req *r = &c->req;
    char head[512];
    util_buf b = UTIL_BUF(head);
    size_t dn;
    const char *date = http_date_lines(c->srv, &dn);
    log_assert(status >= 100 && status <= 599);   /* three digits (RFC 9110 15) */
    char line[13] = {'H', 'T', 'T', 'P', '/', '1', '.', '1', ' ', (char)('0' + status / 100 % 10),
                     (char)('0' + status / 10 % 10), (char)('0' + status % 10), ' '};
    util_buf_add(&b, line, sizeof(line));
    util_buf_str(&b, reason);
    util_buf_add(&b, date, dn);
    util_buf_int(&b, (long long)len);
    util_buf_add(&b, "\r\n", 2);
    if (type && len) {
        util_buf_add(&b, "Content-Type: ", 14);
        util_buf_str(&b, type);
        util_buf_add(&b, "\r\n", 2);
    }
    if (!keep_alive) util_buf_str(&b, "Connection: close\r\n");
    else if (r->p.http10) util_buf_str(&b, "Connection: keep-alive\r\n");
    size_t n = b.len;
    http_out_reserve(c, n + r->extra_len + 2 + len);
    http_out_add(c, head, n);
    http_out_add(c, r->extra, r->extra_len);
    http_out_add(c, "\r\n", 2);
    if (!r->p.head && len) http_out_add(c, body, len);
    if (!keep_alive) c->closing = 1;
}

/* An answer of the server's own, after which the connection closes.
 * `keep_extra`: the headers added to this request's answer go with it (the
 * head was parsed). */
static void http_fail_as(hconn *c, const http_refusal *f, int keep_extra)
{
    char body[400], text[240];
    size_t t = 0;
    /* msg is tickd's own text, with at most a field's name (a token) in it;
     * escaped all the same, so that the body is JSON whatever it holds */
    for (const char *p = f->msg; *p && t + 7 < sizeof(text); p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\') t += (size_t)snprintf(text + t, 3, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f) text[t++] = '?';
        else text[t++] = (char)ch;
    }
    text[t] = '\0';
    int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
                     f->code, text);
    /* the head may not have been parsed: nothing of an earlier request's
     * (http_reply resets the parser). A HEAD's refusal has no content
     * either (RFC 9110 9.3.2): a client would read it as the next answer. */
    if (!keep_extra) c->req.extra_len = 0;
    http_out_reply(c, f->status, f->reason, "application/json", body, (size_t)n, 0);
    c->parsed = 0;
    c->in_len = 0;     /* nothing after this is read as a request */
}

/* ---- input --------------------------------------------------------------- */

static void http_grow_in(hconn *c, size_t want)
{
    if (want <= c->in_cap) return;
    size_t cap = c->in_cap ? c->in_cap : HTTP_READ_MIN;
    while (cap < want) cap *= 2;
    c->in = xrealloc(c->in, cap);
    c->in_cap = cap;
}

/* Take the next complete request off c->in: 1 = ready for the handler,
 * 0 = incomplete, -1 = an error answer is queued and the connection closes.
 * Between the head and the body, the gate, then "100 Continue". */
static int http_next(hconn *c)
{
    http_req *r = &c->req;
    http_request *p = &r->p;
    http_server *s = c->srv;
    int k;
    if (!c->parsed) {
        k = http_request_parse(p, c->in, &c->in_len);
        if (k != HTTP_REQ_HEAD) goto out;
        r->extra_len = 0;
        http_refusal f;
        if (s->gate && s->gate(r, s->arg, &f)) {
            http_fail_as(c, &f, 1);
            return -1;
        }
        c->parsed = 1;
        c->head_ms = 0;
        c->body_ms = http_now_ms(s);
        size_t have = c->in_len - p->body;
        if (p->expect && !p->http10 && (p->chunked || have < p->body_len))
            http_out_add(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    k = http_request_parse(p, c->in, &c->in_len);
    /* a Content-Length body: room for all of it, and for a NUL after it
     * (the byte is the next request's first, kept aside until this one is
     * answered) */
    if (k == HTTP_REQ_MORE && !p->chunked) http_grow_in(c, p->len + 1);
out:
    if (k == HTTP_REQ_ERROR) {
        http_fail_as(c, &p->refusal, 0);
        return -1;
    }
    if (k != HTTP_REQ_DONE) return 0;
    c->parsed = 0;
    c->pending = 1;
    c->body_ms = 0;
    return 1;
}

/* Parse and hand on requests while the connection is free to, writing the
 * answers when the handler gave them at once; stop while unsent answers
 * exceed HTTP_MAX_OUT (a client that sends and never reads). */
static void http_run(hconn *c)
{
    if (c->in_parse || c->dead) return;
    c->in_parse = 1;
    for (;;) {
        while (!c->pending && !c->closing && !c->lingering &&
               c->out_len - c->out_off < HTTP_MAX_OUT) {
            if (http_next(c) <= 0) break;
            http_req *r = &c->req;
            /* the body is NUL-terminated for the handler; the byte under the
             * NUL (a pipelined request's first) is put back by http_reply.
             * r->p.len <= in_len < in_cap: there is room. */
            c->saved = c->in[r->p.len];
            c->in[r->p.len] = '\0';
            c->srv->handler(r, c->srv->arg);
        }
        if (!c->out_len || c->out_off) break;   /* nothing new, or a write is under way */
        c->in_parse = 0;
        if (http_flush(c) != 0) return;
        c->in_parse = 1;
        /* all written: more pipelined requests may wait behind the bound */
        if (c->out_len || c->pending || c->closing || c->lingering || !c->in_len) break;
    }
    c->in_parse = 0;
    http_want_read(c);
}

/* The access log's line for r, answered with status and len body bytes. */
static void http_access(hconn *c, const http_req *r, int status, size_t len)
{
    struct sockaddr_storage ss = {.ss_family = AF_UNSPEC};
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "-", remote[INET6_ADDRSTRLEN + 16];
    int port = 0;
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
            port = ntohs(in->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
            port = ntohs(in6->sin6_port);
        }
    }
    snprintf(remote, sizeof(remote), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
    log_access(remote, c->in + r->p.method, http_request_target(&r->p, c->in), status, len,
               (long long)(c->head_ms ? http_now_ms(c->srv) - c->head_ms : 0));
}

void http_reply(http_req *r, int status, const char *reason, const char *type,
                const char *body, size_t len)
{
    hconn *c = r->c;
    c->pending = 0;
    if (c->dead) {
        http_conn_free(c);
        return;
    }
    if (c->srv->access_log) http_access(c, r, status, len);
    http_out_reply(c, status, reason, type, body, len, r->p.keep_alive);
    c->in[r->p.len] = c->saved;
    memmove(c->in, c->in + r->p.len, c->in_len - r->p.len);
    c->in_len -= r->p.len;
    /* answered: an error before the next head is parsed has content */
    http_request_reset(&r->p);
    c->head_ms = c->in_len ? http_now_ms(c->srv) : 0;
    if (c->in_cap > 65536 && c->in_len < HTTP_READ_MIN / 2) {
        c->in = xrealloc(c->in, HTTP_READ_MIN);   /* after a large body */
        c->in_cap = HTTP_READ_MIN;
    }
    if (c->in_parse) return;   /* answered from within the handler: http_run goes on */
    if (c->out_off == 0 && http_flush(c) != 0) return;
    if (c->out_len == 0) http_run(c);
    else http_want_read(c);
}

static void http_read_cb(evutil_socket_t fd, short what, void *arg)
{
    hconn *c = arg;
    http_server *s = c->srv;
    (void)what;
    if (c->in_cap - c->in_len < HTTP_READ_MIN / 2) http_grow_in(c, c->in_len + HTTP_READ_MIN);
    if (c->lingering) c->in_len = 0;
    ssize_t n = read(fd, c->in + c->in_len, c->in_cap - c->in_len - 1);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
        http_conn_close(c);
        return;
    }
    /* an answer ends it: drop; what the client sends meanwhile does not
     * keep the connection (last_ms counts from the last write) */
    if (c->lingering || c->closing) return;
    c->last_ms = http_now_ms(s);
    if (c->pending && c->in_len == c->req.p.len) {
        /* the first byte read sits under the pending body's NUL: keep it
         * aside as http_run does, for http_reply to put back */
        c->saved = c->in[c->in_len];
        c->in[c->in_len] = '\0';
    }
    c->in_len += (size_t)n;
    if (c->pending) {
        /* pipelined requests wait; bound what piles up meanwhile */
        http_want_read(c);
        return;
    }
    if (!c->parsed && !c->head_ms) c->head_ms = c->last_ms;
    http_run(c);
}

/* ---- server -------------------------------------------------------------- */

static hconn *http_conn_new(http_server *s, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    hconn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    c->fd = fd;
    c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, http_read_cb, c);
    c->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, http_write_cb, c);
    c->last_ms = http_now_ms(s);
    c->req.c = c;
    http_request_init(&c->req.p, s->max_body);
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    if (!c->rev || !c->wev) {
        log_error("http: out of memory for a connection");
        http_conn_free(c);
        return NULL;
    }
    http_read_on(c, 1);
    return c;
}

/* At max_conns open connections, stop accepting: the kernel's backlog holds
 * the next ones until a connection closes (http_conn_free). */
static void http_check_limit(http_server *s)
{
    if (s->nconns < s->max_conns || s->at_limit || !s->lev) return;
    s->at_limit = 1;
    evconnlistener_disable(s->lev);
    int64_t now = http_now_ms(s);
    if (now - s->limit_warned_ms >= 10000) {
        log_warn("http: %d connections open (server.max_connections or the descriptor "
                 "limit); pausing accepts until one closes", s->nconns);
        s->limit_warned_ms = now;
    }
}

static void http_accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                           int salen, void *arg)
{
    http_server *s = arg;
    (void)lev;
    (void)sa;
    (void)salen;
    http_conn_new(s, fd);
    http_check_limit(s);
}

int http_server_adopt(http_server *s, int fd)
{
    if (evutil_make_socket_nonblocking(fd) != 0 || !http_conn_new(s, fd)) return -1;
    http_check_limit(s);
    return 0;
}

static void http_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    http_server *s = arg;
    (void)fd;
    (void)what;
    if (s->lev && !s->at_limit) evconnlistener_enable(s->lev);
}

/* Out of descriptors (or another accept error): the pending connection
 * would be reported again at once, so stop accepting for 100 ms rather than
 * spin, and say so at most once a second. */
static void http_accept_error_cb(struct evconnlistener *lev, void *arg)
{
    http_server *s = arg;
    int e = EVUTIL_SOCKET_ERROR();
    int64_t now = http_now_ms(s);
    if (now - s->accept_warned_ms >= 1000) {
        log_warn("http: accept: %s; pausing accepts for 100 ms", evutil_socket_error_to_string(e));
        s->accept_warned_ms = now;
    }
    evconnlistener_disable(lev);
    struct timeval tv = {0, 100000};
    event_add(s->resume, &tv);
}

/* A request's head or body that did not come in time: 408, and close. */
static void http_timeout(hconn *c, const char *msg)
{
    http_refusal f = {408, "Request Timeout", "request_timeout", ""};
    util_copy(f.msg, sizeof(f.msg), msg);
    http_fail_as(c, &f, 0);
    if (http_flush(c) == 0) http_want_read(c);
}

/* Every quarter of the shortest time limit (0.1 to 1 s): close connections
 * idle for too long and lingering ones whose time is up; answer 408 to
 * heads and bodies that take too long. */
static void http_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    http_server *s = arg;
    int64_t now = http_now_ms(s);
    (void)fd;
    (void)what;
    for (hconn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->pending || c->dead) continue;
        if (c->lingering || c->closing) {
            if (now - c->last_ms > (c->lingering ? HTTP_LINGER_MS : s->idle_ms)) http_conn_close(c);
        } else if (c->parsed && now - c->body_ms > s->body_ms) {
            http_timeout(c, "body: not received within server.body_timeout_ms");
        } else if (!c->parsed && c->head_ms && now - c->head_ms > s->header_ms) {
            http_timeout(c, "headers: not received within server.header_timeout_ms");
        } else if (now - c->last_ms > s->idle_ms) {
            http_conn_close(c);
        }
    }
}

static int http_sweep_arm(http_server *s)
{
    int64_t every = s->idle_ms;
    if (s->header_ms < every) every = s->header_ms;
    if (s->body_ms < every) every = s->body_ms;
    every /= 4;
    every = every < 100 ? 100 : every > 1000 ? 1000 : every;
    struct timeval tv = {(time_t)(every / 1000), (suseconds_t)(every % 1000) * 1000};
    return event_add(s->sweep, &tv);
}

http_server *http_server_new(struct event_base *base, const char *listen, size_t max_body,
                             int64_t idle_ms, http_handler *handler, void *arg, char *err,
                             size_t errlen)
{
    http_server *s = xcalloc(1, sizeof(*s));
    s->base = base;
    s->handler = handler;
    s->arg = arg;
    s->max_body = max_body;
    s->idle_ms = idle_ms;
    s->header_ms = 10000;
    s->body_ms = 30000;
    s->max_conns = 10000;
    if (listen) {
        char host[256], port[16];
        const char *colon = strrchr(listen, ':');
        if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof(host) ||
            strlen(colon + 1) >= sizeof(port) || !colon[1]) {
            snprintf(err, errlen, "server.listen: \"%s\" is not host:port", listen);
            free(s);
            return NULL;
        }
        const char *h = listen;
        size_t hl = (size_t)(colon - listen);
        if (h[0] == '[' && h[hl - 1] == ']') h++, hl -= 2;   /* [::1]:8080 */
        memcpy(host, h, hl);
        host[hl] = '\0';
        util_copy(port, sizeof(port), colon + 1);
        char *end;
        long pn = strtol(port, &end, 10);
        if (*end || pn < 0 || pn > 65535) {
            snprintf(err, errlen, "server.listen: bad port in \"%s\"", listen);
            free(s);
            return NULL;
        }

        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        int gai = getaddrinfo(host, port, &hints, &res);
        if (gai != 0) {
            snprintf(err, errlen, "server.listen: %s: %s", host, gai_strerror(gai));
            free(s);
            return NULL;
        }
        int lerr = 0;
        for (struct addrinfo *ai = res; ai && !s->lev; ai = ai->ai_next) {
            s->lev = evconnlistener_new_bind(base, http_accept_cb, s,
                                             LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                                 LEV_OPT_CLOSE_ON_EXEC,
                                             1024, ai->ai_addr, (int)ai->ai_addrlen);
            if (!s->lev) lerr = errno;
        }
        freeaddrinfo(res);
        if (!s->lev) {
            snprintf(err, errlen, "server.listen: cannot listen on %s: %s", listen,
                     strerror(lerr ? lerr : EADDRNOTAVAIL));
            free(s);
            return NULL;
        }
        evconnlistener_set_error_cb(s->lev, http_accept_error_cb);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockname(evconnlistener_get_fd(s->lev), (struct sockaddr *)&ss, &sl) == 0)
            s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    }
    s->sweep = event_new(base, -1, EV_PERSIST, http_sweep_cb, s);
    s->resume = evtimer_new(base, http_resume_cb, s);
    if (!s->sweep || !s->resume || http_sweep_arm(s) != 0) {
        snprintf(err, errlen, "server.listen: out of memory");
        http_server_free(s);
        return NULL;
    }
    return s;
}

void http_server_set_access_log(http_server *s, int on)
{
    s->access_log = on;
}

int http_server_connections(const http_server *s)
{
    return s->nconns;
}

void http_server_set_limits(http_server *s, int max_conns, int64_t header_ms, int64_t body_ms)
{
    s->max_conns = max_conns > 0 ? max_conns : 1;
    s->header_ms = header_ms;
    s->body_ms = body_ms;
    http_sweep_arm(s);
    if (s->at_limit && s->nconns < s->max_conns) {
        s->at_limit = 0;
        if (s->lev) evconnlistener_enable(s->lev);
    }
    http_check_limit(s);
}

int http_server_port(const http_server *s) { return s->port; }

void http_server_stop_accepting(http_server *s)
{
    if (s->lev) evconnlistener_free(s->lev);
    s->lev = NULL;
}

void http_server_free(http_server *s)
{
    if (!s) return;
    http_server_stop_accepting(s);
    while (s->conns) http_conn_free(s->conns);
    if (s->sweep) event_free(s->sweep);
    if (s->resume) event_free(s->resume);
    free(s);
}

void http_server_set_gate(http_server *s, http_gate *gate) { s->gate = gate; }

/* ---- request accessors --------------------------------------------------- */

/* HEAD is GET without the body (http_out_reply leaves it out): the handler
 * sees GET, so HEAD works wherever GET does. */
const char *http_method(const http_req *r) { return r->p.head ? "GET" : r->c->in + r->p.method; }
const char *http_target(const http_req *r) { return http_request_target(&r->p, r->c->in); }

const char *http_header(const http_req *r, const char *name)
{
    return http_request_header(&r->p, r->c->in, name);
}

int http_header_count(const http_req *r, const char *name)
{
    return http_request_header_count(&r->p, r->c->in, name);
}

int http_body_coming(const http_req *r) { return r->p.chunked || r->p.body_len > 0; }

const char *http_body(const http_req *r, size_t *len)
{
    *len = r->p.body_len;
    return r->c->in + r->p.body;
}

void http_add_header(http_req *r, const char *name, const char *value)
{
    int n = snprintf(r->extra + r->extra_len, sizeof(r->extra) - r->extra_len, "%s: %s\r\n",
                     name, value);
    if (n > 0 && r->extra_len + (size_t)n < sizeof(r->extra)) r->extra_len += (size_t)n;
    else /* never quietly: a header left out may be a security header */
        log_warn("answer header %s left out: the answer's headers exceed %zu bytes", name,
                 sizeof(r->extra) - 1);
}
