/* http.c -- see http.h. */
#include "http.h"

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
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define HTTP_MAX_HEAD (16 * 1024)   /* request line + fields */
#define HTTP_MAX_FIELDS 64
#define HTTP_LINGER_MS 2000         /* after an error answer: read and drop */
#define HTTP_READ_MIN 4096

typedef struct hconn hconn;

struct http_req {
    hconn *c;
    uint32_t method, target;          /* offsets into c->in, NUL-terminated */
    int nfields;
    uint32_t field[HTTP_MAX_FIELDS][2];   /* name, value offsets */
    size_t body, body_len;            /* offset and length of the (decoded) body */
    size_t len;                       /* bytes of c->in this request spans */
    int keep_alive, head, http10;
    char extra[256];                  /* headers added by http_add_header */
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
    int64_t last_ms;                 /* last byte read or written */
    int parsed;                      /* req's head parsed, body still coming */
    int pending;                     /* req is with the handler */
    int closing;                     /* close once out is written */
    int lingering;                   /* written and shut down: drop input */
    int dead;                        /* fd closed; freed when req is answered */
    int in_parse;                    /* inside http_conn_run */
    int reading;                     /* rev is added */
    char saved;                      /* the byte under the body's NUL */
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
    int64_t idle_ms;
    int port;
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
    c->last_ms = http_now_ms(c->srv);
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

static const char *http_date(http_server *s)
{
    static char buf[64];
    static time_t at = -1;
    struct timeval tv;
    event_base_gettimeofday_cached(s->base, &tv);
    if (tv.tv_sec != at) {
        struct tm tm;
        at = tv.tv_sec;
        gmtime_r(&at, &tm);
        strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    }
    return buf;
}

/* Queue the answer to c's current request. */
static void http_out_reply(hconn *c, int status, const char *reason, const char *type,
                           const char *body, size_t len)
{
    http_req *r = &c->req;
    char head[512];
    int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Length: %zu\r\n",
                     status, reason, http_date(c->srv), len);
    if (type && len) n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Type: %s\r\n", type);
    if (!r->keep_alive) n += snprintf(head + n, sizeof(head) - (size_t)n, "Connection: close\r\n");
    else if (r->http10) n += snprintf(head + n, sizeof(head) - (size_t)n, "Connection: keep-alive\r\n");
    http_out_reserve(c, (size_t)n + r->extra_len + 2 + len);
    http_out_add(c, head, (size_t)n);
    http_out_add(c, r->extra, r->extra_len);
    http_out_add(c, "\r\n", 2);
    if (!r->head && len) http_out_add(c, body, len);
    if (!r->keep_alive) c->closing = 1;
}

/* An answer of the server's own, after which the connection closes.
 * `keep_extra`: the headers added to this request's answer go with it (the
 * head was parsed). */
static void http_fail_as(hconn *c, int status, const char *reason, const char *code,
                         const char *msg, int keep_extra)
{
    char body[400];
    int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
                     code, msg);
    /* the head may not have been parsed: nothing of an earlier request's */
    c->req.keep_alive = 0;
    c->req.head = 0;
    c->req.http10 = 0;
    if (!keep_extra) c->req.extra_len = 0;
    http_out_reply(c, status, reason, "application/json", body, (size_t)n);
    c->parsed = 0;
    c->in_len = 0;     /* nothing after this is read as a request */
}

static void http_fail(hconn *c, int status, const char *reason, const char *code,
                      const char *msg)
{
    http_fail_as(c, status, reason, code, msg, 0);
}

/* ---- input --------------------------------------------------------------- */

static int http_token_char(unsigned char ch)
{
    return ch > 32 && ch < 127 && !strchr("()<>@,;:\\\"/[]?={}", ch);
}

static char *http_trim(char *p, char **end)
{
    while (p < *end && (*p == ' ' || *p == '\t')) p++;
    while (*end > p && ((*end)[-1] == ' ' || (*end)[-1] == '\t')) (*end)--;
    return p;
}

/* Parse the head in c->in[0..hlen) in place. 0, or -1 with the error queued. */
static int http_parse_head(hconn *c, size_t hlen)
{
    http_req *r = &c->req;
    char *base = c->in, *p = base, *end = base + hlen - 2;   /* the last CRLF */
    memset(r, 0, offsetof(http_req, extra));
    r->extra_len = 0;
    r->c = c;
    r->keep_alive = 1;

    /* request line: METHOD SP target SP HTTP/1.x */
    char *eol = memchr(p, '\r', (size_t)(end - p));
    if (!eol || eol[1] != '\n') goto bad;
    char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    if (!sp1 || sp1 == p) goto bad;
    for (char *q = p; q < sp1; q++)
        if (!http_token_char((unsigned char)*q)) goto bad;
    char *tgt = sp1 + 1;
    char *sp2 = memchr(tgt, ' ', (size_t)(eol - tgt));
    if (!sp2 || sp2 == tgt || *tgt != '/') goto bad;
    for (char *q = tgt; q < sp2; q++)
        if ((unsigned char)*q <= 32 || (unsigned char)*q >= 127) goto bad;
    if (eol - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
        (sp2[8] != '0' && sp2[8] != '1'))
        goto bad;
    r->http10 = sp2[8] == '0';
    r->keep_alive = !r->http10;
    *sp1 = *sp2 = '\0';
    r->method = 0;
    r->target = (uint32_t)(tgt - base);
    r->head = strcmp(base, "HEAD") == 0;

    /* fields */
    p = eol + 2;
    while (p < end) {
        eol = memchr(p, '\r', (size_t)(end - p) + 1);
        if (!eol || eol[1] != '\n') goto bad;
        if (*p == ' ' || *p == '\t') goto bad;   /* obsolete line folding */
        char *colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon || colon == p) goto bad;
        for (char *q = p; q < colon; q++)
            if (!http_token_char((unsigned char)*q)) goto bad;
        if (r->nfields == HTTP_MAX_FIELDS) {
            http_fail(c, 431, "Request Header Fields Too Large", "header_too_large",
                      "headers: more than 64 fields");
            return -1;
        }
        char *vend = eol;
        char *v = http_trim(colon + 1, &vend);
        *colon = '\0';
        *vend = '\0';
        r->field[r->nfields][0] = (uint32_t)(p - base);
        r->field[r->nfields][1] = (uint32_t)(v - base);
        r->nfields++;
        p = eol + 2;
    }
    const char *conn = http_header(r, "Connection");
    if (conn) {
        if (strcasestr(conn, "close")) r->keep_alive = 0;
        else if (r->http10 && strcasestr(conn, "keep-alive")) r->keep_alive = 1;
    }
    return 0;
bad:
    http_fail(c, 400, "Bad Request", "bad_request", "request: malformed HTTP/1.1 request");
    return -1;
}

/* Size of a chunked body starting at c->in + off: 1 and the decoded length
 * and the encoded span when complete, 0 when more is to come, -1 on error
 * (sent). */
static int http_chunked_scan(hconn *c, size_t off, size_t *decoded, size_t *span)
{
    const char *p = c->in + off, *end = c->in + c->in_len;
    size_t total = 0;
    for (;;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) return end - p > 1024 ? -2 : 0;
        char *e;
        if (!isxdigit((unsigned char)*p)) return -2;
        errno = 0;
        unsigned long long n = strtoull(p, &e, 16);
        if (e == p || errno || (*e != '\r' && *e != ';') || eol[-1] != '\r') return -2;
        if (n > c->srv->max_body || total + n > c->srv->max_body) return -3;
        if (n == 0) {
            /* trailer fields, then the empty line */
            p = eol + 1;
            for (;;) {
                eol = memchr(p, '\n', (size_t)(end - p));
                if (!eol) return end - p > 1024 ? -2 : 0;
                if (eol == p + 1 && *p == '\r') break;
                p = eol + 1;
            }
            *decoded = total;
            *span = (size_t)(eol + 1 - (c->in + off));
            return 1;
        }
        if ((size_t)(end - (eol + 1)) < n + 2) return 0;
        const char *data = eol + 1;
        if (data[n] != '\r' || data[n + 1] != '\n') return -2;
        total += n;
        p = data + n + 2;
    }
}

/* Move the chunks' data together at off; NUL after it. */
static void http_chunked_join(hconn *c, size_t off)
{
    char *p = c->in + off, *dst = p;
    for (;;) {
        char *eol = strchr(p, '\n');
        size_t n = strtoull(p, NULL, 16);
        if (n == 0) break;
        memmove(dst, eol + 1, n);
        dst += n;
        p = eol + 1 + n + 2;
    }
    *dst = '\0';
}

static void http_grow_in(hconn *c, size_t want)
{
    if (want <= c->in_cap) return;
    size_t cap = c->in_cap ? c->in_cap : HTTP_READ_MIN;
    while (cap < want) cap *= 2;
    c->in = xrealloc(c->in, cap);
    c->in_cap = cap;
}

/* Take the next complete request off c->in: 1 = ready for the handler,
 * 0 = incomplete, -1 = an error answer is queued and the connection closes. */
static int http_next(hconn *c)
{
    http_req *r = &c->req;
    http_server *s = c->srv;
    if (!c->parsed) {
        char *hend = c->in_len >= 4 ? memmem(c->in, c->in_len, "\r\n\r\n", 4) : NULL;
        if (!hend) {
            if (c->in_len > HTTP_MAX_HEAD) {
                http_fail(c, 431, "Request Header Fields Too Large", "header_too_large",
                          "headers: larger than 16 KiB");
                return -1;
            }
            return 0;
        }
        size_t hlen = (size_t)(hend - c->in) + 4;
        if (hlen > HTTP_MAX_HEAD + 4) {
            http_fail(c, 431, "Request Header Fields Too Large", "header_too_large",
                      "headers: larger than 16 KiB");
            return -1;
        }
        if (http_parse_head(c, hlen) != 0) return -1;
        r->body = hlen;
        r->len = hlen;
        const char *te = http_header(r, "Transfer-Encoding");
        const char *cl = http_header(r, "Content-Length");
        if (te) {
            if (strcasecmp(te, "chunked") != 0) {
                http_fail(c, 501, "Not Implemented", "not_implemented",
                          "Transfer-Encoding: only chunked is supported");
                return -1;
            }
            r->body_len = (size_t)-1;   /* chunked: scanned below */
        } else if (cl) {
            char *e;
            errno = 0;
            unsigned long long n = strtoull(cl, &e, 10);
            if (!*cl || *e || errno || *cl == '-' || *cl == '+') {
                http_fail(c, 400, "Bad Request", "bad_request", "Content-Length: not a number");
                return -1;
            }
            if (n > s->max_body) {
                http_fail(c, 413, "Payload Too Large", "payload_too_large",
                          "body: larger than server.max_body");
                return -1;
            }
            r->body_len = (size_t)n;
        }
        const char *expect = http_header(r, "Expect");
        if (expect && strcasecmp(expect, "100-continue") != 0) {
            http_fail(c, 417, "Expectation Failed", "expectation_failed",
                      "Expect: only 100-continue is supported");
            return -1;
        }
        http_refusal f;
        if (s->gate && s->gate(r, s->arg, &f)) {
            http_fail_as(c, f.status, f.reason, f.code, f.msg, 1);
            return -1;
        }
        c->parsed = 1;
        size_t have = c->in_len - hlen;
        if (expect && !r->http10 && (r->body_len == (size_t)-1 || have < r->body_len))
            http_out_add(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    if (r->body_len == (size_t)-1) {
        size_t decoded, span;
        int k = http_chunked_scan(c, r->body, &decoded, &span);
        if (k == -3) {
            http_fail(c, 413, "Payload Too Large", "payload_too_large",
                      "body: larger than server.max_body");
            return -1;
        }
        if (k < 0) {
            http_fail(c, 400, "Bad Request", "bad_request", "body: malformed chunked encoding");
            return -1;
        }
        if (k == 0) {
            /* chunk framing is small: more than that around max_body is not a body */
            if (c->in_len - r->body > 2 * s->max_body + 65536) {
                http_fail(c, 413, "Payload Too Large", "payload_too_large",
                          "body: larger than server.max_body");
                return -1;
            }
            return 0;
        }
        http_chunked_join(c, r->body);
        r->body_len = decoded;
        r->len = r->body + span;
    } else {
        if (c->in_len - r->body < r->body_len) {
            http_grow_in(c, r->body + r->body_len + 1);
            return 0;
        }
        r->len = r->body + r->body_len;
        /* NUL after the body: the byte is the next request's first, kept
         * aside until this one is answered */
    }
    c->parsed = 0;
    c->pending = 1;
    return 1;
}

/* Parse and hand on requests while the connection is free to. */
static void http_run(hconn *c)
{
    if (c->in_parse || c->dead) return;
    c->in_parse = 1;
    while (!c->pending && !c->closing && !c->lingering) {
        if (http_next(c) <= 0) break;
        http_req *r = &c->req;
        /* the body is NUL-terminated for the handler; the byte under the
         * NUL (a pipelined request's first) is put back by http_reply.
         * r->len <= in_len < in_cap: there is room. */
        c->saved = c->in[r->len];
        c->in[r->len] = '\0';
        c->srv->handler(r, c->srv->arg);
    }
    c->in_parse = 0;
    if (c->out_len) http_flush(c);
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
    http_out_reply(c, status, reason, type, body, len);
    c->in[r->len] = c->saved;
    memmove(c->in, c->in + r->len, c->in_len - r->len);
    c->in_len -= r->len;
    if (c->in_cap > 65536 && c->in_len < HTTP_READ_MIN / 2) {
        c->in = xrealloc(c->in, HTTP_READ_MIN);   /* after a large body */
        c->in_cap = HTTP_READ_MIN;
    }
    if (c->in_parse) return;   /* answered from within the handler: http_run goes on */
    http_read_on(c, 1);
    if (http_flush(c) != 0) return;
    if (c->out_len == 0) http_run(c);
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
    c->last_ms = http_now_ms(s);
    if (c->lingering || c->closing) return;   /* an error answer ends it: drop */
    if (c->pending && c->in_len == c->req.len) {
        /* the first byte read sits under the pending body's NUL: keep it
         * aside as http_run does, for http_reply to put back */
        c->saved = c->in[c->in_len];
        c->in[c->in_len] = '\0';
    }
    c->in_len += (size_t)n;
    if (c->pending) {
        /* pipelined requests wait; bound what piles up meanwhile */
        if (c->in_len > HTTP_MAX_HEAD + s->max_body) http_read_on(c, 0);
        return;
    }
    http_run(c);
}

/* ---- server -------------------------------------------------------------- */

static void http_accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                           int salen, void *arg)
{
    http_server *s = arg;
    int one = 1;
    (void)lev;
    (void)sa;
    (void)salen;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    hconn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    c->fd = fd;
    c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, http_read_cb, c);
    c->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, http_write_cb, c);
    c->last_ms = http_now_ms(s);
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    if (!c->rev || !c->wev) {
        log_error("http: out of memory for a connection");
        http_conn_free(c);
        return;
    }
    http_read_on(c, 1);
}

static void http_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    http_server *s = arg;
    (void)fd;
    (void)what;
    if (s->lev) evconnlistener_enable(s->lev);
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

/* Every quarter of the idle time (0.1 to 1 s): close connections idle for
 * too long, and lingering ones whose time is up. */
static void http_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    http_server *s = arg;
    int64_t now = http_now_ms(s);
    (void)fd;
    (void)what;
    for (hconn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->pending || c->dead) continue;
        int64_t limit = c->lingering ? HTTP_LINGER_MS : s->idle_ms;
        if (now - c->last_ms > limit) http_conn_close(c);
    }
}

http_server *http_server_new(struct event_base *base, const char *listen, size_t max_body,
                             int64_t idle_ms, http_handler *handler, void *arg, char *err,
                             size_t errlen)
{
    char host[256], port[16];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof(host) ||
        strlen(colon + 1) >= sizeof(port) || !colon[1]) {
        snprintf(err, errlen, "server.listen: \"%s\" is not host:port", listen);
        return NULL;
    }
    const char *h = listen;
    size_t hl = (size_t)(colon - listen);
    if (h[0] == '[' && h[hl - 1] == ']') h++, hl -= 2;   /* [::1]:8080 */
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, sizeof(port), "%s", colon + 1);
    char *end;
    long pn = strtol(port, &end, 10);
    if (*end || pn < 0 || pn > 65535) {
        snprintf(err, errlen, "server.listen: bad port in \"%s\"", listen);
        return NULL;
    }

    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "server.listen: %s: %s", host, gai_strerror(gai));
        return NULL;
    }
    http_server *s = xcalloc(1, sizeof(*s));
    s->base = base;
    s->handler = handler;
    s->arg = arg;
    s->max_body = max_body;
    s->idle_ms = idle_ms;
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
    s->sweep = event_new(base, -1, EV_PERSIST, http_sweep_cb, s);
    s->resume = evtimer_new(base, http_resume_cb, s);
    int64_t every = idle_ms / 4 < 100 ? 100 : idle_ms / 4 > 1000 ? 1000 : idle_ms / 4;
    struct timeval tv = {(time_t)(every / 1000), (suseconds_t)(every % 1000) * 1000};
    if (!s->sweep || !s->resume || event_add(s->sweep, &tv) != 0) {
        snprintf(err, errlen, "server.listen: out of memory");
        http_server_free(s);
        return NULL;
    }
    return s;
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

const char *http_method(const http_req *r) { return r->c->in + r->method; }
const char *http_target(const http_req *r) { return r->c->in + r->target; }

const char *http_header(const http_req *r, const char *name)
{
    for (int i = 0; i < r->nfields; i++)
        if (strcasecmp(r->c->in + r->field[i][0], name) == 0) return r->c->in + r->field[i][1];
    return NULL;
}

int http_header_count(const http_req *r, const char *name)
{
    int n = 0;
    for (int i = 0; i < r->nfields; i++) n += strcasecmp(r->c->in + r->field[i][0], name) == 0;
    return n;
}

const char *http_body(const http_req *r, size_t *len)
{
    *len = r->body_len;
    return r->c->in + r->body;
}

void http_add_header(http_req *r, const char *name, const char *value)
{
    int n = snprintf(r->extra + r->extra_len, sizeof(r->extra) - r->extra_len, "%s: %s\r\n",
                     name, value);
    if (n > 0 && r->extra_len + (size_t)n < sizeof(r->extra)) r->extra_len += (size_t)n;
}
