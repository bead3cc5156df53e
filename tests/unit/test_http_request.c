/* test_http_request.c -- unit tests for the request parser
 * (edge/http_request.c), without sockets: each request is fed whole, byte
 * by byte and in random pieces (seeded, many seeds), the parser called
 * after each piece as http_server.c calls it (again after the head, the
 * next request from the bytes after a complete one). Every way must give
 * the identical result: the heads, the bodies and the refusal. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edge/http_request.h"
#include "testutil.h"
#include "split.h"

#define MAX_BODY 4096

/* Append to the result text (the output buffer is large: requests here are
 * at most a few KiB, and a body is shown up to 4000 bytes). */
static void say(char *out, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(out);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

/* What the parser makes of req[0..len), fed in pieces: step 0 = whole,
 * 1 = byte by byte, otherwise random pieces of 1..step bytes from `seed`.
 * One line per head ("HEAD <method> <target> <version> keep=<0|1>
 * head=<0|1> expect=<0|1> chunked=<0|1>", then "  <name>: <value>" per
 * field), one per body ("BODY <len>:<bytes>"), "REFUSED <status> <reason>
 * <code>: <msg>", and "MORE <bytes left>" when the input ends within a
 * request. Malloc'd. */
static char *parse_split(const char *req, size_t len, size_t step, unsigned seed)
{
    size_t cap = 1 << 16;
    char *out = calloc(1, cap);
    char *buf = malloc(len + 1);
    size_t have = 0, off = 0;
    http_request p;
    http_request_init(&p, MAX_BODY);
    srand(seed);
    for (;;) {
        int k = http_request_parse(&p, buf, &have);
        if (k == HTTP_REQ_HEAD) {
            say(out, cap, "HEAD %s %s HTTP/1.%d keep=%d head=%d expect=%d chunked=%d\n",
                buf + p.method, http_request_target(&p, buf), !p.http10, p.keep_alive,
                p.head, p.expect, p.chunked);
            for (int i = 0; i < p.nfields; i++)
                say(out, cap, "  %s: %s\n", buf + p.field[i][0], buf + p.field[i][1]);
            continue;
        }
        if (k == HTTP_REQ_DONE) {
            assert_true(p.len <= have);
            assert_true(p.body + p.body_len <= p.len);
            say(out, cap, "BODY %zu:%.*s\n", p.body_len,
                (int)(p.body_len > 4000 ? 4000 : p.body_len), buf + p.body);
            memmove(buf, buf + p.len, have - p.len);
            have -= p.len;
            http_request_reset(&p);
            continue;
        }
        if (k == HTTP_REQ_ERROR) {
            say(out, cap, "REFUSED %d %s %s: %s\n", p.refusal.status, p.refusal.reason,
                p.refusal.code, p.refusal.msg);
            /* refused for good, whatever comes */
            assert_int_equal(http_request_parse(&p, buf, &have), HTTP_REQ_ERROR);
            break;
        }
        assert_int_equal(k, HTTP_REQ_MORE);
        if (off == len) {
            say(out, cap, "MORE %zu\n", have);
            break;
        }
        size_t n = step == 0 ? len - off : step == 1 ? 1 : 1 + (size_t)rand() % step;
        if (n > len - off) n = len - off;
        memcpy(buf + have, req + off, n);
        have += n;
        off += n;
    }
    free(buf);
    return out;
}

/* The result for req, checked to be the same whole, byte by byte and in
 * random pieces of up to 7 and up to 300 bytes (40 seeds). Malloc'd. */
static char *parse(const char *req, size_t len)
{
    return split_same(parse_split, req, len, 40);
}

#define PARSE(lit) parse(lit, sizeof(lit) - 1)

/* req is refused with `status`, the message containing msg (unless NULL). */
static void expect_refused(const char *req, size_t len, int status, const char *msg)
{
    char *out = parse(req, len);
    char want[32];
    snprintf(want, sizeof(want), "REFUSED %d ", status);
    if (!strstr(out, want)) fail_msg("%s -> %s", req, out);
    if (msg) assert_contains(out, msg);
    free(out);
}

#define REFUSED(lit, status, msg) expect_refused(lit, sizeof(lit) - 1, status, msg)

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

#define CH "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"

/* ---- tests ------------------------------------------------------------- */

static void test_simple_and_pipelined(void **state)
{
    (void)state;
    char *out = PARSE("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                      "\r\nGET /c?q=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_string_equal(out,
                        "HEAD GET /a HTTP/1.1 keep=1 head=0 expect=0 chunked=0\n"
                        "  Host: x\n"
                        "BODY 0:\n"
                        "HEAD POST /b HTTP/1.1 keep=1 head=0 expect=0 chunked=0\n"
                        "  Host: x\n"
                        "  Content-Length: 5\n"
                        "BODY 5:hello\n"
                        "HEAD GET /c?q=1 HTTP/1.1 keep=1 head=0 expect=0 chunked=0\n"
                        "  Host: x\n"
                        "BODY 0:\n"
                        "MORE 0\n");
    free(out);
    /* a request cut short: more must come, nothing is refused */
    out = PARSE("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel");
    assert_contains(out, "MORE ");
    assert_null(strstr(out, "BODY"));
    free(out);
    out = PARSE("GET /a HTTP/1.1\r\nHost: x\r\n\r");
    assert_string_equal(out, "MORE 27\n");
    free(out);
}

static void test_chunked_decoded(void **state)
{
    (void)state;
    char *out = PARSE("POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "5;a=b;c=\"d e\"\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n"
                      "0\r\nTrailer-One: 1\r\nTrailer-Two: two\r\n\r\n"
                      "POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n"
                      "3\r\nabc\r\n0\r\n\r\n");
    assert_contains(out, "HEAD POST /t HTTP/1.1 keep=1 head=0 expect=0 chunked=1\n");
    assert_contains(out, "BODY 16:hello 0123456789\n");
    assert_contains(out, "HEAD POST /u HTTP/1.1 keep=1 head=0 expect=0 chunked=1\n");
    assert_contains(out, "BODY 3:abc\nMORE 0\n");
    /* trailer fields are dropped, not handed out */
    assert_null(strstr(out, "Trailer-One"));
    free(out);
    /* the decoded body is NUL-terminated where it lies */
    static const char req[] = CH "3\r\nabc\r\n0\r\n\r\n";
    char buf[sizeof(req)];
    size_t have = sizeof(req) - 1;
    memcpy(buf, req, have);
    http_request p;
    http_request_init(&p, MAX_BODY);
    assert_int_equal(http_request_parse(&p, buf, &have), HTTP_REQ_HEAD);
    assert_int_equal(http_request_parse(&p, buf, &have), HTTP_REQ_DONE);
    assert_string_equal(buf + p.body, "abc");
    assert_int_equal(p.len, sizeof(req) - 1);
}

static void test_chunk_extension_with_nul(void **state)
{
    (void)state;
    /* the crash this parser replaced: a NUL in an extension */
    static const char req[] = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5;a\0b\r\nhello\r\n0\r\n\r\n";
    expect_refused(req, sizeof(req) - 1, 400,
                   "bad_request: body: malformed chunked encoding (control character in a chunk extension)");
}

static void test_bad_chunk_sizes(void **state)
{
    (void)state;
    REFUSED(CH "0x5\r\nhello\r\n0\r\n\r\n", 400, "(chunk size not hex)");
    REFUSED(CH "+5\r\nhello\r\n0\r\n\r\n", 400, "chunk size");
    REFUSED(CH "-5\r\nhello\r\n0\r\n\r\n", 400, "chunk size");
    REFUSED(CH " 5\r\nhello\r\n0\r\n\r\n", 400, "chunk size");
    REFUSED(CH "5 \r\nhello\r\n0\r\n\r\n", 400, "chunk size");
    REFUSED(CH "\r\nhello\r\n0\r\n\r\n", 400, "chunk size");
    REFUSED(CH "10000000000000005\r\nhello\r\n", 413,
            "413 Payload Too Large payload_too_large: body: larger than server.max_body");
    REFUSED(CH "00000000000000000005\r\nhello\r\n0\r\n\r\n", 400, "(chunk size over 16 digits)");
    REFUSED(CH "1001\r\n", 413, NULL);   /* over MAX_BODY (4096) */
    /* chunks each under the bound, over it together */
    char *cut = PARSE(CH "800\r\nab");   /* cut short: more must come */
    assert_contains(cut, "MORE ");
    free(cut);
    {
        size_t n = 2 * 0x800 + 200;
        char *big = malloc(n + 200);
        int k = snprintf(big, 200, CH "800\r\n");
        memset(big + k, 'a', 0x800);
        k += 0x800;
        k += snprintf(big + k, 200, "\r\n801\r\n");
        char *out = parse(big, (size_t)k);
        assert_contains(out, "REFUSED 413 ");
        free(out);
        free(big);
    }
    REFUSED(CH "5\r\nhelloX\r\n0\r\n\r\n", 400, "(no CRLF after the chunk data)");
    REFUSED(CH "5\r\nhello\rX0\r\n\r\n", 400, "(no CRLF after the chunk data)");
    REFUSED(CH "5\nhello\r\n0\r\n\r\n", 400, NULL);
    REFUSED(CH "5\rhello\r\n0\r\n\r\n", 400, "(no LF after CR)");
    REFUSED(CH "0\r\nBad Trailer\r\n\r\n", 400, "(bad trailer field)");
    REFUSED(CH "0\r\nT: a\x01\r\n\r\n", 400, "(bad trailer field)");
    REFUSED(CH "0\r\n:v\r\n\r\n", 400, "(bad trailer field)");
    REFUSED(CH "0\r\nT: v\rX\r\n", 400, "(no LF after CR)");
    REFUSED(CH "0\r\n\rX", 400, "(no LF after CR)");
}

static void test_trailer_bound(void **state)
{
    (void)state;
    /* the trailer section: up to 4 KiB, its final CRLF counted */
    char *big = malloc(8192);
    int k = snprintf(big, 200, CH "0\r\nT: ");
    int v = 4096 - 3 - 4;   /* "T: " + value + CRLF + CRLF = 4096 */
    memset(big + k, 'v', (size_t)v);
    k += v;
    k += snprintf(big + k, 200, "\r\n\r\n");
    char *out = parse(big, (size_t)k);
    assert_contains(out, "BODY 0:\n");
    free(out);
    k = snprintf(big, 200, CH "0\r\nT: ");
    memset(big + k, 'v', (size_t)v + 1);
    k += v + 1;
    k += snprintf(big + k, 200, "\r\n\r\n");
    out = parse(big, (size_t)k);
    assert_contains(out, "(trailer section over 4 KiB)");
    free(out);
    free(big);
}

static void test_framing(void **state)
{
    (void)state;
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            400, "Transfer-Encoding: not allowed with Content-Length");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            400, "different values");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd", 400, "different values");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", 400, "1*DIGIT");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc", 400, "1*DIGIT");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3 3\r\n\r\nabc", 400, "1*DIGIT");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400, "Content-Length: empty");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ,\r\n\r\n", 400, "Content-Length: empty");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413,
            "larger than server.max_body");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4097\r\n\r\n", 413, NULL);
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400,
            "chunked must be the last");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400,
            "chunked must be the last");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            400, "chunked must be the last");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            501, "501 Not Implemented not_implemented: Transfer-Encoding: only chunked is supported");
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \r\n\r\n", 400, "chunked must be the last");
    REFUSED("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
            "Transfer-Encoding: not allowed in HTTP/1.0");
    /* identical values repeated are one length */
    char *out = PARSE("POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc");
    assert_contains(out, "BODY 3:abc\nMORE 0\n");
    free(out);
    /* exactly max_body is taken */
    char *big = malloc(MAX_BODY + 200);
    int k = snprintf(big, 200, "POST /m HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", MAX_BODY);
    memset(big + k, 'b', MAX_BODY);
    out = parse(big, (size_t)k + MAX_BODY);
    assert_contains(out, "BODY 4096:bbbb");
    assert_contains(out, "MORE 0\n");
    free(out);
    free(big);
}

static void test_field_syntax(void **state)
{
    (void)state;
    static const char nul[] = "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n";
    expect_refused(nul, sizeof(nul) - 1, 400, "X-A: control character in the value");
    REFUSED("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01" "b\r\n\r\n", 400, "control character");
    REFUSED("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7f\r\n\r\n", 400, "control character");
    REFUSED("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 400, "bare CR");
    REFUSED("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\nb\r\n\r\n", 400, "bare LF");
    REFUSED("GET / HTTP/1.1\nHost: x\n\n", 400, "bare LF");
    REFUSED("\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bare LF");
    REFUSED("\rGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bare CR");
    REFUSED("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET / HTTP/1.1\r\n: x\r\nHost: x\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET / HTTP/1.1\r\nHost\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET / HTTP/1.1\r\n\r\n", 400, "Host: missing");
    REFUSED("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than once");
    REFUSED("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400, "more than once");
    REFUSED("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "Host: not host[:port]");
    REFUSED("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400, "Host: not host[:port]");
    /* the field's name in the message is cut at 64 bytes */
    static const char name[] = "X-0123456789012345678901234567890123456789012345678901234567890123456789";
    char *out = PARSE("GET / HTTP/1.1\r\nHost: x\r\n"
                      "X-0123456789012345678901234567890123456789012345678901234567890123456789: \x01\r\n\r\n");
    char want[128];
    snprintf(want, sizeof(want), "bad_request: %.64s: control character in the value\n", name);
    assert_contains(out, want);
    free(out);
    /* a tab and obs-text are fine; OWS around the value is not part of it */
    out = PARSE("GET /ok HTTP/1.1\r\nHost: x\r\nX-A: \t a\tb\xe9 \t\r\nX-E:\r\n\r\n");
    assert_contains(out, "  X-A: a\tb\xe9\n  X-E: \nBODY 0:\n");
    free(out);
    /* HTTP/1.0 needs no Host */
    out = PARSE("GET /ok HTTP/1.0\r\n\r\n");
    assert_string_equal(out, "HEAD GET /ok HTTP/1.0 keep=0 head=0 expect=0 chunked=0\nBODY 0:\nMORE 0\n");
    free(out);
}

static void test_request_line(void **state)
{
    (void)state;
    REFUSED("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target is neither /path nor http://host/path");
    REFUSED("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target");
    REFUSED("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target");
    REFUSED("GET http://a?x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target");
    REFUSED("GET http:// HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target");
    REFUSED("GET / HTTP/1.2\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET /\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED(" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    REFUSED("GET /a\xe9 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed HTTP/1.1 request");
    /* any token is a method; the server routes it */
    char *out = PARSE("PURGE /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_contains(out, "HEAD PURGE /x HTTP/1.1");
    free(out);
}

static void test_targets_head_connection(void **state)
{
    (void)state;
    char *out = PARSE("GET http://example.com:80/v1/x?y=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"
                      "GET HTTPS://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"
                      "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /last HTTP/1.1\r\nHost: x\r\nConnection: Keep-Alive , CLOSE\r\n\r\n"
                      "GET /a HTTP/1.0\r\nConnection: foo, keep-alive\r\n\r\n"
                      "GET /b HTTP/1.0\r\n\r\n"
                      "GET /c HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n");
    assert_contains(out, "HEAD GET /v1/x?y=1 HTTP/1.1 keep=1 head=0");
    assert_contains(out, "HEAD GET / HTTP/1.1 keep=1 head=0");
    assert_contains(out, "HEAD HEAD /h HTTP/1.1 keep=1 head=1");
    assert_contains(out, "HEAD GET /last HTTP/1.1 keep=0 head=0");
    assert_contains(out, "HEAD GET /a HTTP/1.0 keep=1 head=0");
    assert_contains(out, "HEAD GET /b HTTP/1.0 keep=0 head=0");
    assert_contains(out, "HEAD GET /c HTTP/1.1 keep=0 head=0");
    assert_int_equal(count(out, "BODY 0:"), 7);
    free(out);
}

static void test_leading_empty_lines_and_limits(void **state)
{
    (void)state;
    char *out = PARSE("\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_string_equal(out, "HEAD GET /a HTTP/1.1 keep=1 head=0 expect=0 chunked=0\n"
                             "  Host: x\nBODY 0:\nMORE 0\n");
    free(out);
    size_t n = 20000;
    char *big = malloc(n + 256);
    int k = snprintf(big, 64, "GET / HTTP/1.1\r\nX: ");
    memset(big + k, 'a', n);
    out = parse(big, (size_t)k + n);
    assert_string_equal(out, "REFUSED 431 Request Header Fields Too Large header_too_large: "
                             "headers: larger than 16 KiB\n");
    free(out);
    /* a head of exactly HTTP_MAX_HEAD bytes is read; one more is refused */
    for (int over = 0; over <= 1; over++) {
        k = snprintf(big, 64, "GET / HTTP/1.1\r\nHost: x\r\nX: ");
        size_t fill = HTTP_MAX_HEAD - (size_t)k - 4 + (size_t)over;
        memset(big + k, 'a', fill);
        memcpy(big + k + fill, "\r\n\r\n", 4);
        out = parse(big, (size_t)k + fill + 4);
        assert_contains(out, over ? "REFUSED 431 " : "BODY 0:\nMORE 0\n");
        free(out);
    }
    /* 64 fields are read; a 65th is refused */
    for (int over = 0; over <= 1; over++) {
        k = snprintf(big, 64, "GET / HTTP/1.1\r\nHost: x\r\n");
        for (int i = 1; i < HTTP_MAX_FIELDS + over; i++) k += snprintf(big + k, 32, "F%d: %d\r\n", i, i);
        k += snprintf(big + k, 8, "\r\n");
        out = parse(big, (size_t)k);
        assert_contains(out, over ? "REFUSED 431 Request Header Fields Too Large header_too_large: "
                                    "headers: more than 64 fields"
                                  : "  F63: 63\nBODY 0:\n");
        free(out);
    }
    /* extensions over 1 KiB */
    k = snprintf(big, 200, CH "1;");
    memset(big + k, 'e', 2000);
    out = parse(big, (size_t)k + 2000);
    assert_contains(out, "chunk extension over 1 KiB");
    free(out);
    /* 1 KiB of them is fine */
    k = snprintf(big, 200, CH "1;");
    memset(big + k, 'e', HTTP_MAX_CHUNK_EXT - 1);
    k += HTTP_MAX_CHUNK_EXT - 1;
    k += snprintf(big + k, 64, "\r\nz\r\n0\r\n\r\n");
    out = parse(big, (size_t)k);
    assert_contains(out, "BODY 1:z\n");
    free(out);
    free(big);
}

static void test_expect_and_headers(void **state)
{
    (void)state;
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\na", 417,
            "417 Expectation Failed expectation_failed: Expect: only 100-continue is supported");
    /* the first Expect is the one read; 100-continue in any case */
    char *out = PARSE("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nExpect: other\r\n"
                      "Content-Length: 1\r\n\r\na");
    assert_contains(out, "expect=1");
    assert_contains(out, "BODY 1:a\n");
    free(out);
    /* refusals of the framing come before Expect's */
    REFUSED("POST / HTTP/1.1\r\nHost: x\r\nExpect: x\r\nContent-Length: y\r\n\r\n", 400, "1*DIGIT");

    static const char req[] = "GET / HTTP/1.1\r\nhost: h\r\nX-Twice: 1\r\nx-twice: 2\r\n\r\n";
    char buf[sizeof(req)];
    size_t have = sizeof(req) - 1;
    memcpy(buf, req, sizeof(req));
    http_request p;
    http_request_init(&p, MAX_BODY);
    assert_int_equal(http_request_parse(&p, buf, &have), HTTP_REQ_HEAD);
    assert_string_equal(http_request_header(&p, buf, "HOST"), "h");
    assert_string_equal(http_request_header(&p, buf, "x-TWICE"), "1");
    assert_int_equal(http_request_header_count(&p, buf, "X-Twice"), 2);
    assert_int_equal(http_request_header_count(&p, buf, "Expect"), 0);
    assert_null(http_request_header(&p, buf, "Expect"));
    assert_int_equal(http_request_parse(&p, buf, &have), HTTP_REQ_DONE);
    /* DONE again until reset */
    assert_int_equal(http_request_parse(&p, buf, &have), HTTP_REQ_DONE);
    http_request_reset(&p);
    assert_int_equal(p.max_body, MAX_BODY);
    assert_int_equal(p.nfields, 0);
}

static void test_random_bytes_same_in_any_split(void **state)
{
    (void)state;
    /* valid requests with a byte changed here and there: whatever the
     * parser makes of one, it makes of every split of it (and never reads
     * out of bounds: the ASan build) */
    static const char base_req[] = CH "5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n"
                                      "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok";
    char buf[sizeof(base_req)];
    srand(7);
    for (int i = 0; i < 1500; i++) {
        memcpy(buf, base_req, sizeof(buf));
        unsigned r = (unsigned)rand();
        for (int j = 0; j < 3; j++) buf[rand() % (sizeof(buf) - 1)] = (char)(rand() % 256);
        char *whole = parse_split(buf, sizeof(buf) - 1, 0, 0);
        char *bytes = parse_split(buf, sizeof(buf) - 1, 1, 0);
        char *pieces = parse_split(buf, sizeof(buf) - 1, 2 + r % 40, r);
        assert_string_equal(whole, bytes);
        assert_string_equal(whole, pieces);
        free(whole);
        free(bytes);
        free(pieces);
    }
}

/* Every byte at every place of a field's value, of every length up to 20
 * (the parser reads values eight bytes a step), the others each of a set of
 * allowed bytes (letters, obs-text such as UTF-8's lead and continuation
 * bytes, HTAB, SP: a word test that lets a high byte hide a control byte
 * next to it fails here): refused exactly when it is not a field-vchar, SP
 * or HTAB (RFC 9110 5.5); and every byte in a field's name, refused exactly
 * when it is not a tchar (RFC 9110 5.6.2). CR and LF end a line, and are
 * tested above. */
/* Byte b at place `at` of a value of len bytes, the others `fill`: refused
 * exactly when b is not allowed there. */
static void value_byte(int b, unsigned char fill, int len, int at)
{
    char req[128], v[24];
    int ok = b == '\t' || (b >= 32 && b != 127);
    memset(v, fill, (size_t)len);
    v[at] = (char)b;
    int n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\nX-A: ");
    memcpy(req + n, v, (size_t)len);
    n += len;
    n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n\r\n");
    char *out = parse_split(req, (size_t)n, 0, 0);
    int refused = strstr(out, "X-A: control character in the value") != NULL;
    if (refused == ok)
        fail_msg("byte 0x%02x at %d of %d, the others 0x%02x: %s", b, at, len, fill, out);
    free(out);
}

static void test_each_byte_in_names_and_values(void **state)
{
    (void)state;
    static const char sep[] = "()<>@,;:\\\"/[]?={}";
    static const unsigned char fill[] = {'v', 0x80, 0xa0, 0xc3, 0xff, '\t', ' '};
    for (int b = 0; b < 256; b++) {
        if (b == '\r' || b == '\n') continue;
        for (size_t f = 0; f < sizeof(fill); f++) {
            for (int len = 1; len <= 20; len++) {
                for (int at = 0; at < len; at++) value_byte(b, fill[f], len, at);
            }
        }
        int tok = b > 32 && b < 127 && !memchr(sep, b, sizeof(sep) - 1);
        /* (a colon after the first byte ends the name there: a field) */
        for (int at = 0; at < (b == ':' ? 1 : 3); at++) {
            char req[128], name[4] = "X-A";
            name[at] = (char)b;
            int n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n");
            memcpy(req + n, name, 3);
            n += 3;
            n += snprintf(req + n, sizeof(req) - (size_t)n, ": v\r\n\r\n");
            char *out = parse_split(req, (size_t)n, 0, 0);
            if ((strncmp(out, "HEAD ", 5) == 0) != tok)
                fail_msg("byte 0x%02x at %d of a name: %s", b, at, out);
            free(out);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_and_pipelined),
        cmocka_unit_test(test_chunked_decoded),
        cmocka_unit_test(test_chunk_extension_with_nul),
        cmocka_unit_test(test_bad_chunk_sizes),
        cmocka_unit_test(test_trailer_bound),
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_field_syntax),
        cmocka_unit_test(test_each_byte_in_names_and_values),
        cmocka_unit_test(test_request_line),
        cmocka_unit_test(test_targets_head_connection),
        cmocka_unit_test(test_leading_empty_lines_and_limits),
        cmocka_unit_test(test_expect_and_headers),
        cmocka_unit_test(test_random_bytes_same_in_any_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
