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
 * Built with -DKEYSPACE (and -DPARSE_JSON), it is "the keyspace's floor": a
 * server that stores each parsed task where tickd keeps it, through tickd's
 * own add script (lua/add.lua, loaded by the caller, its SHA given) in its
 * cheapest form: fresh tasks only, the requests of one loop turn due in one
 * slice as one EVALSHA of (due, member) pairs, the member the task's id
 * (its slice, due time and 22 characters) and its record as tickd writes a
 * task with no options ("url"\n\n10000\n\n\n{}); each request is
 * answered with its own id, as tickd answers. No validation past the types,
 * no escaping, one bucket, no registry of slices, no idempotency key: the
 * least any server of this keyspace does for a POST, and so the floor of
 * tickd's own CPU a POST.
 *
 *   store_http PORT REDIS_PORT [ADD_SHA]  (Redis on 127.0.0.1; runs until killed) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>

#include "fixed_http.h"
#ifdef PARSE_JSON
#include <cjson/cJSON.h>
#endif
#ifdef KEYSPACE
#ifndef PARSE_JSON
#error "the keyspace's floor parses each task: build it with -DPARSE_JSON -DKEYSPACE"
#endif
#include <time.h>
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
    int count;   /* the requests the reply it waits for answers: it and those after it */
#ifdef KEYSPACE
    long long due_ms;
    char id[64];  /* its task's id, for its answer */
#endif
} waiter;
static waiter *wq;
static size_t wq_head, wq_tail, wq_cap; /* ring: [head, tail) */

static const char unavailable[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";

#ifdef PARSE_JSON
static const char bad_request[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";

/* 1 if b[0..n) is an object with a string callback_url, a string method
 * and a number delay_ms (bench/post.lua's task), parsed by cJSON. */
static int task_ok(const char *b, size_t n, char *url, size_t urlmax, double *delay_ms)
{
    cJSON *j = cJSON_ParseWithLength(b, n);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "callback_url"),
                *d = cJSON_GetObjectItemCaseSensitive(j, "delay_ms");
    int ok = cJSON_IsString(u) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "method")) &&
             cJSON_IsNumber(d);
#ifdef KEYSPACE /* what it stores (parse-and-store looks only) */
    ok = ok && strlen(u->valuestring) < urlmax;
    if (ok) {
        strcpy(url, u->valuestring);
        *delay_ms = d->valuedouble;
    }
#else
    (void)url, (void)urlmax, (void)delay_ms;
#endif
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

static void rout_add(const char *p, size_t n)
{
    rout = grow(rout, &rout_cap, rout_len + n, 1);
    memcpy(rout + rout_len, p, n);
    rout_len += n;
}

static waiter *wait_push(int fd, int refused)
{
    if (wq_tail - wq_head == wq_cap) { /* full: make it twice as large, in order */
        size_t old = wq_cap, ncap = old ? old * 2 : 1024;
        waiter *nw = malloc(ncap * sizeof(*nw));
        if (!nw) die("store_http: malloc");
        /* each keeps its place in the count (bat_first counts so) */
        for (size_t a = wq_head; a < wq_tail; a++) nw[a % ncap] = wq[a % old];
        free(wq);
        wq = nw;
        wq_cap = ncap;
    }
    waiter *w = &wq[wq_tail++ % wq_cap];
    *w = (waiter){.fd = fd, .gen = gens[fd], .refused = refused, .count = 1};
    return w;
}

#ifdef KEYSPACE
/* The open batch: the (due, member) pairs of one slice, in RESP, and the
 * ring index of its first request. */
static const char *add_sha;
static char *bat;
static size_t bat_len, bat_cap, bat_first;
static int bat_n;
static char bat_slice[32];
static long long bat_end;

/* The open batch as one EVALSHA add.lua (fresh pairs, sent once). */
static void batch_close(void)
{
    if (!bat_n) return;
    char head[512];
    int hl = snprintf(head, sizeof(head),
                      "*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n4\r\n", 11 + 2 * bat_n,
                      add_sha);
    rout_add(head, (size_t)hl);
    static const char *kinds[] = {"due", "task", "del", "fence"};
    for (int k = 0; k < 4; k++) {
        char key[96];
        int kl = snprintf(key, sizeof(key), "tickd:{%s}:%s", bat_slice, kinds[k]);
        hl = snprintf(head, sizeof(head), "$%d\r\n%s\r\n", kl, key);
        rout_add(head, (size_t)hl);
    }
    char end[24];
    int el = snprintf(end, sizeof(end), "%lld", bat_end);
    hl = snprintf(head, sizeof(head), "$%d\r\n%s\r\n$5\r\n30000\r\n$1\r\n0\r\n$1\r\nf\r\n",
                  el, end);
    rout_add(head, (size_t)hl);
    rout_add(bat, bat_len);
    wq[bat_first % wq_cap].count = bat_n;
    bat_len = 0;
    bat_n = 0;
}

/* v in decimal at p; past its last digit. */
static char *put_int(char *p, long long v)
{
    char buf[24], *b = buf + sizeof(buf);
    do *--b = (char)('0' + v % 10); while (v /= 10);
    size_t n = (size_t)(buf + sizeof(buf) - b);
    memcpy(p, b, n);
    return p + n;
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}
#define PUTS(p, lit) put(p, lit, sizeof(lit) - 1)

/* The request's task into the open batch of its slice: its id made. No
 * printf on this path (each would cost more than the parse): the slice's
 * name is made once a minute. */
static void store_task(int fd, const char *url, long long due)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static unsigned long long rnd = 88172645463325252ULL;
    static long long minute = -1;
    static char slice[32];
    static size_t slen;
    if (due / 60000 != minute) {
        minute = due / 60000;
        time_t sec = (time_t)(minute * 60);
        struct tm tm;
        gmtime_r(&sec, &tm);
        slen = (size_t)snprintf(slice, sizeof(slice), "%04d%02d%02d%02d%02d.0", tm.tm_year + 1900,
                                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min);
    }
    if (bat_n && strcmp(slice, bat_slice) != 0) batch_close();
    if (!bat_n) {
        memcpy(bat_slice, slice, slen + 1);
        bat_end = (minute + 1) * 60000;
        bat_first = wq_tail;
    }
    waiter *w = wait_push(fd, 0);
    w->count = 0;
    w->due_ms = due;
    char *p = put(w->id, slice, slen);
    *p++ = '.';
    p = put_int(p, due);
    *p++ = '.';
    for (int i = 0; i < 22; i++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        *p++ = abc[rnd % 62];
    }
    *p = '\0';
    size_t idl = (size_t)(p - w->id), ul = strlen(url);
    size_t ml = idl + ul + 15; /* id \n "url" \n\n10000\n\n\n{} */
    bat = grow(bat, &bat_cap, bat_len + ml + 64, 1);
    char *q = bat + bat_len, d[24];
    size_t dl = (size_t)(put_int(d, due) - d);
    *q++ = '$';
    q = put_int(q, (long long)dl);
    q = PUTS(q, "\r\n");
    q = put(q, d, dl);
    q = PUTS(q, "\r\n$");
    q = put_int(q, (long long)ml);
    q = PUTS(q, "\r\n");
    q = put(q, w->id, idl);
    q = PUTS(q, "\n\"");
    q = put(q, url, ul);
    q = PUTS(q, "\"\n\n10000\n\n\n{}\r\n");
    bat_len = (size_t)(q - bat);
    bat_n++;
}
#endif

/* Queue RPUSH KEY BODY for the request of fd (with refused, a PING: its
 * answer, a 400, then waits its turn). */
static void store(int fd, const char *b, size_t n, int refused)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
#ifdef KEYSPACE
    batch_close(); /* its reply comes first */
#endif
    if (refused) {
        rout_add(ping, sizeof(ping) - 1);
    } else {
        char pre[96];
        int pl = snprintf(pre, sizeof(pre), "*3\r\n$5\r\nRPUSH\r\n$%zu\r\n%s\r\n$%zu\r\n",
                          sizeof(KEY) - 1, KEY, n);
        rout_add(pre, (size_t)pl);
        rout_add(b, n);
        rout_add("\r\n", 2);
    }
    wait_push(fd, refused);
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
        off = (size_t)(e - rin) + 2;
        int count = wq[wq_head % wq_cap].count;
        for (int k = 0; k < count; k++) {
            if (wq_head == wq_tail) {
                fprintf(stderr, "store_http: a reply for more than wait\n");
                exit(1);
            }
            waiter w = wq[wq_head++ % wq_cap];
            if (w.gen != gens[w.fd]) continue; /* its connection is gone */
            const char *a = resp;
            size_t al = (size_t)rl;
#ifdef KEYSPACE
            char own[512];
            if (w.id[0]) { /* a task stored: its own id, as tickd answers */
                static const char head[] = "HTTP/1.1 201 Created\r\nDate: Sun, 22 Nov 2026 16:00:00 "
                                           "GMT\r\nContent-Type: application/json\r\nContent-Length: ";
                char body[256], *b = body;
                size_t idl = strlen(w.id);
                b = PUTS(b, "{\"id\":\"");
                b = put(b, w.id, idl);
                b = PUTS(b, "\",\"key\":\"");
                b = put(b, w.id + idl - 22, 22);
                b = PUTS(b, "\",\"execute_at\":");
                b = put_int(b, w.due_ms);
                b = PUTS(b, ",\"status\":\"scheduled\"}\n");
                char *o = PUTS(own, head);
                o = put_int(o, (long long)(b - body));
                o = PUTS(o, "\r\n\r\n");
                o = put(o, body, (size_t)(b - body));
                al = (size_t)(o - own);
                a = own;
            }
#endif
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
    }
    memmove(rin, rin + off, rin_len - off);
    rin_len -= off;
}

int main(int argc, char **argv)
{
#ifdef KEYSPACE
    if (argc != 4 || strlen(argv[3]) != 40) {
        fprintf(stderr, "usage: store_http PORT REDIS_PORT ADD_SHA\n");
        return 2;
    }
    add_sha = argv[3];
#else
    if (argc != 3) {
        fprintf(stderr, "usage: store_http PORT REDIS_PORT\n");
        return 2;
    }
#endif
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
                char url[2048];
                double delay = 0;
                /* (a bodiless probe is stored) */
                refused = cl && !task_ok(bufs[fd] + head, cl, url, sizeof(url), &delay);
#endif
#ifdef KEYSPACE
                if (cl && !refused) {
                    struct timespec ts;
                    clock_gettime(CLOCK_REALTIME, &ts);
                    store_task(fd, url, ts.tv_sec * 1000LL + ts.tv_nsec / 1000000 + (long long)delay);
                } else
#endif
                store(fd, bufs[fd] + head, cl, refused);
                fixed_take(fd, used);
            }
            if (lens[fd] == CONN_BUF) /* not HTTP this server can take */
                conn_close(fd);
        }
        /* this turn's commands, together */
#ifdef KEYSPACE
        batch_close();
#endif
        if (rout_len) flush_redis(ep, rfd, &want_out);
    }
}
