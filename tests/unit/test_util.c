/* test_util.c -- unit tests for the UTF-8 check (RFC 3629, with Markus
 * Kuhn's UTF-8 decoder stress test cases), the text cleaning on it, the
 * redaction of URLs shown outside tickd, integers written in decimal, and
 * the pool of blocks kept for reuse (under ASan, make unit-san, it keeps
 * none: each put is a free, so a use after it is caught there). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#include "testutil.h"

/* util_utf8_valid on a literal (which may hold NULs): 1, or -1 - the offset
 * of the first bad byte */
static long valid_at(const char *s, size_t n)
{
    size_t bad = (size_t)-1;
    if (util_utf8_valid(s, n, &bad)) return 1;
    assert_true(bad < n);
    return -1 - (long)bad;
}
#define VALID(lit) valid_at((lit), sizeof(lit) - 1)
#define BAD_AT(k) (-1 - (long)(k))

/* util_copy cuts to fit, always ends the copy, and copies NULL as "". */
static void test_copy(void **state)
{
    (void)state;
    char b[6];
    assert_int_equal(util_copy(b, sizeof(b), "abc"), 3);
    assert_string_equal(b, "abc");
    assert_int_equal(util_copy(b, sizeof(b), "abcdefgh"), 5);
    assert_string_equal(b, "abcde");
    assert_int_equal(util_copy(b, sizeof(b), ""), 0);
    assert_string_equal(b, "");
    assert_int_equal(util_copy(b, sizeof(b), NULL), 0);
    assert_string_equal(b, "");
    b[0] = 'x';
    assert_int_equal(util_copy(b, 0, "abc"), 0);
    assert_int_equal(b[0], 'x');
}

/* Every byte zero but each kept buffer's, whose first byte only is; the
 * buffers at the start, the end and side by side. */
typedef struct zb {
    char a[5];
    long n;
    int k;
    char b[7];
    char c[3];
    short m;
    char d[9];
} zb;

static void test_zero_but(void **state)
{
    (void)state;
    static const util_span keep[] = {UTIL_SPAN(zb, a), UTIL_SPAN(zb, b), UTIL_SPAN(zb, c),
                                     UTIL_SPAN(zb, d)};
    size_t nk = sizeof(keep) / sizeof(keep[0]);
    zb z;
    memset(&z, 0xA5, sizeof(z));
    util_zero_but(&z, sizeof(z), keep, nk);
    const unsigned char *p = (const unsigned char *)&z;
    for (size_t i = 0; i < sizeof(z); i++) {
        int in = -1;
        for (size_t k = 0; k < nk; k++)
            if (i >= keep[k].off && i < keep[k].off + keep[k].len) in = (int)k;
        if (in < 0 || i == keep[in].off) assert_int_equal(p[i], 0);
        else assert_int_equal(p[i], 0xA5);   /* left as it was */
    }
    assert_int_equal(z.n, 0);
    assert_int_equal(z.k, 0);
    assert_int_equal(z.m, 0);
    assert_string_equal(z.d, "");
    /* none kept: all of it zero */
    memset(&z, 0xA5, sizeof(z));
    util_zero_but(&z, sizeof(z), keep, 0);
    for (size_t i = 0; i < sizeof(z); i++) assert_int_equal(p[i], 0);
}

static void test_valid_text(void **state)
{
    (void)state;
    assert_int_equal(VALID(""), 1);
    assert_int_equal(VALID("plain ASCII, tab\t and NUL \0 too"), 1);
    /* Kuhn 1: the Greek word 'kosme' */
    assert_int_equal(VALID("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"), 1);
    /* Kuhn 2.1 / 2.2: the first and last sequence of each length */
    assert_int_equal(VALID("\xc2\x80"), 1);
    assert_int_equal(VALID("\xdf\xbf"), 1);
    assert_int_equal(VALID("\xe0\xa0\x80"), 1);
    assert_int_equal(VALID("\xef\xbf\xbf"), 1);
    assert_int_equal(VALID("\xf0\x90\x80\x80"), 1);
    /* Kuhn 2.3: the edges of the surrogates and of Unicode */
    assert_int_equal(VALID("\xed\x9f\xbf"), 1);     /* U+D7FF */
    assert_int_equal(VALID("\xee\x80\x80"), 1);     /* U+E000 */
    assert_int_equal(VALID("\xef\xbf\xbd"), 1);     /* U+FFFD */
    assert_int_equal(VALID("\xf4\x8f\xbf\xbf"), 1); /* U+10FFFF */
    /* Kuhn 5.3: noncharacters are code points: RFC 3629 takes them */
    assert_int_equal(VALID("\xef\xbf\xbe"), 1);     /* U+FFFE */
    assert_int_equal(VALID("\xef\xb7\x90"), 1);     /* U+FDD0 */
    assert_int_equal(VALID("\xf0\x9f\xbf\xbf"), 1); /* U+1FFFF */
}

static void test_beyond_unicode_and_five_six_bytes(void **state)
{
    (void)state;
    assert_int_equal(VALID("\xf4\x90\x80\x80"), BAD_AT(0));        /* U+110000 */
    assert_int_equal(VALID("\xf7\xbf\xbf\xbf"), BAD_AT(0));        /* U+1FFFFF */
    assert_int_equal(VALID("\xf8\x88\x80\x80\x80"), BAD_AT(0));    /* 5 bytes */
    assert_int_equal(VALID("\xfb\xbf\xbf\xbf\xbf"), BAD_AT(0));
    assert_int_equal(VALID("\xfc\x84\x80\x80\x80\x80"), BAD_AT(0)); /* 6 bytes */
    assert_int_equal(VALID("\xfd\xbf\xbf\xbf\xbf\xbf"), BAD_AT(0));
    /* Kuhn 3.5: bytes that never appear; F5-FF lead nothing */
    assert_int_equal(VALID("\xfe"), BAD_AT(0));
    assert_int_equal(VALID("\xff"), BAD_AT(0));
    assert_int_equal(VALID("\xfe\xfe\xff\xff"), BAD_AT(0));
    for (int b = 0xf5; b <= 0xff; b++) {
        char s[4] = {(char)b, (char)0x80, (char)0x80, (char)0x80};
        assert_int_equal(valid_at(s, 3), BAD_AT(0));
        assert_int_equal(valid_at(s, 4), BAD_AT(0));
    }
    /* the receiver's body of the report: each bad lead where it is */
    assert_int_equal(VALID("A\xff\x80\x80" "B\xf8\x88\x80" "C"), BAD_AT(1));
    assert_int_equal(VALID("ok \xc3\xa9 then \xff"), BAD_AT(11));
}

static void test_overlongs_and_surrogates(void **state)
{
    (void)state;
    /* Kuhn 4.1: '/' overlong; 4.2: the largest overlong of each length;
     * 4.3: NUL overlong */
    assert_int_equal(VALID("\xc0\xaf"), BAD_AT(0));
    assert_int_equal(VALID("\xe0\x80\xaf"), BAD_AT(0));
    assert_int_equal(VALID("\xf0\x80\x80\xaf"), BAD_AT(0));
    assert_int_equal(VALID("\xc1\xbf"), BAD_AT(0));
    assert_int_equal(VALID("\xe0\x9f\xbf"), BAD_AT(0));
    assert_int_equal(VALID("\xf0\x8f\xbf\xbf"), BAD_AT(0));
    assert_int_equal(VALID("\xc0\x80"), BAD_AT(0));
    assert_int_equal(VALID("\xe0\x80\x80"), BAD_AT(0));
    assert_int_equal(VALID("\xf0\x80\x80\x80"), BAD_AT(0));
    /* Kuhn 5.1 / 5.2: single and paired UTF-16 surrogates */
    assert_int_equal(VALID("\xed\xa0\x80"), BAD_AT(0));
    assert_int_equal(VALID("\xed\xad\xbf"), BAD_AT(0));
    assert_int_equal(VALID("\xed\xae\x80"), BAD_AT(0));
    assert_int_equal(VALID("\xed\xaf\xbf"), BAD_AT(0));
    assert_int_equal(VALID("\xed\xb0\x80"), BAD_AT(0));
    assert_int_equal(VALID("\xed\xbe\x80"), BAD_AT(0));
    assert_int_equal(VALID("\xed\xbf\xbf"), BAD_AT(0));
    assert_int_equal(VALID("\xed\xa0\x80\xed\xb0\x80"), BAD_AT(0));
    assert_int_equal(VALID("x\xed\xaf\xbf\xed\xbf\xbf"), BAD_AT(1));
}

static void test_cut_and_stray(void **state)
{
    (void)state;
    /* Kuhn 3.1: continuation bytes alone */
    assert_int_equal(VALID("\x80"), BAD_AT(0));
    assert_int_equal(VALID("\xbf"), BAD_AT(0));
    assert_int_equal(VALID("a\x80\xbf\x80"), BAD_AT(1));
    /* Kuhn 3.2: lead bytes followed by a space */
    assert_int_equal(VALID("\xc0 "), BAD_AT(0));
    assert_int_equal(VALID("\xdf "), BAD_AT(0));
    assert_int_equal(VALID("\xe0 "), BAD_AT(0));
    assert_int_equal(VALID("\xef "), BAD_AT(0));
    assert_int_equal(VALID("\xf0 "), BAD_AT(0));
    assert_int_equal(VALID("\xf4 "), BAD_AT(0));
    /* Kuhn 3.3 / 3.4: the last byte missing, alone and in a row, at the
     * end of the text and before more */
    assert_int_equal(VALID("\xc2"), BAD_AT(0));
    assert_int_equal(VALID("\xe2\x82"), BAD_AT(0));
    assert_int_equal(VALID("\xf0\x9f\x98"), BAD_AT(0));
    assert_int_equal(VALID("\xdf\xbf\xef\xbf"), BAD_AT(2));
    assert_int_equal(VALID("\xe2\x82x"), BAD_AT(0));
    assert_int_equal(VALID("\xf0\x9f\x98\xe2\x82\xac"), BAD_AT(0));
    /* a sequence cut by the length given, though the bytes go on */
    assert_int_equal(valid_at("\xe2\x82\xac", 2), BAD_AT(0));
    assert_int_equal(valid_at("\xe2\x82\xac", 3), 1);
}

static void test_seq_lengths(void **state)
{
    (void)state;
    assert_int_equal(util_utf8_seq("", 0), 0);
    assert_int_equal(util_utf8_seq("a", 1), 1);
    assert_int_equal(util_utf8_seq("\0", 1), 1);
    assert_int_equal(util_utf8_seq("\xc3\xa9", 2), 2);
    assert_int_equal(util_utf8_seq("\xe2\x82\xac", 3), 3);
    assert_int_equal(util_utf8_seq("\xf0\x9f\x98\x80", 4), 4);
    assert_int_equal(util_utf8_seq("\xf0\x9f\x98\x80", 3), 0);
    assert_int_equal(util_utf8_seq("\xff\x80\x80", 3), 0);
    assert_int_equal(util_utf8_seq("\xf8\x88\x80\x80", 4), 0);
    /* no bad pointer: only the answer */
    assert_int_equal(util_utf8_valid("\xff", 1, NULL), 0);
}

static void test_text_clean(void **state)
{
    (void)state;
    /* the receiver's body of the report: each byte starting no valid
     * sequence becomes '?', the ASCII around it stays */
    char body[] = "A\xff\x80\x80" "B\xf8\x88\x80" "C";
    util_text_clean(body, strlen(body));
    assert_string_equal(body, "A???B???C");
    char mixed[] = "caf\xc3\xa9 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf \xe2\x82 \xf0\x9f\x98\x80";
    util_text_clean(mixed, strlen(mixed));
    assert_string_equal(mixed, "caf\xc3\xa9 ??? ???? ?? ?? \xf0\x9f\x98\x80");
    char ctl[] = "a\x1b[0m\x7f\tb\r\n";
    util_text_clean(ctl, strlen(ctl));
    assert_string_equal(ctl, "a?[0m?\tb\r\n");
    /* a sequence cut by the end of the buffer (a body kept to 1 KiB) */
    char cut[] = "ab\xe2\x82";
    util_text_clean(cut, strlen(cut));
    assert_string_equal(cut, "ab??");
    assert_int_equal(util_utf8_valid(mixed, strlen(mixed), NULL), 1);
}

static void redacted(const char *url, const char *want)
{
    char *r = util_url_redact(url);
    assert_string_equal(r, want);
    free(r);
}

static void test_url_redact(void **state)
{
    (void)state;
    redacted("http://alice:s3cretpw@host/x?token=abc", "http://***@host/x?token=***");
    redacted("https://host:8443/a/b", "https://host:8443/a/b");
    redacted("http://u@host", "http://***@host");
    redacted("http://@host/", "http://***@host/");
    /* the last @ of the authority ends the userinfo, escaped or not */
    redacted("http://a:b@c@host:81/p", "http://***@host:81/p");
    redacted("http://a:b%40c@[::1]:81/p", "http://***@[::1]:81/p");
    /* an @ after the authority is not userinfo */
    redacted("http://host/p@q?x=a@b", "http://host/p@q?x=***");
    redacted("http://host/?a=1&b=&c&&d=x=y", "http://host/?a=***&b=***&***&&d=***");
    redacted("http://host/?", "http://host/?");
    redacted("http://host/p?secret", "http://host/p?***");
    redacted("http://host/p#frag?x=1", "http://host/p#***");
    redacted("http://host/p?a=1#f", "http://host/p?a=***#***");
    redacted("http://host/p#", "http://host/p#");
    redacted("HTTP://U:P@HOST?T=1", "HTTP://***@HOST?T=***");
    /* no scheme: the query still goes */
    redacted("host/p?k=v", "host/p?k=***");
    redacted("", "");
}

/* util_fmt_int against printf's %lld: every power of ten and its
 * neighbours (where the digit count changes), both signs, the extremes,
 * and a spread of values of every length */
static void fmt_same(long long v)
{
    char got[UTIL_INT_MAX], want[32];
    memset(got, 'x', sizeof(got));
    int n = util_fmt_int(got, v);
    snprintf(want, sizeof(want), "%lld", v);
    if (strcmp(got, want) != 0 || n != (int)strlen(want))
        fail_msg("util_fmt_int(%s) wrote \"%s\" (%d)", want, got, n);
}

/* a block put back comes out again, last in first out, until the pool is
 * empty; past `keep` a put frees (the count stays at keep); drain frees all */
static void test_pool(void **state)
{
    (void)state;
    util_pool p = {NULL, 0, 2};
    char *a = util_pool_get(&p, 100), *b = util_pool_get(&p, 100), *c = util_pool_get(&p, 100);
    memset(a, 1, 100);
    memset(b, 2, 100);
    memset(c, 3, 100);
    util_pool_put(&p, a);
    util_pool_put(&p, b);
    util_pool_put(&p, c);   /* past keep: freed */
    util_pool_put(&p, NULL);
    assert_int_equal(p.n, UTIL_POOL_KEEPS ? 2 : 0);
    char *x = util_pool_get(&p, 100), *y = util_pool_get(&p, 100);
    if (UTIL_POOL_KEEPS) {
        assert_ptr_equal(x, b);
        assert_ptr_equal(y, a);
        assert_int_equal(y[99], 1);   /* only the link is written over */
    }
    assert_int_equal(p.n, 0);
    assert_null(p.free);
    util_pool_put(&p, x);
    util_pool_put(&p, y);
    util_pool_drain(&p);
    assert_int_equal(p.n, 0);
    assert_null(p.free);
    /* a size under a pointer's still holds the link */
    util_pool q = {NULL, 0, 4};
    char *t = util_pool_get(&q, 1);
    util_pool_put(&q, t);
    util_pool_drain(&q);
}

static void test_fmt_int(void **state)
{
    (void)state;
    fmt_same(0);
    fmt_same(LLONG_MAX);
    fmt_same(LLONG_MIN);
    fmt_same(LLONG_MIN + 1);
    long long p = 1;
    for (int i = 0; i < 19; i++) {
        fmt_same(p);
        fmt_same(p - 1);
        fmt_same(p + 1);
        fmt_same(-p);
        fmt_same(-p + 1);
        fmt_same(-p - 1);
        if (i < 18) p *= 10;
    }
    unsigned long long x = 88172645463325252ULL;   /* xorshift64 */
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        long long v = (long long)(x >> (x % 64));
        fmt_same(i % 2 ? v : -v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_zero_but),
        cmocka_unit_test(test_valid_text),
        cmocka_unit_test(test_beyond_unicode_and_five_six_bytes),
        cmocka_unit_test(test_overlongs_and_surrogates),
        cmocka_unit_test(test_cut_and_stray),
        cmocka_unit_test(test_seq_lengths),
        cmocka_unit_test(test_text_clean),
        cmocka_unit_test(test_url_redact),
        cmocka_unit_test(test_fmt_int),
        cmocka_unit_test(test_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
