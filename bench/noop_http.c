/* noop_http.c -- the HTTP ceiling of the bench machine: a server that does no
 * work at all. It answers every request (keep-alive, Content-Length bodies)
 * with a fixed 201 and a JSON body the size of tickd's answer to a POST, from
 * one thread on epoll, one read and one write per request. wrk against it
 * measures what wrk, the kernel's loopback TCP and one server thread cost on
 * this machine: no server that stores anything can answer faster.
 *
 *   noop_http PORT      (runs until killed) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXCONN 4096

static char *bufs[MAXCONN];
static size_t lens[MAXCONN];

static const char body[] =
    "{\"id\":\"202611221604.3.1795363440000.AbCdEfGhIjKlMnOpQrStUv\","
    "\"key\":\"AbCdEfGhIjKlMnOpQrStUv\",\"execute_at\":1795363440000,\"status\":\"scheduled\"}\n";

/* Length of the first complete request in b[0..n), or 0. */
static size_t complete(const char *b, size_t n)
{
    const char *e = memmem(b, n, "\r\n\r\n", 4);
    if (!e) return 0;
    size_t head = (size_t)(e - b) + 4, cl = 0;
    const char *h = memmem(b, head, "\r\nContent-Length:", 17);
    if (!h) h = memmem(b, head, "\r\ncontent-length:", 17);
    if (h) cl = strtoul(h + 17, NULL, 10);
    return n >= head + cl ? head + cl : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: noop_http PORT\n");
        return 2;
    }
    char resp[512];
    int rl = snprintf(resp, sizeof(resp),
                      "HTTP/1.1 201 Created\r\nDate: Sun, 22 Nov 2026 16:00:00 GMT\r\n"
                      "Content-Length: %zu\r\nContent-Type: application/json\r\n\r\n%s",
                      sizeof(body) - 1, body);
    int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1024) != 0) {
        perror("noop_http: listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    for (;;) {
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == l) {
                int c;
                while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAXCONN) {
                        close(c);
                        continue;
                    }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                    if (!bufs[c]) bufs[c] = malloc(65536);
                    lens[c] = 0;
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            ssize_t k = read(fd, bufs[fd] + lens[fd], 65536 - lens[fd]);
            if (k <= 0) {
                close(fd);
                continue;
            }
            lens[fd] += (size_t)k;
            size_t used;
            while ((used = complete(bufs[fd], lens[fd])) > 0) {
                if (write(fd, resp, (size_t)rl) != rl) break;
                memmove(bufs[fd], bufs[fd] + used, lens[fd] - used);
                lens[fd] -= used;
            }
            if (lens[fd] == 65536) {   /* not HTTP this server can take */
                close(fd);
                lens[fd] = 0;
            }
        }
    }
}
