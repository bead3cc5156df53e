/* noop_http.c -- the HTTP ceiling of the bench machine: a server that does no
 * work at all. It answers every request (keep-alive, Content-Length bodies)
 * with a fixed 201 and a JSON body the size of tickd's answer to a POST, from
 * one thread on epoll, one read and one write per request. wrk against it
 * measures what wrk, the kernel's loopback TCP and one server thread cost on
 * this machine: no server that stores anything can answer faster.
 *
 *   noop_http PORT      (runs until killed) */
#include "fixed_http.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: noop_http PORT\n");
        return 2;
    }
    char resp[512];
    int ep, rl = fixed_response(resp), l = fixed_listen(argv[1], &ep);
    for (;;) {
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == l) {
                fixed_accept(ep, l);
                continue;
            }
            if (fixed_read(fd) <= 0) {
                close(fd);
                continue;
            }
            size_t used, head, cl;
            while ((used = complete(bufs[fd], lens[fd], &head, &cl)) > 0) {
                if (write(fd, resp, (size_t)rl) != rl) break;
                fixed_take(fd, used);
            }
            if (lens[fd] == CONN_BUF) {   /* not HTTP this server can take */
                close(fd);
                lens[fd] = 0;
            }
        }
    }
}
