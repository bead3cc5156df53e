/* fuzz_http_server.c -- the API's HTTP server fed arbitrary bytes, in
 * pieces: the input's first 8 bytes seed the split points, the rest goes
 * down one end of a socketpair whose other end the server serves, the loop
 * running between pieces. The handler answers at once (body length echoed)
 * or, for DELETE, on the next loop pass, so that pipelined requests also
 * wait behind one at the handler. Nothing may crash, leak or hang. The
 * parser alone is fuzzed by fuzz_http_request.c (the same input format);
 * this target fuzzes what the server does around it: pipelining, the gate,
 * 100 Continue, the answers. */
#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "edge/http_server.h"

static struct event_base *base;
static http_req *later;

static void answer(http_req *r)
{
    char out[64];
    size_t len;
    http_body(r, &len);
    int n = snprintf(out, sizeof(out), "%zu\n", len);
    http_reply(r, 200, "OK", "text/plain", out, (size_t)n);
}

static void handler(http_req *r, void *arg)
{
    (void)arg;
    if (strcmp(http_method(r), "DELETE") == 0 && !later) later = r;
    else answer(r);
}

static int gate(http_req *r, void *arg, http_refusal *out)
{
    (void)arg;
    if (strcmp(http_target(r), "/deny") != 0) return 0;
    *out = (http_refusal){401, "Unauthorized", "unauthorized", "Authorization: missing"};
    http_add_header(r, "WWW-Authenticate", "Bearer");
    return 1;
}

static void pump(int fd)
{
    char buf[65536];
    event_base_loop(base, EVLOOP_NONBLOCK);
    if (later) {
        http_req *r = later;
        later = NULL;
        answer(r);
    }
    while (read(fd, buf, sizeof(buf)) > 0) {}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    int sv[2];
    uint64_t seed = 0;
    if (!base) base = event_base_new();
    if (size < 8) return 0;
    memcpy(&seed, data, 8);
    data += 8;
    size -= 8;
    http_server *s = http_server_new(base, NULL, 4096, 60000, handler, NULL, err, sizeof(err));
    if (!s) abort();
    http_server_set_gate(s, gate);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) abort();
    if (http_server_adopt(s, sv[0]) != 0) abort();
    while (size) {
        /* pieces of 1 to 64 bytes, or the rest */
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t n = (seed >> 33) % 8 == 0 ? size : 1 + (seed >> 40) % 64;
        if (n > size) n = size;
        ssize_t w = write(sv[1], data, n);
        if (w <= 0) break;   /* the server closed, or stopped reading */
        data += w;
        size -= (size_t)w;
        pump(sv[1]);
    }
    shutdown(sv[1], SHUT_WR);
    pump(sv[1]);
    pump(sv[1]);
    close(sv[1]);
    if (later) {
        http_req *r = later;
        later = NULL;
        answer(r);
    }
    http_server_free(s);
    return 0;
}
