/* store_http.c -- the floor of a server that acknowledges only what Redis
 * holds: noop_http.c plus the least such a server must do. Each request's body
 * goes to Redis in one command, RPUSH store_http:tasks BODY, over one
 * nonblocking connection; the commands of all the requests read in one loop
 * turn are written together (pipelined, as any asynchronous client does), and
 * a request is answered 201 (the same fixed answer as noop_http's) only when
 * Redis's reply to its own command has come. A reply that is an error is
 * answered 503.
 *
 * Why RPUSH: it is the cheapest command that really keeps each body (an
 * append to one list, O(1), no key to make a request, no script to run), so
 * both this server's part and Redis's are a lower bound for any server that
 * stores: SET would need a key made a request and a dict entry in Redis,
 * EVALSHA a script call. Its reply (":N\r\n", or "-ERR ...\r\n") is one line.
 *
 * Built with -DPARSE_JSON (and -lcjson), it is "parse-and-store": before
 * storing, each body is parsed with cJSON, the JSON library tickd is built
 * on, and its three members of bench/post.lua's task are looked up and their
 * types checked; a body that is not such an object is answered 400 and not
 * stored. The floor of a server that reads the task it stores with that
 * library, and does nothing else a scheduler must (no id, no due time, no
 * record, no script). A refused body's 400 goes out in its turn: a PING
 * takes its place in the line to Redis, so that an answer never passes
 * those of the requests before it on the same connection.
 *
 *   store_http PORT REDIS_PORT      (Redis on 127.0.0.1; runs until killed) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>

#include "fixed_http.h"
#ifdef PARSE_JSON
#include <cjson/cJSON.h>
#endif

#define KEY "store_http:tasks"

static unsigned gens[MAXCONN]; /* bumped when fd is closed: a reply for a closed one is dropped */

/* Bytes to send to Redis, and the requests waiting for a reply, in order. */
static char *rout;
static size_t rout_len, rout_cap;
static char *rin;
static size_t rin_len, rin_cap;
typedef struct {
    int fd;
    unsigned gen;
    int refused; /* a body parse-and-store refused: answered 400 when its PING comes back */
} waiter;
static waiter *wq;
static size_t wq_head, wq_tail, wq_cap; /* ring: [head, tail) */

static const char unavailable[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";

#ifdef PARSE_JSON
static const char bad_request[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";

/* 1 if b[0..n) is an object with a string callback_url, a string method
 * and a number delay_ms (bench/post.lua's task), parsed by cJSON. */
static int task_ok(const char *b, size_t n)
{
    cJSON *j = cJSON_ParseWithLength(b, n);
    int ok = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "callback_url")) &&
             cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "method")) &&
             cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "delay_ms"));
    cJSON_Delete(j);
    return ok;
}
#endif

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void *grow(void *p, size_t *cap, size_t need, size_t unit)
{
    if (need <= *cap) return p;
    while (*cap < need) *cap = *cap ? *cap * 2 : 65536;
    p = realloc(p, *cap * unit);
    if (!p) die("store_http: realloc");
    return p;
}

/* Queue RPUSH KEY BODY for the request of fd (with refused, a PING: its
 * answer, a 400, then waits its turn). */
static void store(int fd, const char *b, size_t n, int refused)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    if (refused) {
        rout = grow(rout, &rout_cap, rout_len + sizeof(ping) - 1, 1);
        memcpy(rout + rout_len, ping, sizeof(ping) - 1);
        rout_len += sizeof(ping) - 1;
    } else {
        char pre[96];
        int pl = snprintf(pre, sizeof(pre), "*3\r\n$5\r\nRPUSH\r\n$%zu\r\n%s\r\n$%zu\r\n",
                          sizeof(KEY) - 1, KEY, n);
        rout = grow(rout, &rout_cap, rout_len + (size_t)pl + n + 2, 1);
        memcpy(rout + rout_len, pre, (size_t)pl);
        memcpy(rout + rout_len + pl, b, n);
        memcpy(rout + rout_len + pl + n, "\r\n", 2);
        rout_len += (size_t)pl + n + 2;
    }
    if (wq_tail - wq_head == wq_cap) { /* full: make it twice as large, in order */
        size_t old = wq_cap, ncap = old ? old * 2 : 1024;
        waiter *nw = malloc(ncap * sizeof(*nw));
        if (!nw) die("store_http: malloc");
        for (size_t i = 0; i < old; i++) nw[i] = wq[(wq_head + i) % old];
        free(wq);
        wq = nw;
        wq_cap = ncap;
        wq_head = 0;
        wq_tail = old;
    }
    wq[wq_tail++ % wq_cap] = (waiter){fd, gens[fd], refused};
}

static void conn_close(int fd)
{
    close(fd);
    lens[fd] = 0;
    gens[fd]++;
}

/* Write what is queued for Redis; EPOLLOUT on it while some is left. */
static void flush_redis(int ep, int rfd, int *want_out)
{
    size_t off = 0;
    while (off < rout_len) {
        ssize_t k = write(rfd, rout + off, rout_len - off);
        if (k < 0) {
            if (errno == EAGAIN) break;
            die("store_http: write to redis");
        }
        off += (size_t)k;
    }
    memmove(rout, rout + off, rout_len - off);
    rout_len -= off;
    int want = rout_len > 0;
    if (want != *want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.fd = rfd};
        epoll_ctl(ep, EPOLL_CTL_MOD, rfd, &ev);
        *want_out = want;
    }
}

/* Read Redis's replies; answer each one's request. */
static void read_redis(int rfd, const char *resp, int rl)
{
    for (;;) {
        rin = grow(rin, &rin_cap, rin_len + 65536, 1);
        ssize_t k = read(rfd, rin + rin_len, rin_cap - rin_len);
        if (k == 0) {
            fprintf(stderr, "store_http: redis closed the connection\n");
            exit(1);
        }
        if (k < 0) {
            if (errno == EAGAIN) break;
            die("store_http: read from redis");
        }
        rin_len += (size_t)k;
    }
    size_t off = 0;
    for (;;) {
        const char *e = memmem(rin + off, rin_len - off, "\r\n", 2);
        if (!e) break;
        if (wq_head == wq_tail) {
            fprintf(stderr, "store_http: a reply nobody waits for\n");
            exit(1);
        }
        char kind = rin[off];
        waiter w = wq[wq_head++ % wq_cap];
        off = (size_t)(e - rin) + 2;
        if (w.gen != gens[w.fd]) continue; /* its connection is gone */
        const char *a = resp;
        size_t al = (size_t)rl;
        if (kind != (w.refused ? '+' : ':')) {
            a = unavailable;
            al = sizeof(unavailable) - 1;
        }
#ifdef PARSE_JSON
        else if (w.refused) {
            a = bad_request;
            al = sizeof(bad_request) - 1;
        }
#endif
        if (write(w.fd, a, al) != (ssize_t)al) conn_close(w.fd);
    }
    memmove(rin, rin + off, rin_len - off);
    rin_len -= off;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: store_http PORT REDIS_PORT\n");
        return 2;
    }
    char resp[512];
    int rl = fixed_response(resp), one = 1;
    struct sockaddr_in ra = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    ra.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rfd = socket(AF_INET, SOCK_STREAM, 0);
    if (rfd < 0 || connect(rfd, (struct sockaddr *)&ra, sizeof(ra)) != 0) die("store_http: redis");
    setsockopt(rfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK) != 0) die("store_http: redis");
    int ep, l = fixed_listen(argv[1], &ep);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = rfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, rfd, &ev);
    int want_out = 0;
    for (;;) {
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == rfd) {
                if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) read_redis(rfd, resp, rl);
                continue; /* EPOLLOUT: flushed below */
            }
            if (fd == l) {
                fixed_accept(ep, l);
                continue;
            }
            if (fixed_read(fd) <= 0) {
                conn_close(fd);
                continue;
            }
            size_t used, head, cl;
            while ((used = complete(bufs[fd], lens[fd], &head, &cl)) > 0) {
                int refused = 0;
#ifdef PARSE_JSON
                refused = cl && !task_ok(bufs[fd] + head, cl); /* (a bodiless probe is stored) */
#endif
                store(fd, bufs[fd] + head, cl, refused);
                fixed_take(fd, used);
            }
            if (lens[fd] == CONN_BUF) /* not HTTP this server can take */
                conn_close(fd);
        }
        /* this turn's commands, together */
        if (rout_len) flush_redis(ep, rfd, &want_out);
    }
}
