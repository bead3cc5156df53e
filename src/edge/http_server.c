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
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

#define HTTP_MAX_HEAD (16 * 1024)   /* request line + fields */
#define HTTP_MAX_FIELDS 64
#define HTTP_MAX_CHUNK_EXT 1024     /* bytes of extensions on one chunk-size line */
#define HTTP_MAX_TRAILER 4096       /* bytes of the trailer section */
#define HTTP_MAX_OUT (64 * 1024)    /* unsent answers: above this, stop reading */
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
    int chunked;                      /* the body is chunked (decoded as it comes) */
    int root;                         /* absolute-form target with an empty path: "/" */
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
    int64_t last_ms;                 /* last byte read or written (closing: written) */
    int parsed;                      /* req's head parsed, body still coming */
    int pending;                     /* req is with the handler */
    int closing;                     /* close once out is written */
    int lingering;                   /* written and shut down: drop input */
    int dead;                        /* fd closed; freed when req is answered */
    int in_parse;                    /* inside http_conn_run */
    int reading;                     /* rev is added */
    char saved;                      /* the byte under the body's NUL */
    size_t scan;                     /* bytes of the head already scanned */
    int64_t head_ms;                 /* the head's first byte came (0: no head begun) */
    int64_t body_ms;                 /* the head ended and the body began */
    /* chunked body, decoded in place as it comes: the decoded bytes go to
     * req.body + cout, the next byte to read is at cpos */
    int cst;
    uint64_t csize;                  /* chunk size read, then bytes of it still to come */
    size_t cpos, cout, cext, ctrail;
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
              !(c->pending && c->in_len - c->req.len >= HTTP_MAX_HEAD));
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
    char body[400], text[240];
    size_t t = 0;
    /* msg is tickd's own text, with at most a field's name (a token) in it;
     * escaped all the same, so that the body is JSON whatever it holds */
    for (const char *p = msg; *p && t + 7 < sizeof(text); p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\') t += (size_t)snprintf(text + t, 3, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f) text[t++] = '?';
        else text[t++] = (char)ch;
    }
    text[t] = '\0';
    int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
                     code, text);
    /* the head may not have been parsed: nothing of an earlier request's
     * (http_reply clears head). A HEAD's refusal has no content either
     * (RFC 9110 9.3.2): a client would read it as the next answer. */
    c->req.keep_alive = 0;
    c->req.http10 = 0;
    if (!keep_extra) c->req.extra_len = 0;
    http_out_reply(c, status, reason, "application/json", body, (size_t)n);
    c->parsed = 0;
    c->in_len = 0;     /* nothing after this is read as a request */
    c->scan = 0;
}

static void http_fail(hconn *c, int status, const char *reason, const char *code,
                      const char *msg)
{
    http_fail_as(c, status, reason, code, msg, 0);
}

static void http_bad(hconn *c, const char *msg)
{
    http_fail(c, 400, "Bad Request", "bad_request", msg);
}

/* ---- input --------------------------------------------------------------- */

/* tchar of RFC 9110 5.6.2 */
static int http_token_char(unsigned char ch)
{
    static const char sep[] = "()<>@,;:\\\"/[]?={}";
    return ch > 32 && ch < 127 && !memchr(sep, ch, sizeof(sep) - 1);
}

/* field-vchar, SP and HTAB (RFC 9110 5.5): no NUL, CR, LF, other controls
 * or DEL */
static int http_value_char(unsigned char ch)
{
    return ch == '\t' || (ch >= 32 && ch != 127);
}

static int http_hex(unsigned char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static char *http_trim(char *p, char **end)
{
    while (p < *end && (*p == ' ' || *p == '\t')) p++;
    while (*end > p && ((*end)[-1] == ' ' || (*end)[-1] == '\t')) (*end)--;
    return p;
}

/* The next element of a comma-separated list (RFC 9110 5.6.1) at *p, OWS
 * trimmed; empty elements are skipped. 1 and the element, or 0 at the end. */
static int http_list_next(const char **p, const char **tok, size_t *len)
{
    const char *s = *p;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == ',') s++;
        if (!*s) return 0;
        const char *e = s;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t')) t--;
        *p = e;
        *tok = s;
        *len = (size_t)(t - s);
        return 1;
    }
}

/* Find the end of the head, going on from where the last call stopped, so
 * that a head arriving byte by byte is scanned once. Lines end with CRLF
 * only: a bare LF or CR is refused as soon as it arrives (RFC 9112 2.2
 * lets a server choose; accepting LF would make tickd read a request
 * differently from a proxy in front that does not). Empty lines before the
 * request line are skipped. 1 (c->scan = the head's length), 0 = more to
 * come, -1 = an error answer is queued. */
static int http_scan_head(hconn *c)
{
    const char *in = c->in;
    size_t i = c->scan, n = c->in_len;
    if (i == 0) {
        size_t skip = 0;
        while (skip + 2 <= n && in[skip] == '\r' && in[skip + 1] == '\n') skip += 2;
        if (skip) {
            memmove(c->in, c->in + skip, n - skip);
            c->in_len = n -= skip;
        }
        if (n && in[0] == '\n') goto bare_lf;
        if (n == 1 && in[0] == '\r') return 0;
        i = 1;   /* in[0] is not a line end */
    }
    for (; i < n; i++) {
        if (i >= HTTP_MAX_HEAD) {
            http_fail(c, 431, "Request Header Fields Too Large", "header_too_large",
                      "headers: larger than 16 KiB");
            return -1;
        }
        if (in[i] == '\n') {
            if (in[i - 1] != '\r') goto bare_lf;
            if (i >= 3 && in[i - 2] == '\n') {
                c->scan = i + 1;
                return 1;
            }
        } else if (in[i - 1] == '\r') {
            http_bad(c, "request: bare CR in the head (lines end with CRLF)");
            return -1;
        }
    }
    c->scan = n ? n : 0;
    return 0;
bare_lf:
    http_bad(c, "request: bare LF in the head (lines end with CRLF)");
    return -1;
}

/* The target: origin-form ("/path?q"), or absolute-form
 * ("http://host/path?q", what a proxy sends), routed on its path. */
static int http_parse_target(http_req *r, char *tgt, char *end)
{
    if (*tgt == '/') {
        r->target = (uint32_t)(tgt - r->c->in);
        return 0;
    }
    size_t n = (size_t)(end - tgt), skip;
    if (n > 7 && strncasecmp(tgt, "http://", 7) == 0) skip = 7;
    else if (n > 8 && strncasecmp(tgt, "https://", 8) == 0) skip = 8;
    else return -1;
    char *auth = tgt + skip, *p = auth;
    while (p < end && *p != '/' && *p != '?' && *p != '#') p++;
    if (p == auth) return -1;
    if (p == end) {
        r->root = 1;
        return 0;
    }
    if (*p != '/') return -1;
    r->target = (uint32_t)(p - r->c->in);
    return 0;
}

/* Parse the head in c->in[0..hlen) in place (every line ends with CRLF:
 * http_scan_head saw to it). 0, or -1 with the error queued. */
static int http_parse_head(hconn *c, size_t hlen)
{
    http_req *r = &c->req;
    char *base = c->in, *p = base, *end = base + hlen - 2;   /* the last CRLF */
    char msg[256];
    memset(r, 0, offsetof(http_req, extra));
    r->extra_len = 0;
    r->c = c;
    r->keep_alive = 1;

    /* request line: METHOD SP target SP HTTP/1.x */
    char *eol = memchr(p, '\r', (size_t)(end - p));
    if (!eol) goto bad;
    char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    if (!sp1 || sp1 == p) goto bad;
    for (char *q = p; q < sp1; q++)
        if (!http_token_char((unsigned char)*q)) goto bad;
    char *tgt = sp1 + 1;
    char *sp2 = memchr(tgt, ' ', (size_t)(eol - tgt));
    if (!sp2 || sp2 == tgt) goto bad;
    for (char *q = tgt; q < sp2; q++)
        if ((unsigned char)*q <= 32 || (unsigned char)*q >= 127) goto bad;
    if (eol - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
        (sp2[8] != '0' && sp2[8] != '1'))
        goto bad;
    if (http_parse_target(r, tgt, sp2) != 0) {
        http_bad(c, "request: target is neither /path nor http://host/path");
        return -1;
    }
    r->http10 = sp2[8] == '0';
    r->keep_alive = !r->http10;
    *sp1 = *sp2 = '\0';
    r->method = 0;
    r->head = strcmp(base, "HEAD") == 0;

    /* fields: name ":" OWS value OWS, the name a token, the value without
     * control characters (RFC 9110 5.5, RFC 9112 5) */
    p = eol + 2;
    while (p < end) {
        eol = memchr(p, '\r', (size_t)(end - p) + 1);
        char *colon = p;
        while (colon < eol && http_token_char((unsigned char)*colon)) colon++;
        if (colon == p || colon == eol || *colon != ':') goto bad;   /* also obs-fold */
        for (char *q = colon + 1; q < eol; q++)
            if (!http_value_char((unsigned char)*q)) {
                snprintf(msg, sizeof(msg), "%.*s: control character in the value",
                         (int)(colon - p > 64 ? 64 : colon - p), p);
                http_bad(c, msg);
                return -1;
            }
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

    /* exactly one Host in HTTP/1.1, never two (RFC 9112 3.2) */
    int hosts = http_header_count(r, "Host");
    if (hosts > 1 || (hosts == 0 && !r->http10)) {
        http_bad(c, hosts ? "Host: given more than once" : "Host: missing (HTTP/1.1 requires it)");
        return -1;
    }
    if (hosts && strpbrk(http_header(r, "Host"), " \t,/\\@")) {
        http_bad(c, "Host: not host[:port]");
        return -1;
    }

    /* Connection: a list of tokens, in every Connection field; close wins */
    int close_asked = 0, keep_asked = 0;
    for (int i = 0; i < r->nfields; i++) {
        if (strcasecmp(base + r->field[i][0], "Connection") != 0) continue;
        const char *l = base + r->field[i][1], *tok;
        size_t n;
        while (http_list_next(&l, &tok, &n)) {
            close_asked |= n == 5 && strncasecmp(tok, "close", 5) == 0;
            keep_asked |= n == 10 && strncasecmp(tok, "keep-alive", 10) == 0;
        }
    }
    if (close_asked) r->keep_alive = 0;
    else if (r->http10 && keep_asked) r->keep_alive = 1;
    return 0;
bad:
    http_bad(c, "request: malformed HTTP/1.1 request");
    return -1;
}

/* The body's framing (RFC 9112 6): Transfer-Encoding, whose codings across
 * all its fields must be exactly "chunked" (chunked not last, or twice: 400,
 * the length cannot be known; other codings before chunked: 501), never
 * with Content-Length and never in HTTP/1.0; or Content-Length, 1*DIGIT,
 * repeated only with the same value (RFC 9110 8.6). 0, or -1 with the error
 * queued (all close the connection). */
static int http_framing(hconn *c)
{
    http_req *r = &c->req;
    const char *base = c->in;
    int te = 0, cl = 0, codings = 0, chunked_at = 0, twice = 0;
    uint64_t len = 0;
    for (int i = 0; i < r->nfields; i++) {
        const char *name = base + r->field[i][0], *l = base + r->field[i][1], *tok;
        size_t n;
        if (strcasecmp(name, "Transfer-Encoding") == 0) {
            te = 1;
            while (http_list_next(&l, &tok, &n)) {
                codings++;
                if (n == 7 && strncasecmp(tok, "chunked", 7) == 0) {
                    twice |= chunked_at != 0;
                    chunked_at = codings;
                }
            }
        } else if (strcasecmp(name, "Content-Length") == 0) {
            /* a list (Content-Length: 5, 5) is read as the fields repeated */
            int elems = 0;
            while (http_list_next(&l, &tok, &n)) {
                uint64_t v = 0;
                size_t k = 0;
                for (; k < n && tok[k] >= '0' && tok[k] <= '9'; k++)
                    v = v > UINT64_MAX / 16 ? v : v * 10 + (uint64_t)(tok[k] - '0');
                if (k < n) {
                    http_bad(c, "Content-Length: not a number (1*DIGIT)");
                    return -1;
                }
                if (cl && v != len) {
                    http_bad(c, "Content-Length: given more than once with different values");
                    return -1;
                }
                cl = 1;
                len = v;
                elems++;
            }
            if (!elems) {
                http_bad(c, "Content-Length: empty");
                return -1;
            }
        }
    }
    if (te) {
        if (r->http10) {
            http_bad(c, "Transfer-Encoding: not allowed in HTTP/1.0");
            return -1;
        }
        if (cl) {
            http_bad(c, "Transfer-Encoding: not allowed with Content-Length");
            return -1;
        }
        if (!chunked_at || chunked_at != codings || twice) {
            http_bad(c, "Transfer-Encoding: chunked must be the last coding, once");
            return -1;
        }
        if (codings > 1) {
            http_fail(c, 501, "Not Implemented", "not_implemented",
                      "Transfer-Encoding: only chunked is supported");
            return -1;
        }
        r->chunked = 1;
        return 0;
    }
    if (len > c->srv->max_body) {
        http_fail(c, 413, "Payload Too Large", "payload_too_large",
                  "body: larger than server.max_body");
        return -1;
    }
    r->body_len = (size_t)len;
    return 0;
}

enum {
    CS_SIZE0,   /* the first digit of a chunk size */
    CS_SIZE,    /* more digits, ';' or CR */
    CS_EXT,     /* chunk extensions up to CR */
    CS_SIZE_LF,
    CS_DATA,
    CS_DATA_CR,
    CS_DATA_LF,
    CS_TLINE,   /* the start of a trailer line, or the final CR */
    CS_TNAME,
    CS_TVALUE,
    CS_TLF,
    CS_END_LF
};

static int http_chunk_bad(hconn *c, const char *why)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "body: malformed chunked encoding (%s)", why);
    http_bad(c, msg);
    return -1;
}

/* Decode the chunked body from c->cpos on, in place and once per byte: the
 * data goes to req.body + cout, the framing is dropped, so that the buffer
 * holds the head, the decoded data and what was not read yet. Sizes are
 * 1*HEXDIG; extensions (bounded) and trailer fields (bounded, dropped) are
 * checked byte by byte. 1 = complete (req.len set), 0 = more to come,
 * -1 = an error answer is queued. */
static int http_chunked(hconn *c)
{
    http_req *r = &c->req;
    uint64_t max = c->srv->max_body;
    char *in = c->in;
    size_t i = c->cpos, n = c->in_len;
    while (i < n) {
        unsigned char ch = (unsigned char)in[i];
        int h;
        if (c->cst == CS_DATA) {
            size_t take = n - i < c->csize ? n - i : (size_t)c->csize;
            memmove(in + r->body + c->cout, in + i, take);
            c->cout += take;
            c->csize -= take;
            i += take;
            if (c->csize == 0) c->cst = CS_DATA_CR;
            continue;
        }
        if (c->cst >= CS_TLINE && ++c->ctrail > HTTP_MAX_TRAILER)
            return http_chunk_bad(c, "trailer section over 4 KiB");
        switch (c->cst) {
        case CS_SIZE0:
            if ((h = http_hex(ch)) < 0) return http_chunk_bad(c, "chunk size not hex");
            c->csize = (uint64_t)h;
            c->cext = 1;   /* digits */
            c->cst = CS_SIZE;
            break;
        case CS_SIZE:
            if ((h = http_hex(ch)) >= 0) {
                if (++c->cext > 16) return http_chunk_bad(c, "chunk size over 16 digits");
                c->csize = c->csize * 16 + (uint64_t)h;
                if (c->csize > max) goto too_large;   /* also keeps it from overflowing */
            } else if (ch == ';') {
                c->cext = 0;
                c->cst = CS_EXT;
            } else if (ch == '\r') {
                c->cst = CS_SIZE_LF;
            } else {
                return http_chunk_bad(c, "chunk size not hex");
            }
            break;
        case CS_EXT:
            if (ch == '\r') c->cst = CS_SIZE_LF;
            else if (!http_value_char(ch)) return http_chunk_bad(c, "control character in a chunk extension");
            else if (++c->cext > HTTP_MAX_CHUNK_EXT) return http_chunk_bad(c, "chunk extension over 1 KiB");
            break;
        case CS_SIZE_LF:
            if (ch != '\n') return http_chunk_bad(c, "no LF after CR");
            if (c->cout + c->csize > max) goto too_large;
            c->cst = c->csize ? CS_DATA : CS_TLINE;
            break;
        case CS_DATA_CR:
            if (ch != '\r') return http_chunk_bad(c, "no CRLF after the chunk data");
            c->cst = CS_DATA_LF;
            break;
        case CS_DATA_LF:
            if (ch != '\n') return http_chunk_bad(c, "no CRLF after the chunk data");
            c->cst = CS_SIZE0;
            break;
        case CS_TLINE:
            if (ch == '\r') c->cst = CS_END_LF;
            else if (http_token_char(ch)) c->cst = CS_TNAME;
            else return http_chunk_bad(c, "bad trailer field");
            break;
        case CS_TNAME:
            if (ch == ':') c->cst = CS_TVALUE;
            else if (!http_token_char(ch)) return http_chunk_bad(c, "bad trailer field");
            break;
        case CS_TVALUE:
            if (ch == '\r') c->cst = CS_TLF;
            else if (!http_value_char(ch)) return http_chunk_bad(c, "bad trailer field");
            break;
        case CS_TLF:
            if (ch != '\n') return http_chunk_bad(c, "no LF after CR");
            c->cst = CS_TLINE;
            break;
        case CS_END_LF:
            if (ch != '\n') return http_chunk_bad(c, "no LF after CR");
            /* the framing took at least "0\r\n\r\n": the byte after the
             * data is not the next request's */
            r->body_len = c->cout;
            r->len = i + 1;
            in[r->body + c->cout] = '\0';
            return 1;
        }
        i++;
    }
    /* all read is decoded or dropped */
    c->in_len = c->cpos = r->body + c->cout;
    return 0;
too_large:
    http_fail(c, 413, "Payload Too Large", "payload_too_large", "body: larger than server.max_body");
    return -1;
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
        int k = http_scan_head(c);
        if (k <= 0) return k;
        size_t hlen = c->scan;
        c->scan = 0;
        if (http_parse_head(c, hlen) != 0 || http_framing(c) != 0) return -1;
        r->body = hlen;
        r->len = hlen;
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
        c->head_ms = 0;
        c->body_ms = http_now_ms(s);
        if (r->chunked) {
            c->cst = CS_SIZE0;
            c->cpos = hlen;
            c->cout = c->cext = c->ctrail = 0;
        }
        size_t have = c->in_len - hlen;
        if (expect && !r->http10 && (r->chunked || have < r->body_len))
            http_out_add(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    if (r->chunked) {
        int k = http_chunked(c);
        if (k <= 0) return k;
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
             * r->len <= in_len < in_cap: there is room. */
            c->saved = c->in[r->len];
            c->in[r->len] = '\0';
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
    log_access(remote, c->in + r->method, c->in + r->target, status, len,
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
    http_out_reply(c, status, reason, type, body, len);
    r->head = 0;   /* answered: an error before the next head is parsed has content */
    c->in[r->len] = c->saved;
    memmove(c->in, c->in + r->len, c->in_len - r->len);
    c->in_len -= r->len;
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
    if (c->pending && c->in_len == c->req.len) {
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
    http_fail(c, 408, "Request Timeout", "request_timeout", msg);
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
        snprintf(port, sizeof(port), "%s", colon + 1);
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
const char *http_method(const http_req *r) { return r->head ? "GET" : r->c->in + r->method; }
const char *http_target(const http_req *r) { return r->root ? "/" : r->c->in + r->target; }

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

int http_body_coming(const http_req *r) { return r->chunked || r->body_len > 0; }

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
