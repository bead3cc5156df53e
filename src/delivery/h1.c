/* h1.c -- see h1.h. */
#include "delivery/h1.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "delivery/h1_answer.h"
#include "base/log.h"
#include "base/util.h"

#define H1_DNS_TTL_MS 60000     /* as libcurl's DNS cache */
#define H1_ADDR_MAX 8
/* ended calls a client keeps for the next ones (their timer and request
 * buffer with them), and the largest request buffer kept */
#define H1_CALL_SPARE 256
#define H1_REQ_KEEP 16384
/* Answers read together: while at least H1_NAP_AWAITING calls wait for
 * their answers, the first turn of the loop after a call's read or write
 * that finds nothing else to do sleeps H1_NAP_US before the loop waits in
 * epoll_wait (h1_nap_cb). */
#define H1_NAP_AWAITING 8
#define H1_NAP_US 100

typedef struct h1_conn h1_conn;

struct h1_client {
    struct event_base *base;
    struct evdns_base *dns;
    int64_t keepalive_ms;       /* an idle connection is closed after this long */
    struct timeval ka_tv;       /* keepalive_ms as the loop's common timeout: every idle
                                   connection's timer in one queue, not its heap */
    h1_guard_fn *guard;         /* NULL: every address may be connected to */
    void *guard_priv;
    int ahead, ahead_max;       /* connections opened ahead and not yet used, and
                                   the most of them: a quarter of the descriptors */
    int shared;                 /* base is a loop that goes on after h1_client_free */
    h1_call *spare;             /* ended calls kept for reuse, linked by next */
    int nspare;
    int awaiting;               /* calls whose request is sent and answer not read */
    struct event *nap_ev;       /* h1_nap_cb, the loop's last priority (NULL: none) */
    uint64_t naps;
    char rbuf[65536];           /* every read lands here; only a part line is kept */
};

struct h1_host {
    h1_client *c;
    char *name;                 /* host name or address, without [] */
    char *authority;            /* as in the URL: the Host header */
    int port;
    struct sockaddr_storage addr[H1_ADDR_MAX];
    socklen_t alen[H1_ADDR_MAX];
    int naddr;
    int64_t addr_until_ms;
    struct evdns_getaddrinfo_request *dnsreq;
    struct dns_ctx *dnsctx;     /* the lookup under way */
    h1_call *waiting, **waiting_tail;   /* calls waiting for the resolver */
    h1_conn *idle;              /* kept connections, the last used first */
    h1_conn *warming;           /* connections opening ahead of a call (h1_host_warm) */
};

struct h1_conn {
    h1_host *h;
    int fd;
    struct event *ev;
    short want;                 /* what ev waits for, once added */
    h1_call *k;                 /* NULL: idle */
    h1_conn *next;              /* idle list */
    int64_t idle_since_ms;
    int ai;                     /* address being connected to */
    int connecting;
    int warm;                   /* opening with no call, on its host's warming list */
    int ahead;                  /* opened ahead, no call has used it yet (client's ahead) */
    int reused;                 /* carried an answer before this call */
    char *buf;                  /* what has arrived and is not parsed yet */
    size_t len, cap;
};

/* A lookup's callback argument: it may outlive its host. */
struct dns_ctx {
    h1_host *h; /* NULL once the host is freed */
};

struct h1_call {
    h1_host *h;
    h1_conn *conn;
    h1_call *next;              /* host's waiting list */
    char *req;
    size_t reqlen, off, reqcap;
    struct event *tev;          /* timeout, then the deferred failure */
    int64_t timeout_ms;
    h1_done_fn *done;
    void *priv;
    int started;                /* off the caller's stack: on a connection or waiting */
    int64_t began_ms;           /* when it started (util_mono_ms): its timeout runs from then */
    int retried;                /* a kept connection failed before any answer: once more */
    h1_answer a;                /* the answer being read */
    size_t got;                 /* bytes of answer received */
    int denied;                 /* addresses the guard refused */
    int flags;                  /* H1_LOCAL: failed for a reason of this process's */
    int cut;                    /* the answer's head came, its body not in time */
    int awaiting;               /* counted in the client's awaiting */
    char err[240];
};

/* ---- client and hosts -------------------------------------------------- */

/* A turn of the loop that ran nothing else (the nap has the loop's last
 * priority: libevent runs it only in a turn where no event of a higher one
 * was ready) after a call's read or write, while calls wait for their
 * answers: sleep H1_NAP_US. A busy receiver answers a connection every few
 * tens of microseconds; a loop that waited in epoll_wait for each answer
 * would be woken for one or two at a time, each wake-up paid by the
 * receiver's write (it wakes tickd) and by a switch on a core the receiver
 * needs. Asleep in nanosleep, tickd is on no socket's wait queue; the loop
 * then waits in epoll_wait as before, which returns at once with the
 * answers that came meanwhile, read together. Only a call's I/O makes the
 * nap active again (h1_worked): calls held by a slow receiver take none
 * while nothing comes. */
static void h1_nap_cb(evutil_socket_t fd, short what, void *arg)
{
    h1_client *c = arg;
    (void)fd, (void)what;
    if (c->awaiting < H1_NAP_AWAITING) return;
    struct timespec ts = {0, H1_NAP_US * 1000L};
    nanosleep(&ts, NULL);
    c->naps++;
}

/* A call's read or write: the loop naps at its next turn with nothing else
 * to do, while enough calls wait for answers (an event already active is
 * left as it is). */
static void h1_worked(h1_client *c)
{
    if (c->nap_ev && c->awaiting >= H1_NAP_AWAITING) event_active(c->nap_ev, EV_TIMEOUT, 0);
}

static void call_unawait(h1_call *k)
{
    if (k->awaiting) {
        k->awaiting = 0;
        k->h->c->awaiting--;
    }
}

uint64_t h1_client_naps(const h1_client *c)
{
    return c ? c->naps : 0;
}

h1_client *h1_client_new(struct event_base *base, int64_t keepalive_ms, int shared)
{
    h1_client *c = xcalloc(1, sizeof(*c));
    c->base = base;
    c->shared = shared;
    c->keepalive_ms = keepalive_ms;
    struct timeval ka = {(time_t)(keepalive_ms / 1000), (suseconds_t)(keepalive_ms % 1000) * 1000};
    const struct timeval *common = event_base_init_common_timeout(base, &ka);
    c->ka_tv = common ? *common : ka;
    /* the nap needs a priority below the one events get by default (the
     * middle one: libevent's event_assign); a loop with fewer has none */
    int npri = event_base_get_npriorities(base);
    if (npri >= 3 && (c->nap_ev = event_new(base, -1, 0, h1_nap_cb, c)))
        event_priority_set(c->nap_ev, npri - 1);
    c->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                      EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (!c->dns) c->dns = evdns_base_new(base, 0); /* no resolv.conf: the hosts file only */
    if (!c->dns) {
        if (c->nap_ev) event_free(c->nap_ev);
        free(c);
        return NULL;
    }
    evdns_base_load_hosts(c->dns, NULL);
    /* connections opened ahead of their calls hold descriptors the calls
     * (and the API's clients) need: a quarter of them at most */
    struct rlimit rl;
    c->ahead_max = 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        c->ahead_max = rl.rlim_cur / 4 > 4096 ? 4096 : (int)(rl.rlim_cur / 4);
    return c;
}

static void call_release(h1_call *k);

void h1_client_set_guard(h1_client *c, h1_guard_fn *fn, void *client_priv)
{
    if (!c) return;
    c->guard = fn;
    c->guard_priv = client_priv;
}

void h1_client_free(h1_client *c)
{
    if (!c) return;
    /* lookups still pending fail, their callbacks deferred to the loop:
     * one more pass of it runs them (they free their context); a shared
     * loop runs them as it goes on */
    evdns_base_free(c->dns, 1);
    if (!c->shared) event_base_loop(c->base, EVLOOP_NONBLOCK);
    while (c->spare) {
        h1_call *k = c->spare;
        c->spare = k->next;
        call_release(k);
    }
    if (c->nap_ev) event_free(c->nap_ev);
    free(c);
}

/* A literal address as libcurl reads it: [IPv6] in brackets; IPv4 in any
 * form inet_aton takes (127.1, 0177.0.0.1, 2130706433, 0x7f000001: parts
 * in decimal, octal or hex, as curl's URL parser normalises them). Anything
 * else is a name to look up. */
static int h1_literal(const char *name, int bracketed, int port, struct sockaddr_storage *ss,
                      socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (bracketed) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        if (strchr(name, '%') || inet_pton(AF_INET6, name, &s6->sin6_addr) != 1) return 0;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*s6);
        return 1;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    if (name[strspn(name, "0123456789abcdefABCDEFxX.")] != '\0' || !isdigit((unsigned char)name[0]) ||
        inet_aton(name, &s4->sin_addr) == 0)
        return 0;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    *len = sizeof(*s4);
    return 1;
}

h1_host *h1_host_new(h1_client *c, const char *url)
{
    if (!c || strncasecmp(url, "http://", 7) != 0) return NULL;
    const char *a = url + 7;
    size_t n = strcspn(a, "/?#");
    if (n == 0 || memchr(a, '@', n)) return NULL; /* credentials: libcurl sends them */
    const char *host = a, *port = NULL;
    size_t hn;
    if (*a == '[') {
        const char *end = memchr(a, ']', n);
        if (!end) return NULL;
        host = a + 1;
        hn = (size_t)(end - host);
        if (end + 1 < a + n) {
            if (end[1] != ':') return NULL;
            port = end + 2;
        }
    } else {
        const char *colon = memchr(a, ':', n);
        hn = colon ? (size_t)(colon - a) : n;
        if (colon) port = colon + 1;
    }
    int p = 80;
    if (port && port < a + n) {
        p = 0;
        for (const char *q = port; q < a + n; q++) {
            if (*q < '0' || *q > '9' || p > 65535) return NULL;
            p = p * 10 + (*q - '0');
        }
        if (p < 1 || p > 65535) return NULL;
    }
    if (hn == 0) return NULL;
    h1_host *h = xcalloc(1, sizeof(*h));
    h->c = c;
    h->name = xstrndup(host, hn);
    h->authority = xstrndup(a, n);
    h->port = p;
    h->waiting_tail = &h->waiting;
    if (h1_literal(h->name, *a == '[', p, &h->addr[0], &h->alen[0])) {
        h->naddr = 1;
        h->addr_until_ms = INT64_MAX; /* never looked up */
        if (*a != '[') {
            /* Host names the address as libcurl sends it: 127.0.0.1, not 0177.1 */
            char dotted[INET_ADDRSTRLEN], *auth;
            inet_ntop(AF_INET, &((struct sockaddr_in *)&h->addr[0])->sin_addr, dotted,
                      sizeof(dotted));
            size_t dl = strlen(dotted), rest = n - hn;
            auth = xmalloc(dl + rest + 1);
            memcpy(auth, dotted, dl);
            memcpy(auth + dl, a + hn, rest); /* ":port" as written, if any */
            auth[dl + rest] = '\0';
            free(h->authority);
            h->authority = auth;
        }
    } else if (*a == '[') {
        h1_host_free(h);
        return NULL; /* not an IPv6 address: libcurl says why */
    }
    return h;
}

static void conn_close(h1_conn *conn);

int h1_host_busy(const h1_host *h)
{
    return h && (h->idle || h->warming || h->waiting || h->dnsreq);
}

void h1_host_free(h1_host *h)
{
    if (!h) return;
    while (h->idle) {
        h1_conn *conn = h->idle;
        h->idle = conn->next;
        conn_close(conn);
    }
    while (h->warming) {
        h1_conn *conn = h->warming;
        h->warming = conn->next;
        conn_close(conn);
    }
    /* a lookup under way runs on: its answer finds the host gone (the
     * client's end fails what is still pending) */
    if (h->dnsctx) h->dnsctx->h = NULL;
    free(h->name);
    free(h->authority);
    free(h);
}

/* ---- connections ------------------------------------------------------- */

static void conn_ev_cb(evutil_socket_t fd, short what, void *arg);
static void conn_warmed(h1_conn *c, short what);
static void call_connect(h1_call *k);
static void call_send(h1_call *k);

/* c, opened ahead, carries a call now (or closes): no longer counted so. */
static void conn_used(h1_conn *c)
{
    if (c->ahead) {
        c->ahead = 0;
        c->h->c->ahead--;
    }
}

static void conn_close(h1_conn *conn)
{
    conn_used(conn);
    if (conn->ev) event_free(conn->ev);
    if (conn->fd >= 0) close(conn->fd);
    free(conn->buf);
    free(conn);
}

/* Wait for what on the connection (tv: at most that long, then EV_TIMEOUT).
 * A kept connection waits to read both while idle and for an answer: only
 * its timer changes then, which costs no system call. */
static void conn_want(h1_conn *conn, short what, const struct timeval *tv)
{
    if (conn->want == what && event_pending(conn->ev, what, NULL)) {
        if (tv) event_add(conn->ev, tv);
        else event_remove_timer(conn->ev);
        return;
    }
    event_del(conn->ev);
    event_assign(conn->ev, conn->h->c->base, conn->fd, what | EV_PERSIST, conn_ev_cb, conn);
    event_add(conn->ev, tv);
    conn->want = what;
}

static void conn_unlink(h1_conn **list, h1_conn *conn)
{
    for (h1_conn **p = list; *p; p = &(*p)->next)
        if (*p == conn) {
            *p = conn->next;
            return;
        }
}

static void waiting_remove(h1_host *h, h1_call *k)
{
    for (h1_call **p = &h->waiting; *p; p = &(*p)->next)
        if (*p == k) {
            *p = k->next;
            if (!*p) h->waiting_tail = p;
            return;
        }
}

/* ---- ending a call ----------------------------------------------------- */

static void call_release(h1_call *k)
{
    if (k->tev) event_free(k->tev);
    free(k->req);
    free(k);
}

/* k is over: kept for the next call (h1_call_start) while there is room. */
static void call_free(h1_call *k)
{
    h1_client *c = k->h->c;
    call_unawait(k);
    free(k->a.keep);
    k->a.keep = NULL;
    if (c->nspare >= H1_CALL_SPARE || !k->tev) {
        call_release(k);
        return;
    }
    event_del(k->tev);
    if (k->reqcap > H1_REQ_KEEP) {
        free(k->req);
        k->req = NULL;
        k->reqcap = 0;
    }
    k->next = c->spare;
    c->spare = k;
    c->nspare++;
}

/* The call is over: its connection is kept for the next call when the
 * answer ended cleanly and the host did not say close; else it closes. */
static void call_finish(h1_call *k, long status)
{
    h1_conn *conn = k->conn;
    if (conn) {
        conn->k = NULL;
        if (status && !k->a.close && conn->len == 0) {
            conn->reused = 1;
            conn->idle_since_ms = util_mono_ms();
            conn->next = k->h->idle;
            k->h->idle = conn;
            /* idle: closed when the host closes it (readable) or after
             * keepalive_ms, so a host no longer called holds no descriptor */
            conn_want(conn, EV_READ, &k->h->c->ka_tv);
        } else {
            conn_close(conn);
        }
    }
    h1_done_fn *done = k->done;
    void *priv = k->priv;
    int flags = k->flags, cut = k->cut;
    char err[sizeof(k->err)], *body = k->a.keep;
    size_t body_len = k->a.kept;
    int64_t ra = k->a.retry_after_ms - 1; /* -1: none */
    memcpy(err, k->err, sizeof(err));
    k->a.keep = NULL;
    call_free(k);
    done(priv, status, status && !cut ? NULL : err, flags, body, body_len, ra);
}

/* The call failed for the reason in k->err: its connection closes. */
static void call_failed(h1_call *k)
{
    if (k->conn) {
        conn_close(k->conn);
        k->conn = NULL;
    }
    call_finish(k, 0);
}

static void call_fail(h1_call *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void call_fail(h1_call *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->err, sizeof(k->err), fmt, ap);
    va_end(ap);
    call_failed(k);
}

/* A connect failed with errno e: out of descriptors, memory or local ports
 * is this process's own trouble, not the host's (H1_LOCAL). */
static void call_fail_connect(h1_call *k, int e)
{
    if (e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS || e == EADDRNOTAVAIL)
        k->flags |= H1_LOCAL;
    call_fail(k, "Failed to connect to %s port %d: %s", k->h->name, k->h->port, strerror(e));
}

/* The connection ended (k->err says how) after the final answer's head: the
 * receiver has answered, and its status stands, the connection closing
 * mid-body. 0 when no head had come. */
static int call_cut(h1_call *k)
{
    if (!k->conn || !h1_answer_has_status(&k->a)) return 0;
    k->a.close = 1;
    k->cut = 1;
    call_finish(k, k->a.status);
    return 1;
}

/* A kept connection failed before any byte of the answer: the host closed it
 * while it sat idle. The request goes once more, on a new connection. */
static int call_retry(h1_call *k)
{
    if (!k->conn || !k->conn->reused || k->got || k->retried) return 0;
    call_unawait(k);
    conn_close(k->conn);
    k->conn = NULL;
    k->retried = 1;
    k->off = 0;
    call_connect(k);
    return 1;
}

/* ---- I/O ----------------------------------------------------------------- */

static void call_recv(h1_call *k)
{
    h1_conn *c = k->conn;
    char *rbuf = k->h->c->rbuf;
    const size_t room = sizeof(k->h->c->rbuf);
    for (;;) {
        ssize_t n = recv(c->fd, rbuf, room, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : 0;
            if (call_retry(k)) return;
            snprintf(k->err, sizeof(k->err), H1_CUT_CLOSED, k->a.status);
            if (call_cut(k)) return;
            if (e) call_fail(k, "recv failure from %s port %d: %s", k->h->name, k->h->port,
                             strerror(e));
            else call_fail(k, "connection to %s port %d closed before the answer ended",
                           k->h->name, k->h->port);
            return;
        }
        k->got += (size_t)n;
        h1_worked(k->h->c);
        /* parsed where it landed; only a part head or line waits in c->buf */
        const char *data = rbuf;
        size_t len = (size_t)n, used;
        if (c->len) {
            if (c->len + len > c->cap) {
                c->cap = (c->len + len) * 2;
                c->buf = xrealloc(c->buf, c->cap);
            }
            memcpy(c->buf + c->len, rbuf, len);
            c->len += len;
            data = c->buf;
            len = c->len;
        }
        int rc = h1_answer_parse(&k->a, data, len, &used);
        size_t left = len - used;
        if (left && data == c->buf) {
            memmove(c->buf, c->buf + used, left);
        } else if (left) {
            if (left > c->cap) {
                c->cap = left < 1024 ? 1024 : left;
                free(c->buf);
                c->buf = xmalloc(c->cap);
            }
            memcpy(c->buf, data + used, left);
        }
        c->len = left; /* left after a complete answer: the connection is not kept */
        if (rc < 0) {
            util_copy(k->err, sizeof(k->err), k->a.err);
            call_failed(k);
            return;
        }
        if (rc > 0) {
            call_finish(k, k->a.status);
            return;
        }
        if ((size_t)n < room) return; /* the socket is drained */
    }
}

static void call_send(h1_call *k)
{
    h1_conn *c = k->conn;
    while (k->off < k->reqlen) {
        ssize_t n = send(c->fd, k->req + k->off, k->reqlen - k->off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            conn_want(c, EV_WRITE, NULL);
            return;
        }
        if (n < 0) {
            int e = errno;
            if (call_retry(k)) return;
            call_fail(k, "send failure to %s port %d: %s", k->h->name, k->h->port, strerror(e));
            return;
        }
        k->off += (size_t)n;
    }
    if (!k->awaiting) {
        k->awaiting = 1;
        k->h->c->awaiting++;
    }
    h1_worked(k->h->c);
    conn_want(c, EV_READ, NULL);
}

/* Connect c to its host's addresses from c->ai on; 0 when under way. When
 * the guard refused every address, -1 with the reason in the call's err. */
/* EADDRNOTAVAIL from connect() is tickd's own trouble when the local ports
 * ran out, but the destination's when no local address can reach it (an
 * IPv6 address where IPv6 is off): then a UDP socket, which needs no TCP
 * port, cannot be connected there either. Without this, such a task would
 * be retried for ever without an attempt counted. */
static int h1_no_source(const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int r = connect(fd, sa, len), e = errno;
    close(fd);
    return r != 0 && (e == EADDRNOTAVAIL || e == ENETUNREACH);
}

static int conn_connect(h1_conn *c)
{
    h1_host *h = c->h;
    int err = 0;
    for (; c->ai < h->naddr; c->ai++) {
        const struct sockaddr *sa = (const struct sockaddr *)&h->addr[c->ai];
        /* a connection opened ahead has no call to tell why */
        char why[sizeof(c->k->err)];
        if (h->c->guard && h->c->guard(h->c->guard_priv, c->k ? c->k->priv : NULL, sa,
                                       c->k ? c->k->err : why, sizeof(why)) != 0) {
            if (c->k && ++c->k->denied == h->naddr) return -1;
            continue;
        }
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, sa, h->alen[c->ai]) == 0 || errno == EINPROGRESS) {
            c->fd = fd;
            c->connecting = 1;
            if (!c->ev) c->ev = event_new(h->c->base, fd, EV_WRITE | EV_PERSIST, conn_ev_cb, c);
            log_assert(c->ev);
            /* one opened ahead waits no longer than a kept one would */
            conn_want(c, EV_WRITE, c->k ? NULL : &h->c->ka_tv);
            return 0;
        }
        err = errno;
        close(fd);
        if (err == EADDRNOTAVAIL && h1_no_source(sa, h->alen[c->ai])) err = ENETUNREACH;
    }
    return err ? err : ECONNREFUSED;
}

static void conn_ev_cb(evutil_socket_t fd, short what, void *arg)
{
    h1_conn *c = arg;
    h1_call *k = c->k;
    if (c->warm) {
        conn_warmed(c, what);
        return;
    }
    if (!k) {
        /* idle: the host closed it (or sent what nobody asked), or it sat
         * unused for keepalive_ms */
        conn_unlink(&c->h->idle, c);
        conn_close(c);
        return;
    }
    if (c->connecting) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err) {
            event_del(c->ev);
            close(c->fd);
            c->fd = -1;
            c->ai++;
            int e = c->ai < c->h->naddr ? conn_connect(c) : err;
            if (e < 0) call_failed(k);
            else if (e) call_fail_connect(k, e);
            return;
        }
        c->connecting = 0;
    }
    if (k->off < k->reqlen) call_send(k);
    else call_recv(k);
}

/* A connection opened ahead (c->warm) is writable, failed or out of time:
 * connected, it is kept as if a call had just ended on it; else it goes. */
static void conn_warmed(h1_conn *c, short what)
{
    h1_host *h = c->h;
    int err = 0;
    socklen_t len = sizeof(err);
    conn_unlink(&h->warming, c);
    c->warm = 0;
    if ((what & EV_TIMEOUT) || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
        conn_close(c);
        return;
    }
    c->connecting = 0;
    /* it may have sat a while: a call whose request it loses before any
     * answer goes once more on a new one, as on a kept connection */
    c->reused = 1;
    c->idle_since_ms = util_mono_ms();
    c->next = h->idle;
    h->idle = c;
    conn_want(c, EV_READ, &h->c->ka_tv);
}

void h1_host_warm(h1_host *h, int want)
{
    if (!h || h->naddr == 0 || util_mono_ms() >= h->addr_until_ms) return;
    int have = 0;
    for (h1_conn *c = h->idle; c && have < want; c = c->next) have++;
    for (h1_conn *c = h->warming; c && have < want; c = c->next) have++;
    for (; have < want && h->c->ahead < h->c->ahead_max; have++) {
        h1_conn *c = xcalloc(1, sizeof(*c));
        c->h = h;
        c->fd = -1;
        c->warm = 1;
        c->ahead = 1;
        h->c->ahead++;
        if (conn_connect(c) != 0) {
            conn_close(c);
            return; /* refused or failing now: the calls will say why */
        }
        c->next = h->warming;
        h->warming = c;
    }
}

/* Put k on a connection: a kept one if there is one, else one opening
 * ahead, else a new one. */
static void call_connect(h1_call *k)
{
    h1_host *h = k->h;
    int64_t now = util_mono_ms();
    while (h->idle && !k->retried) {
        h1_conn *c = h->idle;
        h->idle = c->next;
        if (now - c->idle_since_ms >= h->c->keepalive_ms) {
            conn_close(c);
            continue;
        }
        conn_used(c);
        c->k = k;
        k->conn = c;
        call_send(k);
        return;
    }
    if (h->warming) {
        /* still connecting: the call's own timer bounds it from now */
        h1_conn *c = h->warming;
        h->warming = c->next;
        c->warm = 0;
        conn_used(c);
        c->k = k;
        k->conn = c;
        k->denied = 0;
        conn_want(c, EV_WRITE, NULL);
        return;
    }
    h1_conn *c = xcalloc(1, sizeof(*c));
    c->h = h;
    c->fd = -1;
    c->k = k;
    k->conn = c;
    k->denied = 0;
    int e = conn_connect(c);
    if (e < 0) call_failed(k);
    else if (e) call_fail_connect(k, e);
}

/* ---- resolving ------------------------------------------------------------ */

typedef struct dns_ctx dns_ctx;

static void host_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    dns_ctx *d = arg;
    h1_host *h = d->h;
    free(d);
    if (!h || result == EVUTIL_EAI_CANCEL) {
        if (res) evutil_freeaddrinfo(res);
        return;
    }
    h->dnsreq = NULL;
    h->dnsctx = NULL;
    h->naddr = 0;
    for (struct evutil_addrinfo *a = res; a && h->naddr < H1_ADDR_MAX; a = a->ai_next) {
        if (a->ai_addrlen > sizeof(h->addr[0])) continue;
        memcpy(&h->addr[h->naddr], a->ai_addr, a->ai_addrlen);
        h->alen[h->naddr++] = (socklen_t)a->ai_addrlen;
    }
    if (res) evutil_freeaddrinfo(res);
    if (result == 0 && h->naddr) h->addr_until_ms = util_mono_ms() + H1_DNS_TTL_MS;
    h1_call *list = h->waiting;
    h->waiting = NULL;
    h->waiting_tail = &h->waiting;
    while (list) {
        h1_call *k = list;
        list = k->next;
        k->next = NULL;
        if (result == 0 && h->naddr) call_connect(k);
        else call_fail(k, "Could not resolve host: %s (%s)", h->name,
                       result ? evutil_gai_strerror(result) : "no address");
    }
}

static void host_resolve(h1_host *h)
{
    struct evutil_addrinfo hints;
    char port[8];
    dns_ctx *d = xmalloc(sizeof(*d));
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
    snprintf(port, sizeof(port), "%d", h->port);
    d->h = h;
    h->dnsctx = d;
    /* may answer at once (an address, the hosts file): then it returns NULL */
    struct evdns_getaddrinfo_request *r =
        evdns_getaddrinfo(h->c->dns, h->name, port, &hints, host_resolved, d);
    if (r) h->dnsreq = r;
}

/* ---- starting a call ------------------------------------------------------ */

static void call_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    h1_call *k = arg;
    (void)fd, (void)what;
    if (!k->started) {
        /* started from the loop: done never runs inside h1_call_start */
        k->started = 1;
        k->began_ms = util_mono_ms();
        struct timeval tv = {k->timeout_ms / 1000, (k->timeout_ms % 1000) * 1000};
        evtimer_add(k->tev, &tv);
        h1_host *h = k->h;
        if (k->began_ms < h->addr_until_ms) {
            call_connect(k);
            return;
        }
        k->next = NULL;
        *h->waiting_tail = k;
        h->waiting_tail = &k->next;
        if (!h->dnsreq) host_resolve(h);
        return;
    }
    /* the loop's timers run on its coarse clock (a kernel tick, main.c),
     * which can run one out a few ms early: a call is never cut before
     * its timeout */
    int64_t left = k->began_ms + k->timeout_ms - util_mono_ms();
    if (left > 0) {
        struct timeval tv = {left / 1000, (left % 1000) * 1000};
        evtimer_add(k->tev, &tv);
        return;
    }
    if (!k->conn) waiting_remove(k->h, k);
    k->flags |= H1_TIMEOUT;
    snprintf(k->err, sizeof(k->err), H1_CUT_TIMEOUT, k->a.status, (long long)k->timeout_ms);
    if (call_cut(k)) return;
    call_fail(k, "Timeout: no answer from %s port %d within %lld ms", k->h->name, k->h->port,
              (long long)k->timeout_ms);
}

static char *h1_put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* Which of Host, User-Agent and Accept the header lines give (H1_GIVES_*),
 * in one pass over them. */
#define H1_GIVES_HOST 1
#define H1_GIVES_UA 2
#define H1_GIVES_ACCEPT 4
static int h1_gives(const char *hdrs, size_t len)
{
    static const struct { const char *name; size_t n; int bit; } known[] = {
        {"host:", 5, H1_GIVES_HOST}, {"user-agent:", 11, H1_GIVES_UA},
        {"accept:", 7, H1_GIVES_ACCEPT}};
    int gives = 0;
    for (const char *l = hdrs, *end = hdrs + len; l < end;) {
        for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
            if ((*l | 0x20) == known[i].name[0] && (size_t)(end - l) >= known[i].n &&
                strncasecmp(l, known[i].name, known[i].n) == 0)
                gives |= known[i].bit;
        const char *eol = memchr(l, '\n', (size_t)(end - l));
        if (!eol) break;
        l = eol + 1;
    }
    return gives;
}

h1_call *h1_call_start(h1_host *h, const char *method, const char *url, const char *hdrs,
                       size_t hdrs_len, const char *body, size_t body_len, int64_t timeout_ms,
                       h1_done_fn *done, void *priv)
{
    h1_client *c = h->c;
    h1_call *k = c->spare;
    struct event *tev = NULL;
    char *req = NULL;
    size_t reqcap = 0;
    if (k) {
        /* its timer's argument is k already */
        c->spare = k->next;
        c->nspare--;
        tev = k->tev;
        req = k->req;
        reqcap = k->reqcap;
        memset(k, 0, sizeof(*k));
    } else {
        k = xcalloc(1, sizeof(*k));
    }
    k->h = h;
    k->done = done;
    k->priv = priv;
    k->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    k->a.head_req = strcmp(method, "HEAD") == 0;
    k->a.keep_on = 1;

    /* the request target: the URL after its authority, without a fragment */
    const char *t = url + 7 + strcspn(url + 7, "/?#");
    size_t tl = strcspn(t, "#");
    int slash = *t != '/';
    int gives = h1_gives(hdrs, hdrs_len);
    int has_host = gives & H1_GIVES_HOST, has_ua = gives & H1_GIVES_UA,
        has_accept = gives & H1_GIVES_ACCEPT;
    size_t ml = strlen(method), al = strlen(h->authority);
    size_t cap = ml + 1 + 1 + tl + 11 + 8 + al + 2 + 24 + 13 + hdrs_len + 40 + 2 + body_len;
    if (cap > reqcap) {
        free(req);
        reqcap = cap < 1024 ? 1024 : cap;
        req = xmalloc(reqcap);
    }
    k->reqcap = reqcap;
    char *p = k->req = req;
    p = h1_put(p, method, ml);
    *p++ = ' ';
    if (slash) *p++ = '/';
    p = h1_put(p, t, tl);
    p = h1_put(p, " HTTP/1.1\r\n", 11);
    if (!has_host) {
        p = h1_put(p, "Host: ", 6);
        p = h1_put(p, h->authority, al);
        p = h1_put(p, "\r\n", 2);
    }
    if (!has_ua) p = h1_put(p, "User-Agent: tickd/1\r\n", 21);
    if (!has_accept) p = h1_put(p, "Accept: */*\r\n", 13);
    p = h1_put(p, hdrs, hdrs_len);
    if (body) {
        char num[24], *q = num + sizeof(num);
        size_t v = body_len;
        do *--q = (char)('0' + v % 10); while (v /= 10);
        p = h1_put(p, "Content-Length: ", 16);
        p = h1_put(p, q, (size_t)(num + sizeof(num) - q));
        p = h1_put(p, "\r\n", 2);
    }
    p = h1_put(p, "\r\n", 2);
    if (body) p = h1_put(p, body, body_len);
    k->reqlen = (size_t)(p - k->req);

    k->tev = tev ? tev : evtimer_new(c->base, call_timer_cb, k);
    log_assert(k->tev);
    event_active(k->tev, EV_TIMEOUT, 0);
    return k;
}

void h1_call_abort(h1_call *k)
{
    if (!k) return;
    if (k->conn) conn_close(k->conn);
    else if (k->started) waiting_remove(k->h, k);
    call_free(k);
}
