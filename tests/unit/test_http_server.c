/* test_http_server.c -- unit tests for what the HTTP server does around
 * its parser (edge/http_request.c, tested in test_http_request.c): the
 * answers on a connection, pipelined in order, HEAD, Connection, the
 * answers to refusals, the gate, 100 Continue and the time limits. Driven
 * through a real connection: one end of a socketpair served by the server
 * (http_server_adopt), requests written to the other end whole, byte by
 * byte and in random pieces, the loop run between pieces. */
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "edge/http_server.h"
#include "testutil.h"
#include "split.h"

static struct event_base *base;

static int gate(http_req *r, void *arg, http_refusal *out);

/* Answers "<method> <target> <body length>:<body>". */
static void echo(http_req *r, void *arg)
{
    char out[8192];
    size_t len;
    const char *body = http_body(r, &len);
    (void)arg;
    int n = snprintf(out, sizeof(out), "%s %s %zu:%.*s", http_method(r), http_target(r), len,
                     (int)(len > 4000 ? 4000 : len), body);
    http_reply(r, 200, "OK", "text/plain", out, (size_t)n);
}

static void drain(int fd, char *out, size_t cap, size_t *len)
{
    ssize_t n;
    while (*len + 1 < cap && (n = read(fd, out + *len, cap - 1 - *len)) > 0) *len += (size_t)n;
    out[*len] = '\0';
}

/* Feed `req` in pieces: step 0 = whole, 1 = byte by byte, otherwise
 * random pieces of 1..step bytes from `seed`; the first piece `cut` bytes
 * unless cut is 0. Returns the answers with the Date lines taken out
 * (malloc'd). */
static char *feed_cut(const char *req, size_t len, size_t step, unsigned seed, size_t cut)
{
    char err[256];
    int sv[2];
    size_t cap = 1 << 20, got = 0;
    char *out = malloc(cap);
    http_server *s = http_server_new(base, NULL, 4096, 60000, echo, NULL, err, sizeof(err));
    assert_non_null(s);
    http_server_set_gate(s, gate);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(http_server_adopt(s, sv[0]), 0);
    srand(seed);
    size_t off = 0;
    while (off < len) {
        size_t n = cut && off == 0 ? cut
                   : step == 0 ? len - off
                   : step == 1 ? 1
                               : 1 + (size_t)rand() % step;
        if (n > len - off) n = len - off;
        ssize_t w = write(sv[1], req + off, n);
        if (w <= 0) break;
        off += (size_t)w;
        event_base_loop(base, EVLOOP_NONBLOCK);
        drain(sv[1], out, cap, &got);
    }
    event_base_loop(base, EVLOOP_NONBLOCK);
    drain(sv[1], out, cap, &got);
    close(sv[1]);
    event_base_loop(base, EVLOOP_NONBLOCK);
    http_server_free(s);
    /* drop the Date lines */
    char *d;
    while ((d = strstr(out, "Date: "))) {
        char *e = strstr(d, "\r\n");
        memmove(d, e + 2, strlen(e + 2) + 1);
    }
    return out;
}

static char *feed(const char *req, size_t len, size_t step, unsigned seed)
{
    return feed_cut(req, len, step, seed, 0);
}

/* The answers to `req`, checked to be the same whole, byte by byte and in
 * random pieces (20 seeds). */
static char *answers(const char *req, size_t len)
{
    return split_same(feed, req, len, 20);
}

#define ANSWERS(lit) answers(lit, sizeof(lit) - 1)

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

/* ---- tests ------------------------------------------------------------- */

static void test_simple_and_pipelined(void **state)
{
    (void)state;
    char *out = ANSWERS("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                        "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                        "\r\nGET /c?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                        "POST /d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "3\r\nabc\r\n0\r\n\r\n"
                        "GET /e HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(count(out, "HTTP/1.1 200 OK"), 5);
    /* in order */
    const char *a = strstr(out, "GET /a 0:"), *b = strstr(out, "POST /b 5:hello"),
               *c = strstr(out, "GET /c?q=1 0:"), *d = strstr(out, "POST /d 3:abc"),
               *e = strstr(out, "GET /e 0:");
    assert_true(a && b && c && d && e && a < b && b < c && c < d && d < e);
    free(out);
}

static void test_head_and_connection(void **state)
{
    (void)state;
    char *out = ANSWERS("GET http://example.com:80/v1/x?y=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"
                        "GET HTTPS://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"
                        "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /last HTTP/1.1\r\nHost: x\r\nConnection: Keep-Alive , CLOSE\r\n\r\n"
                        "GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_contains(out, "GET /v1/x?y=1 0:");
    assert_contains(out, "GET / 0:");
    /* HEAD: the GET's head (its Content-Length) without the body */
    assert_contains(out, "Content-Length: 9\r\nContent-Type: text/plain\r\n\r\nHTTP/1.1 200");
    assert_contains(out, "Connection: close\r\n\r\nGET /last 0:");
    assert_null(strstr(out, "/never"));
    free(out);
    out = ANSWERS("GET /a HTTP/1.0\r\nConnection: foo, keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n");
    assert_contains(out, "Connection: keep-alive");
    assert_contains(out, "GET /b 0:");
    free(out);
}

static void test_refusal_answer(void **state)
{
    (void)state;
    /* a refusal is answered as JSON and ends the connection: nothing after
     * it is read as a request */
    char *out = ANSWERS("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /b HTTP/1.1\r\nHost: x\r\nX-\"q\": 1\r\n\r\n"
                        "GET /c HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_contains(out, "GET /a 0:");
    assert_contains(out, "HTTP/1.1 400 Bad Request\r\nContent-Length: 81\r\n"
                         "Content-Type: application/json\r\nConnection: close\r\n\r\n"
                         "{\"error\":{\"code\":\"bad_request\",\"message\":"
                         "\"request: malformed HTTP/1.1 request\"}}\n");
    assert_null(strstr(out, "/c"));
    free(out);
    /* a field's name in the message is escaped into the JSON */
    static const char ctl[] = "GET / HTTP/1.1\r\nHost: x\r\nX-A: \x01\r\n\r\n";
    out = answers(ctl, sizeof(ctl) - 1);
    assert_contains(out, "\"message\":\"X-A: control character in the value\"");
    free(out);
    /* refused after a HEAD's head: no content; after a HEAD answered: content */
    out = ANSWERS("HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n");
    assert_contains(out, "HTTP/1.1 400 Bad Request\r\n");
    assert_true(strlen(out) > 4 && strcmp(out + strlen(out) - 4, "\r\n\r\n") == 0);
    free(out);
    out = ANSWERS("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\nHost: x\n\n");
    assert_contains(out, "HTTP/1.1 400 Bad Request\r\n");
    assert_true(strlen(out) > 2 && strcmp(out + strlen(out) - 2, "}\n") == 0);
    free(out);
}

/* Refuses /deny (with a header of its own); lets the rest through. */
static int gate(http_req *r, void *arg, http_refusal *out)
{
    (void)arg;
    if (strcmp(http_target(r), "/deny") != 0) return 0;
    assert_int_equal(http_body_coming(r), strcmp(http_method(r), "POST") == 0);
    *out = (http_refusal){401, "Unauthorized", "unauthorized", "Authorization: missing"};
    http_add_header(r, "WWW-Authenticate", "Bearer");
    return 1;
}

static void test_gate(void **state)
{
    (void)state;
    char *out = ANSWERS("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
                        "POST /deny HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                        "GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_contains(out, "GET /ok 0:");
    assert_contains(out, "HTTP/1.1 401 Unauthorized\r\n");
    assert_contains(out, "Connection: close\r\nWWW-Authenticate: Bearer\r\n\r\n"
                         "{\"error\":{\"code\":\"unauthorized\",\"message\":\"Authorization: missing\"}}\n");
    assert_null(strstr(out, "/after"));
    free(out);
}

static void test_expect_continue(void **state)
{
    (void)state;
    /* the head alone: 100 Continue, then the answer once the body came */
    static const char head[] = "POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                               "Content-Length: 5\r\n\r\n";
    char req[sizeof(head) + 5];
    memcpy(req, head, sizeof(head) - 1);
    memcpy(req + sizeof(head) - 1, "hello", 5);
    char *out = feed_cut(req, sizeof(req), 0, 0, sizeof(head) - 1);
    assert_true(strncmp(out, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", 41) == 0);
    assert_contains(out, "POST /e 5:hello");
    free(out);
    /* the body came with the head: no 100 Continue */
    out = feed(req, sizeof(req), 0, 0);
    assert_null(strstr(out, "100 Continue"));
    assert_contains(out, "POST /e 5:hello");
    free(out);
    /* HTTP/1.0 gets none */
    static const char old[] = "POST /e HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    out = feed(old, sizeof(old) - 1, 0, 0);
    assert_null(strstr(out, "100 Continue"));
    free(out);
}

static void wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    *(short *)arg = what;
    event_base_loopbreak(base);
}

/* Run the loop until fd can be read (the server answered), for at most 5 s. */
static void wait_readable(int fd)
{
    short what = 0;
    struct timeval deadline = {5, 0};
    struct event *ev = event_new(base, fd, EV_READ, wake, &what);
    event_add(ev, &deadline);
    event_base_dispatch(base);
    event_free(ev);
    if (!(what & EV_READ)) fail_msg("no answer within 5 s");
}

/* What the server answers to `req` written at once and left incomplete,
 * with header_ms and body_ms of 200 ms. */
static char *answer_unfinished(const char *req)
{
    char err[256], out[4096];
    size_t got = 0;
    int sv[2];
    http_server *s = http_server_new(base, NULL, 4096, 60000, echo, NULL, err, sizeof(err));
    assert_non_null(s);
    http_server_set_limits(s, 10, 200, 200);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(http_server_adopt(s, sv[0]), 0);
    assert_int_equal(write(sv[1], req, strlen(req)), (ssize_t)strlen(req));
    wait_readable(sv[1]);
    drain(sv[1], out, sizeof(out), &got);
    close(sv[1]);
    http_server_free(s);
    return strdup(out);
}

static void test_time_limits(void **state)
{
    (void)state;
    char *out = answer_unfinished("GET / HTTP/1.1\r\nHost:");
    assert_contains(out, "HTTP/1.1 408 Request Timeout\r\n");
    assert_contains(out, "headers: not received within server.header_timeout_ms");
    free(out);
    out = answer_unfinished("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhe");
    assert_contains(out, "HTTP/1.1 408 Request Timeout\r\n");
    assert_contains(out, "body: not received within server.body_timeout_ms");
    free(out);
    /* a chunked HEAD's body late: the 408 has no content */
    out = answer_unfinished("HEAD / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n");
    assert_contains(out, "HTTP/1.1 408 Request Timeout\r\n");
    assert_null(strstr(out, "body: not received"));
    free(out);
}

static void test_random_bytes_never_crash(void **state)
{
    (void)state;
    /* valid requests with a byte changed here and there: an answer or a
     * close, never a crash (ASan build) */
    static const char base_req[] = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[sizeof(base_req)];
    srand(7);
    for (int i = 0; i < 2000; i++) {
        memcpy(buf, base_req, sizeof(buf));
        for (int j = 0; j < 3; j++) buf[rand() % (sizeof(buf) - 1)] = (char)(rand() % 256);
        free(feed(buf, sizeof(buf) - 1, 1 + (size_t)(i % 9), (unsigned)i));
    }
}

int main(void)
{
    base = event_base_new();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_and_pipelined),
        cmocka_unit_test(test_head_and_connection),
        cmocka_unit_test(test_refusal_answer),
        cmocka_unit_test(test_gate),
        cmocka_unit_test(test_expect_continue),
        cmocka_unit_test(test_time_limits),
        cmocka_unit_test(test_random_bytes_never_crash),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    event_base_free(base);
    return rc;
}
