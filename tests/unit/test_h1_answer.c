/* test_h1_answer.c -- unit tests for the callback answer parser: framing,
 * bounds, LF-only lines, and the same result whatever the split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delivery/h1_answer.h"

#include "testutil.h"

typedef struct result {
    int rc;           /* 1 complete, -1 malformed, 0 wants more */
    long status;
    int close, capped;
    int64_t body;
    size_t used;      /* bytes consumed in all */
    size_t kept;      /* a failed answer's body kept */
    int64_t retry_after_ms; /* + 1, 0: none */
    char keep[H1_KEEP_MAX];
} result;

/* Feed msg in pieces cut at cuts[0..ncuts) (ascending), as h1.c does: what a
 * call leaves unused is given again with the next piece. */
static result feed_split(const char *msg, size_t len, const size_t *cuts, int ncuts, int head_req)
{
    h1_answer a;
    memset(&a, 0, sizeof(a));
    a.head_req = head_req;
    a.keep_on = 1;
    char *pend = malloc(len + 1);
    size_t plen = 0, at = 0, consumed = 0;
    result r = {0};
    for (int i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        memcpy(pend + plen, msg + at, to - at);
        plen += to - at;
        at = to;
        size_t used = 0;
        r.rc = h1_answer_parse(&a, pend, plen, &used);
        assert_true(used <= plen);
        consumed += used;
        memmove(pend, pend + used, plen - used);
        plen -= used;
        if (r.rc != 0) break;
    }
    free(pend);
    r.status = a.status;
    r.close = a.close;
    r.capped = a.capped;
    r.body = a.body;
    r.used = consumed;
    r.kept = a.kept;
    r.retry_after_ms = a.retry_after_ms;
    if (a.kept) memcpy(r.keep, a.keep, a.kept);
    free(a.keep);
    return r;
}

static result feed(const char *msg, int head_req)
{
    return feed_split(msg, strlen(msg), NULL, 0, head_req);
}

/* Whole, byte by byte and in random splits: the same verdict. */
static void check_splits(const char *msg, size_t len, int head_req)
{
    result whole = feed_split(msg, len, NULL, 0, head_req);
    size_t *cuts = malloc(sizeof(size_t) * (len + 1));
    for (size_t i = 0; i < len; i++) cuts[i] = i + 1;
    result bytes = feed_split(msg, len, cuts, len ? (int)len - 1 : 0, head_req);
    assert_int_equal(whole.rc, bytes.rc);
    assert_int_equal(whole.status, bytes.status);
    assert_int_equal(whole.close, bytes.close);
    assert_int_equal(whole.body, bytes.body);
    assert_int_equal(whole.kept, bytes.kept);
    assert_memory_equal(whole.keep, bytes.keep, whole.kept);
    assert_int_equal(whole.used, bytes.used);
    srandom(42);
    for (int round = 0; round < 200; round++) {
        int n = 0;
        for (size_t i = 1; i < len; i++)
            if (random() % 7 == 0) cuts[n++] = i;
        result r = feed_split(msg, len, cuts, n, head_req);
        assert_int_equal(whole.rc, r.rc);
        assert_int_equal(whole.status, r.status);
        assert_int_equal(whole.body, r.body);
        assert_int_equal(whole.used, r.used);
    }
    free(cuts);
}

static void test_content_length(void **state)
{
    (void)state;
    const char *m = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
    result r = feed(m, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body, 5);
    assert_int_equal(r.close, 0);
    assert_int_equal(r.used, strlen(m) - 5); /* what follows is not this answer's */
    check_splits(m, strlen(m), 0);
}

static void test_lf_only(void **state)
{
    (void)state;
    const char *m = "HTTP/1.1 201 Created\nContent-Length: 2\nConnection: keep-alive\n\nok";
    result r = feed(m, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.status, 201);
    assert_int_equal(r.body, 2);
    check_splits(m, strlen(m), 0);
    const char *mix = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\n\r\n3\nabc\n0\n\n";
    r = feed(mix, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.body, 3);
    check_splits(mix, strlen(mix), 0);
}

static void test_chunked(void **state)
{
    (void)state;
    const char *m = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                    "4;ext=1\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n";
    result r = feed(m, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.body, 4 + 5 + 14);
    assert_int_equal(r.used, strlen(m));
    check_splits(m, strlen(m), 0);
}

/* A failed answer's body is kept (decoded, up to H1_KEEP_MAX); a 2xx one's
 * is not. */
static void test_keep(void **state)
{
    (void)state;
    const char *m = "HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "4\r\nwiki\r\n5\r\npedia\r\n0\r\n\r\n";
    result r = feed(m, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.kept, 9);
    assert_memory_equal(r.keep, "wikipedia", 9);
    check_splits(m, strlen(m), 0);
    r = feed("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwiki", 0);
    assert_int_equal(r.kept, 0);
    char big[4096];
    int n = snprintf(big, sizeof(big), "HTTP/1.1 500 X\r\nContent-Length: 2000\r\n\r\n");
    memset(big + n, 'z', 2000);
    r = feed_split(big, (size_t)n + 2000, NULL, 0, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.kept, H1_KEEP_MAX);
    check_splits(big, (size_t)n + 2000, 0);
}

static void test_interim_and_head(void **state)
{
    (void)state;
    const char *m = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n"
                    "HTTP/1.1 204 No Content\r\n\r\n";
    result r = feed(m, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.status, 204);
    check_splits(m, strlen(m), 0);
    /* HEAD: a Content-Length, but no body follows */
    r = feed("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", 1);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.body, 0);
}

static void test_no_length_closes(void **state)
{
    (void)state;
    result r = feed("HTTP/1.1 200 OK\r\n\r\nbody to the close", 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.close, 1);
    r = feed("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.close, 1); /* 1.0 without keep-alive */
}

static void test_malformed(void **state)
{
    (void)state;
    static const char *bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 600 Nope\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        /* refused as libcurl refuses them, so that both clients agree */
        "HTTP/1.9 200 OK\r\nContent-Length: 0\r\n\r\n",
        "http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded first\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000002\r\nok\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        result r = feed(bad[i], 0);
        if (r.rc != -1) fail_msg("accepted: %s", bad[i]);
        check_splits(bad[i], strlen(bad[i]), 0);
    }
}

static void test_bounds(void **state)
{
    (void)state;
    /* a head that never ends: refused at 64 KiB, not read for ever */
    size_t n = H1_HEAD_MAX + 100;
    char *m = malloc(n + 1);
    memcpy(m, "HTTP/1.1 200 OK\r\n", 17);
    for (size_t i = 17; i < n; i++) m[i] = (i % 50 == 49) ? '\n' : 'a';
    m[n] = '\0';
    for (size_t i = 17; i < n; i++) if (m[i] == '\n') m[i - 1] = ':';
    result r = feed_split(m, n, NULL, 0, 0);
    assert_int_equal(r.rc, -1);
    free(m);
    /* a Content-Length over the drain bound: complete at the head, closed */
    r = feed("HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\nabc", 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.close, 1);
    assert_int_equal(r.capped, 1);
    /* a chunked body past the bound: not read on */
    size_t chunk = 65536, total = 0;
    size_t cap = 32 + (H1_DRAIN_MAX / chunk + 4) * (chunk + 16);
    char *c = malloc(cap);
    size_t at = (size_t)sprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    while (total <= H1_DRAIN_MAX + chunk) {
        at += (size_t)sprintf(c + at, "%zx\r\n", chunk);
        memset(c + at, 'x', chunk);
        at += chunk;
        memcpy(c + at, "\r\n", 2);
        at += 2;
        total += chunk;
    }
    r = feed_split(c, at, NULL, 0, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.capped, 1);
    assert_int_equal(r.close, 1);
    assert_true(r.body > H1_DRAIN_MAX && r.body <= H1_DRAIN_MAX + (int64_t)chunk);
    free(c);
    /* a chunk extension past H1_LINE_MAX is read and dropped (as libcurl
     * does), whatever the split; a trailer line is refused at 4 KiB */
    char line[3 * H1_LINE_MAX];
    at = (size_t)sprintf(line, "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n5;");
    memset(line + at, 'e', 2 * H1_LINE_MAX);
    at += 2 * H1_LINE_MAX;
    at += (size_t)sprintf(line + at, "\r\nhello\r\n0\r\n\r\n");
    r = feed_split(line, at, NULL, 0, 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.body, 5);
    assert_int_equal(r.kept, 5);
    check_splits(line, at, 0);
    r = feed_split(line, at - 12, NULL, 0, 0); /* the size line has not ended */
    assert_int_equal(r.rc, 0);
    for (int len = H1_LINE_MAX - 1; len <= H1_LINE_MAX; len++) {
        at = (size_t)sprintf(line, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n");
        memcpy(line + at, "X-T: ", 5);
        memset(line + at + 5, 't', (size_t)len - 7);
        memcpy(line + at + len - 2, "\r\n\r\n", 4);
        at += (size_t)len + 2;
        r = feed_split(line, at, NULL, 0, 0);
        assert_int_equal(r.rc, len < H1_LINE_MAX ? 1 : -1);
        check_splits(line, at, 0);
    }
}

/* Taken as libcurl takes them: HTTP/1.0, folded lines after a field, 16
 * digits of chunk size; a NUL in the head is refused. */
static void test_as_libcurl(void **state)
{
    (void)state;
    static const char nul[] = "HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(feed_split(nul, sizeof(nul) - 1, NULL, 0, 0).rc, -1);
    check_splits(nul, sizeof(nul) - 1, 0);
    static const char *good[] = {
        "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\n\tand again\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000002\r\nok\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
        result r = feed(good[i], 0);
        if (r.rc != 1) fail_msg("refused: %s", good[i]);
        check_splits(good[i], strlen(good[i]), 0);
    }
}

static void test_wants_more(void **state)
{
    (void)state;
    assert_int_equal(feed("HTTP/1.1 200 OK\r\nContent-Le", 0).rc, 0);
    assert_int_equal(feed("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab", 0).rc, 0);
    assert_int_equal(feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r", 0).rc, 0);
}

static void test_retry_after(void **state)
{
    (void)state;
    result r = feed("HTTP/1.1 429 Too Many\r\nRetry-After: 2\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.retry_after_ms, 2001);
    r = feed("HTTP/1.1 503 x\r\nretry-after:  0 \r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.retry_after_ms, 1);
    r = feed("HTTP/1.1 503 x\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.retry_after_ms, 0);
    r = feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.retry_after_ms, 0);
    /* delay-seconds and IMF-fixdate; anything else is none */
    int64_t now = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */
    assert_int_equal(h1_retry_after("120", 3, now), 120000);
    assert_int_equal(h1_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", 29, now), 10000);
    assert_int_equal(h1_retry_after("Sun, 06 Nov 1994 08:49:27 GMT", 29, now), 0);
    assert_int_equal(h1_retry_after("Sun, 06 Nov 1994 08:49:47 GMTx", 30, now), -1);
    assert_int_equal(h1_retry_after("-5", 2, now), -1);
    assert_int_equal(h1_retry_after("", 0, now), -1);
    /* past any range: the longest delay, never none (the caller caps it) */
    assert_int_equal(h1_retry_after("99999999999999999999", 20, now), H1_RETRY_AFTER_MAX_S * 1000);
    char many[200];
    memset(many, '9', sizeof(many));
    assert_int_equal(h1_retry_after(many, sizeof(many), now), H1_RETRY_AFTER_MAX_S * 1000);
    assert_int_equal(h1_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", 29, now),
                     H1_RETRY_AFTER_MAX_S * 1000);
    r = feed("HTTP/1.1 429 x\r\nRetry-After: 99999999999999999999\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.retry_after_ms, H1_RETRY_AFTER_MAX_S * 1000 + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length),  cmocka_unit_test(test_lf_only),
        cmocka_unit_test(test_chunked),         cmocka_unit_test(test_interim_and_head),
        cmocka_unit_test(test_no_length_closes), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bounds),          cmocka_unit_test(test_wants_more),
        cmocka_unit_test(test_keep),            cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_as_libcurl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
