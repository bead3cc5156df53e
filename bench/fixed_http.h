/* fixed_http.h -- what noop_http.c and store_http.c share: the fixed 201
 * (a JSON body the size of tickd's answer to a POST), the request framing
 * (keep-alive, Content-Length bodies), the loopback listener and the accept
 * loop of a one-thread epoll server. Header-only: each is built alone with
 * `cc -O2 -o X X.c` where it is used. */
#ifndef FIXED_HTTP_H
#define FIXED_HTTP_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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
#define CONN_BUF 65536

static char *bufs[MAXCONN];   /* a connection's bytes not yet taken */
static size_t lens[MAXCONN];

/* The 201 every request is answered with, into resp (512 bytes); its length. */
static int fixed_response(char resp[512])
{
    static const char body[] =
        "{\"id\":\"202611221604.3.1795363440000.AbCdEfGhIjKlMnOpQrStUv\","
        "\"key\":\"AbCdEfGhIjKlMnOpQrStUv\",\"execute_at\":1795363440000,\"status\":\"scheduled\"}\n";
    return snprintf(resp, 512,
                    "HTTP/1.1 201 Created\r\nDate: Sun, 22 Nov 2026 16:00:00 GMT\r\n"
                    "Content-Length: %zu\r\nContent-Type: application/json\r\n\r\n%s",
                    sizeof(body) - 1, body);
}

/* Length of the first complete request in b[0..n), or 0; its body is
 * b[*head .. *head + *cl). */
static size_t complete(const char *b, size_t n, size_t *head, size_t *cl)
{
    const char *e = memmem(b, n, "\r\n\r\n", 4);
    if (!e) return 0;
    *head = (size_t)(e - b) + 4;
    *cl = 0;
    const char *h = memmem(b, *head, "\r\nContent-Length:", 17);
    if (!h) h = memmem(b, *head, "\r\ncontent-length:", 17);
    if (h) *cl = strtoul(h + 17, NULL, 10);
    return n >= *head + *cl ? *head + *cl : 0;
}

/* A nonblocking listener on 127.0.0.1:port, in a new epoll set (*ep); it
 * exits the program when it cannot listen. */
static int fixed_listen(const char *port, int *ep)
{
    int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1024) != 0) {
        perror("listen");
        exit(1);
    }
    *ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
    epoll_ctl(*ep, EPOLL_CTL_ADD, l, &ev);
    return l;
}

/* Every connection waiting on l, into the epoll set (TCP_NODELAY, a buffer). */
static void fixed_accept(int ep, int l)
{
    int c, one = 1;
    while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
        if (c >= MAXCONN) {
            close(c);
            continue;
        }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (!bufs[c]) bufs[c] = malloc(CONN_BUF);
        lens[c] = 0;
        struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
    }
}

/* Read what fd has into its buffer: the bytes read, or <= 0 when it is to
 * be closed. */
static ssize_t fixed_read(int fd)
{
    ssize_t k = read(fd, bufs[fd] + lens[fd], CONN_BUF - lens[fd]);
    if (k > 0) lens[fd] += (size_t)k;
    return k;
}

/* Drop the first used bytes of fd's buffer (a request taken). */
static void fixed_take(int fd, size_t used)
{
    memmove(bufs[fd], bufs[fd] + used, lens[fd] - used);
    lens[fd] -= used;
}

#endif
