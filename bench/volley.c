/* volley.c -- the steady rows' floor: what the receiver and loopback TCP take
 * for a batch of callbacks due at one instant, with no scheduler and no store
 * in the way. Every EVERY ms it sends BATCH callback-shaped requests (tickd's
 * headers, a 102-byte JSON body, `tickd-scheduled-at` the instant) over CONNS
 * keep-alive connections, as tickd's client does: one request in flight a
 * connection, the rest waiting in order for the first connection to answer.
 * The receiver measures lateness as it does for tickd (arrival minus
 * tickd-scheduled-at), so the same /stats read gives what any scheduler
 * sending that batch at its exact millisecond would see at best.
 *
 *   volley HOST PORT PATH BATCH EVERY_MS SECS CONNS
 *
 * It prints one JSON line: {"sent", "answered", "late_start_max_us"}, the
 * last being how late after its instant a batch's first request was written
 * (its own timer's lateness; the floor is only a floor while it is small).
 * One thread on epoll; the requests of a batch are written in one loop turn. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS_MAX 1024

typedef struct conn {
    int fd;
    int busy;             /* a request in flight */
    char in[4096];
    size_t inlen;
} conn;

static conn conns[CONNS_MAX];
static int nconns;
static long long queued, sent, answered; /* requests of all batches */
static long long seq;
static char host[64], path[256];
static int port;

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The due instants of the requests waiting for a connection, in order. */
static long long *waiting;
static long long whead, wtail, wcap;

static void wait_push(long long due_ms)
{
    if (wtail - whead == wcap) {
        long long ncap = wcap ? wcap * 2 : 1024;
        long long *nw = malloc((size_t)ncap * sizeof(*nw));
        if (!nw) exit(1);
        for (long long i = whead; i < wtail; i++) nw[i - whead] = waiting[i % wcap];
        free(waiting);
        waiting = nw;
        wtail -= whead;
        whead = 0;
        wcap = ncap;
    }
    waiting[wtail++ % wcap] = due_ms;
}

static void send_one(conn *c, long long due_ms)
{
    static const char body[] = "{\"order\":\"A-1042\",\"action\":\"remind\",\"note\":\""
                               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}";
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "POST %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: tickd/1\r\nAccept: */*\r\n"
                     "Content-Type: application/json\r\n"
                     "tickd-task-id: 202611261200.3.%lld.volley%016lld\r\ntickd-attempt: 1\r\n"
                     "tickd-scheduled-at: %lld\r\n"
                     "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, host, port, due_ms, seq++, due_ms, sizeof(body) - 1, body);
    if (write(c->fd, req, (size_t)n) != n) {
        perror("volley: write");
        exit(1);
    }
    c->busy = 1;
    sent++;
}

/* Length of the first complete response in b[0..n), or 0. */
static size_t complete(const char *b, size_t n)
{
    const char *e = memmem(b, n, "\r\n\r\n", 4);
    if (!e) return 0;
    size_t head = (size_t)(e - b) + 4, cl = 0;
    const char *h = strcasestr(b, "\r\ncontent-length:");
    if (h && h < e) cl = strtoul(h + 17, NULL, 10);
    return n >= head + cl ? head + cl : 0;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: volley HOST PORT PATH BATCH EVERY_MS SECS CONNS\n");
        return 2;
    }
    snprintf(host, sizeof(host), "%s", argv[1]);
    port = atoi(argv[2]);
    snprintf(path, sizeof(path), "%s", argv[3]);
    int batch = atoi(argv[4]), every = atoi(argv[5]), secs = atoi(argv[6]);
    nconns = atoi(argv[7]);
    if (batch < 1 || every < 1 || secs < 1 || nconns < 1 || nconns > CONNS_MAX) {
        fprintf(stderr, "volley: bad arguments\n");
        return 2;
    }
    int ep = epoll_create1(0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    for (int i = 0; i < nconns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            perror("volley: connect");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conns[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    long long start_ms = now_us() / 1000 + 200, batches = (long long)secs * 1000 / every;
    long long next_ms = start_ms, done_batches = 0, late_max = 0;
    int free_from = 0;
    while (done_batches < batches || answered < queued) {
        long long now = now_us();
        if (done_batches < batches && now >= next_ms * 1000) {
            if (now - next_ms * 1000 > late_max) late_max = now - next_ms * 1000;
            for (int k = 0; k < batch; k++) wait_push(next_ms);
            queued += batch;
            done_batches++;
            next_ms += every;
        }
        /* idle connections take the waiting requests, oldest first */
        for (int i = 0; i < nconns && whead < wtail; i++) {
            conn *c = &conns[(free_from + i) % nconns];
            if (!c->busy) send_one(c, waiting[whead++ % wcap]);
        }
        free_from = (free_from + 1) % nconns;
        int timeout = -1;
        if (done_batches < batches) {
            long long left = next_ms * 1000 - now_us();
            timeout = left <= 0 ? 0 : (int)(left / 1000);
        }
        struct epoll_event evs[CONNS_MAX];
        int n = epoll_wait(ep, evs, CONNS_MAX, timeout);
        if (n < 0 && errno != EINTR) {
            perror("volley: epoll_wait");
            return 1;
        }
        if (n == 0 && done_batches < batches) {
            /* the last sub-millisecond: spin to the instant */
            while (now_us() < next_ms * 1000) {}
        }
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            ssize_t r = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
            if (r <= 0) {
                fprintf(stderr, "volley: the receiver closed a connection\n");
                return 1;
            }
            c->inlen += (size_t)r;
            size_t len;
            while ((len = complete(c->in, c->inlen)) > 0) {
                memmove(c->in, c->in + len, c->inlen - len);
                c->inlen -= len;
                c->busy = 0;
                answered++;
                if (whead < wtail) send_one(c, waiting[whead++ % wcap]);
            }
        }
    }
    printf("{\"sent\":%lld,\"answered\":%lld,\"late_start_max_us\":%lld}\n", sent, answered,
           late_max);
    return 0;
}
