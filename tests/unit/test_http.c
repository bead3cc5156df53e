/* test_http.c -- unit tests for the request parser of http.c, driven
 * through a real connection: one end of a socketpair served by the server
 * (http_server_adopt), the request written to the other end whole, byte by
 * byte and in random pieces, the loop run between pieces. Each way must
 * give the same answers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "edge/http_server.h"

#define assert_contains(s, sub)                                                \
    do {                                                                       \
        if (!strstr((s), (sub)))                                               \
            fail_msg("\"%s\" does not contain \"%s\"", (s), (sub));            \
    } while (0)

static struct event_base *base;

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
 * random pieces of 1..step bytes from `seed`. Returns the answers with the
 * Date lines taken out (malloc'd). */
static char *feed(const char *req, size_t len, size_t step, unsigned seed)
{
    char err[256];
    int sv[2];
    size_t cap = 1 << 20, got = 0;
    char *out = malloc(cap);
    http_server *s = http_server_new(base, NULL, 4096, 60000, echo, NULL, err, sizeof(err));
    assert_non_null(s);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(http_server_adopt(s, sv[0]), 0);
    srand(seed);
    size_t off = 0;
    while (off < len) {
        size_t n = step == 0 ? len - off : step == 1 ? 1 : 1 + (size_t)rand() % step;
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

/* The answers to `req`, checked to be the same whole, byte by byte and in
 * random pieces. */
static char *answers(const char *req, size_t len)
{
    char *whole = feed(req, len, 0, 0);
    char *bytes = feed(req, len, 1, 0);
    assert_string_equal(whole, bytes);
    free(bytes);
    for (unsigned seed = 1; seed <= 20; seed++) {
        char *pieces = feed(req, len, seed % 2 ? 7 : 300, seed);
        assert_string_equal(whole, pieces);
        free(pieces);
    }
    return whole;
}

#define ANSWERS(lit) answers(lit, sizeof(lit) - 1)

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

static void expect_status(const char *req, size_t len, const char *status, const char *msg)
{
    char *out = answers(req, len);
    if (strncmp(out, status, strlen(status)) != 0) fail_msg("%s -> %s", req, out);
    if (msg) assert_contains(out, msg);
    free(out);
}

#define STATUS(lit, status, msg) expect_status(lit, sizeof(lit) - 1, status, msg)

/* ---- tests ------------------------------------------------------------- */

static void test_simple_and_pipelined(void **state)
{
    (void)state;
    char *out = ANSWERS("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                        "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                        "\r\nGET /c?q=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(count(out, "HTTP/1.1 200 OK"), 3);
    assert_contains(out, "GET /a 0:");
    assert_contains(out, "POST /b 5:hello");
    assert_contains(out, "GET /c?q=1 0:");
    free(out);
}

static void test_chunked_decoded(void **state)
{
    (void)state;
    char *out = ANSWERS("POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "5;a=b;c=\"d e\"\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n"
                        "0\r\nTrailer-One: 1\r\nTrailer-Two: two\r\n\r\n"
                        "POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n"
                        "3\r\nabc\r\n0\r\n\r\n");
    assert_contains(out, "POST /t 16:hello 0123456789");
    assert_contains(out, "POST /u 3:abc");
    free(out);
}

static void test_chunk_extension_with_nul(void **state)
{
    (void)state;
    /* the crash this parser replaces: a NUL in an extension */
    static const char req[] = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5;a\0b\r\nhello\r\n0\r\n\r\n";
    expect_status(req, sizeof(req) - 1, "HTTP/1.1 400", "chunk extension");
}

static void test_bad_chunk_sizes(void **state)
{
    (void)state;
#define CH "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    STATUS(CH "0x5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", "chunk size");
    STATUS(CH "+5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", "chunk size");
    STATUS(CH "-5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", "chunk size");
    STATUS(CH " 5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", "chunk size");
    STATUS(CH "5 \r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", "chunk size");
    STATUS(CH "\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", "chunk size");
    STATUS(CH "10000000000000005\r\nhello\r\n", "HTTP/1.1 413", NULL);
    STATUS(CH "00000000000000000005\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", "16 digits");
    STATUS(CH "1001\r\n", "HTTP/1.1 413", NULL);   /* over max_body (4096) */
    STATUS(CH "5\r\nhelloX\r\n0\r\n\r\n", "HTTP/1.1 400", "after the chunk data");
    STATUS(CH "5\nhello\r\n0\r\n\r\n", "HTTP/1.1 400", NULL);
    STATUS(CH "0\r\nBad Trailer\r\n\r\n", "HTTP/1.1 400", "trailer");
    STATUS(CH "0\r\nT: a\x01\r\n\r\n", "HTTP/1.1 400", "trailer");
}

static void test_framing(void **state)
{
    (void)state;
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
           "HTTP/1.1 400", "Transfer-Encoding: not allowed with Content-Length");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
           "HTTP/1.1 400", "different values");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd", "HTTP/1.1 400",
           "different values");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", "HTTP/1.1 400", "1*DIGIT");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc", "HTTP/1.1 400", "1*DIGIT");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3 3\r\n\r\nabc", "HTTP/1.1 400", "1*DIGIT");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", "HTTP/1.1 400", "empty");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
           "HTTP/1.1 413", NULL);
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 400",
           "chunked must be the last");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
           "HTTP/1.1 400", "chunked must be the last");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
           "HTTP/1.1 400", "chunked must be the last");
    STATUS("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
           "HTTP/1.1 501", NULL);
    STATUS("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 400",
           "HTTP/1.0");
    /* identical values repeated are one length */
    char *out = ANSWERS("POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc");
    assert_contains(out, "POST /r 3:abc");
    free(out);
}

static void test_field_syntax(void **state)
{
    (void)state;
    static const char nul[] = "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n";
    expect_status(nul, sizeof(nul) - 1, "HTTP/1.1 400", "X-A: control character");
    STATUS("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", "HTTP/1.1 400", "control character");
    STATUS("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7f\r\n\r\n", "HTTP/1.1 400", "control character");
    STATUS("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", "HTTP/1.1 400", "bare CR");
    STATUS("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\nb\r\n\r\n", "HTTP/1.1 400", "bare LF");
    STATUS("GET / HTTP/1.1\nHost: x\n\n", "HTTP/1.1 400", "bare LF");
    STATUS("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", "HTTP/1.1 400", NULL);
    STATUS("GET / HTTP/1.1\r\nHost : x\r\n\r\n", "HTTP/1.1 400", NULL);
    STATUS("GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400", "Host: missing");
    STATUS("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "HTTP/1.1 400", "more than once");
    STATUS("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", "HTTP/1.1 400", "more than once");
    STATUS("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "HTTP/1.1 400", "Host");
    STATUS("GET * HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 400", "target");
    STATUS("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 400", "target");
    /* a tab and obs-text are fine */
    char *out = ANSWERS("GET /ok HTTP/1.1\r\nHost: x\r\nX-A: a\tb\xe9\r\n\r\n");
    assert_contains(out, "HTTP/1.1 200");
    free(out);
    /* HTTP/1.0 needs no Host */
    out = ANSWERS("GET /ok HTTP/1.0\r\n\r\n");
    assert_contains(out, "HTTP/1.1 200");
    free(out);
}

static void test_targets_head_connection(void **state)
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

static void test_leading_empty_lines_and_limits(void **state)
{
    (void)state;
    char *out = ANSWERS("\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_contains(out, "GET /a 0:");
    free(out);
    size_t n = 20000;
    char *big = malloc(n + 64);
    int k = snprintf(big, 64, "GET / HTTP/1.1\r\nX: ");
    memset(big + k, 'a', n);
    char *a = answers(big, (size_t)k + n);
    assert_contains(a, "HTTP/1.1 431");
    free(a);
    /* extensions over 1 KiB */
    k = snprintf(big, 200, CH "1;");
    memset(big + k, 'e', 2000);
    a = answers(big, (size_t)k + 2000);
    assert_contains(a, "chunk extension over 1 KiB");
    free(a);
    free(big);
}

static void test_random_bytes_never_crash(void **state)
{
    (void)state;
    /* valid requests with a byte changed here and there: an answer or a
     * close, never a crash (ASan build) */
    static const char base_req[] = CH "5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
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
        cmocka_unit_test(test_chunked_decoded),
        cmocka_unit_test(test_chunk_extension_with_nul),
        cmocka_unit_test(test_bad_chunk_sizes),
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_field_syntax),
        cmocka_unit_test(test_targets_head_connection),
        cmocka_unit_test(test_leading_empty_lines_and_limits),
        cmocka_unit_test(test_random_bytes_never_crash),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    event_base_free(base);
    return rc;
}
