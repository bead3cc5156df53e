/* test_cron.c -- unit tests for cron: parsing, errors, next runs, DST.
 *
 * Expected instants were read off zdump for the zones used. The last test
 * checks cron_next against a brute-force scan, second by second for
 * seconds expressions and minute by minute otherwise, over random expressions
 * in UTC; TICKD_TEST_SEED=<n> replays a seed. test_cron_oracle.py compares
 * with an outside implementation in six zones. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/tz.h"

#include "testutil.h"

static char err[256];

static int64_t ms(int y, int mo, int d, int h, int mi, int s)
{
    return utc(y, mo, d, h, mi, s) * 1000;
}

static cron_expr parse(const char *s)
{
    cron_expr ce;
    if (cron_parse(&ce, s, strlen(s), err)) fail_msg("%s: %s", s, err);
    return ce;
}

static uint64_t bits(const int *v, int n)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++) b |= UINT64_C(1) << v[i];
    return b;
}
#define BITS(...) bits((const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

static uint64_t span(int lo, int hi)
{
    uint64_t b = 0;
    for (int i = lo; i <= hi; i++) b |= UINT64_C(1) << i;
    return b;
}

/* ---- parsing ---------------------------------------------------------------- */

static void test_parse(void **state)
{
    (void)state;
    cron_expr c = parse("*/5 * * * *");
    assert_int_equal(c.sec, 1);
    assert_int_equal(c.min, BITS(0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55));
    assert_int_equal(c.hour, span(0, 23));
    assert_int_equal(c.mday, span(1, 31));
    assert_int_equal(c.mon, span(1, 12));
    assert_int_equal(c.wday, span(0, 6));
    assert_true(c.dom_star && c.dow_star);

    c = parse("5/15 1-20/7 1,15 JAN-mar,Dec sun,Sat");
    assert_int_equal(c.min, BITS(5, 20, 35, 50));        /* N/STEP: N to the end */
    assert_int_equal(c.hour, BITS(1, 8, 15));
    assert_int_equal(c.mday, BITS(1, 15));
    assert_int_equal(c.mon, BITS(1, 2, 3, 12));
    assert_int_equal(c.wday, BITS(0, 6));
    assert_true(!c.dom_star && !c.dow_star);

    /* weekday 7 is Sunday; ranges and steps over 0-7 fold onto it */
    assert_int_equal(parse("0 0 * * 7").wday, BITS(0));
    assert_int_equal(parse("0 0 * * 5-7").wday, BITS(0, 5, 6));
    assert_int_equal(parse("0 0 * * 1/2").wday, BITS(0, 1, 3, 5));
    assert_int_equal(parse("0 0 * * */7").wday, BITS(0));
    assert_int_equal(parse("0 0 * * MON-FRI").wday, span(1, 5));
    assert_int_equal(parse("0 0 * * 0-7").wday, span(0, 6));
    assert_int_equal(parse("0 0 * feb/3 *").mon, BITS(2, 5, 8, 11));
    /* a step over `*` still counts as `*` for the day rule (Vixie) */
    c = parse("0 0 */2 * 1");
    assert_true(c.dom_star && !c.dow_star);
    assert_int_equal(c.mday, BITS(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
    /* a seconds field */
    c = parse("*/20 0 12 * * *");
    assert_int_equal(c.sec, BITS(0, 20, 40));
    assert_int_equal(c.min, BITS(0));
    assert_int_equal(c.hour, BITS(12));
    /* spacing, leading zeros, duplicates */
    c = parse("\t 00  1,1,01\t* * *  ");
    assert_int_equal(c.min, BITS(0));
    assert_int_equal(c.hour, BITS(1));
    /* macros, any case */
    static const char *const mac[][2] = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"}, {" @Daily ", "0 0 * * *"},
    };
    for (size_t i = 0; i < sizeof(mac) / sizeof(mac[0]); i++) {
        cron_expr a = parse(mac[i][0]), b = parse(mac[i][1]);
        assert_memory_equal(&a, &b, sizeof(a));
    }
    /* the length is the caller's: a prefix of a longer buffer */
    const char buf[] = "0 0 * * 1garbage";
    assert_int_equal(cron_parse(&c, buf, 9, err), 0);
    assert_int_equal(c.wday, BITS(1));
}

static void expect_err(const char *s, size_t len, const char *want)
{
    cron_expr c;
    if (cron_parse(&c, s, len, err) != -1) fail_msg("accepted: %.*s", (int)len, s);
    if (strcmp(err, want) != 0) fail_msg("%.*s:\n  got  %s\n  want %s", (int)len, s, err, want);
}
#define ERR(s, want) expect_err(s, strlen(s), want)

static void test_errors(void **state)
{
    (void)state;
    ERR("0 0 32 * *", "cron: field 3 (day of month): 32 is out of range 1-31");
    ERR("0 0 0 * *", "cron: field 3 (day of month): 0 is out of range 1-31");
    ERR("0 0 0 0 32 * *", "cron: expected 5 fields (minute hour day-of-month month day-of-week) "
                          "or 6 with a leading second, got more than 6");
    ERR("0 0 * *", "cron: expected 5 fields (minute hour day-of-month month day-of-week) "
                   "or 6 with a leading second, got 4");
    ERR("60 * * * *", "cron: field 1 (minute): 60 is out of range 0-59");
    ERR("0 60 * * * *", "cron: field 2 (minute): 60 is out of range 0-59");
    ERR("60 0 * * * *", "cron: field 1 (second): 60 is out of range 0-59");
    ERR("0 24 * * *", "cron: field 2 (hour): 24 is out of range 0-23");
    ERR("0 0 1 13 *", "cron: field 4 (month): 13 is out of range 1-12");
    ERR("0 0 * * 8", "cron: field 5 (day of week): 8 is out of range 0-7");
    ERR("0 0 1 1 1 99999999999999999999", "cron: field 6 (day of week): "
        "99999999999999999999 is out of range 0-7");
    ERR("0 0 * FOO *", "cron: field 4 (month): 'FOO' is not a number or month name (JAN-DEC)");
    ERR("0 0 * * MONDAY", "cron: field 5 (day of week): 'MONDAY' is not a number or weekday "
                          "name (SUN-SAT)");
    ERR("0 0 * * jan", "cron: field 5 (day of week): 'jan' is not a number or weekday name (SUN-SAT)");
    ERR("0 0 mon * *", "cron: field 3 (day of month): 'mon' is not a number");
    ERR("0 0 L * *", "cron: field 3 (day of month): 'L' is not a number");
    ERR("0 0 15W * *", "cron: field 3 (day of month): '15W' is not a number");
    ERR("0 0 * * 5#3", "cron: field 5 (day of week): unexpected '#'");
    ERR("0 0 ? * *", "cron: field 3 (day of month): unexpected '?'");
    ERR("0 0 5-3 * *", "cron: field 3 (day of month): range 5-3 runs backwards");
    ERR("0 0 * * FRI-MON", "cron: field 5 (day of week): range FRI-MON runs backwards");
    ERR("*/0 * * * *", "cron: field 1 (minute): step 0 is out of range 1-60");
    ERR("*/61 * * * *", "cron: field 1 (minute): step 61 is out of range 1-60");
    ERR("0 */25 * * *", "cron: field 2 (hour): step 25 is out of range 1-24");
    ERR("*/ * * * *", "cron: field 1 (minute): a step is missing after '/'");
    ERR("1,,2 * * * *", "cron: field 1 (minute): an empty list element");
    ERR(",1 * * * *", "cron: field 1 (minute): an empty list element");
    ERR("1, * * * *", "cron: field 1 (minute): an empty list element");
    ERR("1- * * * *", "cron: field 1 (minute): a number is missing at the end");
    ERR("*5 * * * *", "cron: field 1 (minute): unexpected '5'");
    ERR("1-2-3 * * * *", "cron: field 1 (minute): unexpected '-'");
    ERR("1/2/3 * * * *", "cron: field 1 (minute): unexpected '/'");
    ERR("*/x * * * *", "cron: field 1 (minute): the step is not a number: unexpected 'x'");
    ERR("-1 * * * *", "cron: field 1 (minute): unexpected '-'");
    ERR("", "cron: empty expression");
    ERR(" \t ", "cron: empty expression");
    ERR("@reboot", "cron: unknown macro '@reboot' (known: @yearly @annually @monthly @weekly "
                   "@daily @midnight @hourly)");
    ERR("@daily 0", "cron: unknown macro '@daily 0' (known: @yearly @annually @monthly "
                    "@weekly @daily @midnight @hourly)");
    ERR("@", "cron: unknown macro '@' (known: @yearly @annually @monthly @weekly @daily "
             "@midnight @hourly)");
    ERR("0 0 * * \xff", "cron: field 5 (day of week): unexpected byte 0xff");
    /* a NUL inside the given length is an error, not an end */
    expect_err("0 0 * * 1\0", 10, "cron: field 5 (day of week): unexpected byte 0x00");
    /* over the length limit */
    char big[CRON_LEN_MAX + 2];
    memset(big, ' ', sizeof(big));
    memcpy(big, "* * * * *", 9);
    cron_expr c;
    assert_int_equal(cron_parse(&c, big, CRON_LEN_MAX, err), 0);
    expect_err(big, CRON_LEN_MAX + 1, "cron: longer than 256 bytes");
    /* long tokens are cut in messages */
    ERR("0 0 * * abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
        "cron: field 5 (day of week): 'abcdefghijklmnopqrstuvwx' is not a number or weekday "
        "name (SUN-SAT)");
}

/* ---- next runs in UTC ---------------------------------------------------------- */

static int64_t next(const char *expr, const char *zname, int64_t after_ms)
{
    cron_expr c = parse(expr);
    int64_t out;
    if (cron_next(&c, zname ? zone(zname) : NULL, after_ms, &out)) return -1;
    return out;
}

static void test_next_utc(void **state)
{
    (void)state;
    int64_t t0 = ms(2026, 1, 1, 0, 0, 0); /* a Thursday */
    /* strictly after, on whole seconds */
    assert_int_equal(next("0 0 * * *", NULL, t0), ms(2026, 1, 2, 0, 0, 0));
    assert_int_equal(next("0 0 * * *", NULL, t0 - 1), t0);
    assert_int_equal(next("* * * * * *", NULL, t0), t0 + 1000);
    assert_int_equal(next("* * * * * *", NULL, t0 + 1), t0 + 1000);
    assert_int_equal(next("* * * * * *", NULL, t0 + 999), t0 + 1000);
    assert_int_equal(next("* * * * *", NULL, t0 + 999), t0 + 60000);
    assert_int_equal(next("30 */15 * * * *", NULL, t0), ms(2026, 1, 1, 0, 0, 30));
    assert_int_equal(next("@hourly", NULL, t0), ms(2026, 1, 1, 1, 0, 0));
    assert_int_equal(next("@weekly", NULL, t0), ms(2026, 1, 4, 0, 0, 0));
    assert_int_equal(next("@monthly", NULL, t0), ms(2026, 2, 1, 0, 0, 0));
    assert_int_equal(next("@yearly", NULL, t0), ms(2027, 1, 1, 0, 0, 0));
    assert_int_equal(next("59 23 31 12 *", NULL, t0), ms(2026, 12, 31, 23, 59, 0));
    assert_int_equal(next("0 9 * * MON-FRI", NULL, ms(2026, 1, 2, 9, 0, 0)), ms(2026, 1, 5, 9, 0, 0));
    /* both day fields restricted: either (the 13th, or a Friday) */
    assert_int_equal(next("0 0 13 * 5", NULL, t0), ms(2026, 1, 2, 0, 0, 0));
    assert_int_equal(next("0 0 13 * 5", NULL, ms(2026, 1, 12, 0, 0, 0)), ms(2026, 1, 13, 0, 0, 0));
    /* one of them `*`-led: both (odd days that are Mondays) */
    assert_int_equal(next("0 0 */2 * 1", NULL, t0), ms(2026, 1, 5, 0, 0, 0));
    assert_int_equal(next("0 0 */2 * 1", NULL, ms(2026, 1, 5, 0, 0, 0)), ms(2026, 1, 19, 0, 0, 0));
    assert_int_equal(next("0 0 1 * *", NULL, t0), ms(2026, 2, 1, 0, 0, 0));
    assert_int_equal(next("0 0 * * 1", NULL, t0), ms(2026, 1, 5, 0, 0, 0));
    /* leap days, the 31st */
    assert_int_equal(next("0 0 29 2 *", NULL, t0), ms(2028, 2, 29, 0, 0, 0));
    assert_int_equal(next("0 0 29 2 *", NULL, ms(2097, 3, 1, 0, 0, 0)), ms(2104, 2, 29, 0, 0, 0));
    assert_int_equal(next("0 0 31 * *", NULL, ms(2026, 1, 31, 0, 0, 0)), ms(2026, 3, 31, 0, 0, 0));
    /* never */
    assert_int_equal(next("0 0 30 2 *", NULL, t0), -1);
    assert_int_equal(next("0 0 31 4,6,9,11 *", NULL, t0), -1);
    assert_int_equal(next("0 0 31 2 1", NULL, t0), ms(2026, 2, 2, 0, 0, 0)); /* OR: Mondays */
    assert_int_equal(next("0 0 31 2 *", NULL, t0), -1);
    /* out of the supported years */
    assert_int_equal(next("* * * * *", NULL, -1), -1);
    assert_int_equal(next("* * * * *", NULL, INT64_MAX), -1);
    assert_int_equal(next("* * * * *", NULL, 0), 60000);
    assert_int_equal(next("* * * * *", NULL, ms(9989, 12, 31, 23, 58, 0)), ms(9989, 12, 31, 23, 59, 0));
}

/* ---- daylight saving ------------------------------------------------------------ */

static void test_dst(void **state)
{
    (void)state;
    const char *ny = "America/New_York", *lon = "Europe/London", *lh = "Australia/Lord_Howe";
    /* New York springs forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z):
     * 02:30 does not exist and runs at 03:00 EDT, once */
    int64_t before = ms(2026, 3, 8, 6, 0, 0); /* 01:00 EST */
    assert_int_equal(next("30 2 * * *", ny, before), ms(2026, 3, 8, 7, 0, 0));
    assert_int_equal(next("30 2 * * *", ny, ms(2026, 3, 8, 7, 0, 0) - 1), ms(2026, 3, 8, 7, 0, 0));
    assert_int_equal(next("30 2 * * *", ny, ms(2026, 3, 8, 7, 0, 0)), ms(2026, 3, 9, 6, 30, 0));
    assert_int_equal(next("*/20 2 * * *", ny, before), ms(2026, 3, 8, 7, 0, 0));
    assert_int_equal(next("*/20 2 * * *", ny, ms(2026, 3, 8, 7, 0, 0)), ms(2026, 3, 9, 6, 0, 0));
    assert_int_equal(next("*/20 * * * *", ny, ms(2026, 3, 8, 6, 40, 0)), ms(2026, 3, 8, 7, 0, 0));
    assert_int_equal(next("*/20 * * * *", ny, ms(2026, 3, 8, 7, 0, 0)), ms(2026, 3, 8, 7, 20, 0));
    assert_int_equal(next("0 2 * * *", ny, before), ms(2026, 3, 8, 7, 0, 0));
    assert_int_equal(next("0 3 * * *", ny, before), ms(2026, 3, 8, 7, 0, 0));
    assert_int_equal(next("59 59 1 * * *", ny, before), ms(2026, 3, 8, 6, 59, 59));
    /* ... and falls back 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z): 01:30
     * happens twice and runs at the first, 05:30Z, only */
    int64_t fb = ms(2026, 11, 1, 4, 0, 0); /* 00:00 EDT */
    assert_int_equal(next("30 1 * * *", ny, fb), ms(2026, 11, 1, 5, 30, 0));
    assert_int_equal(next("30 1 * * *", ny, ms(2026, 11, 1, 5, 30, 0)), ms(2026, 11, 2, 6, 30, 0));
    assert_int_equal(next("0 * * * *", ny, ms(2026, 11, 1, 5, 0, 0)), ms(2026, 11, 1, 7, 0, 0));
    /* a start inside the second pass runs nothing before the fold ends */
    assert_int_equal(next("* * * * * *", ny, ms(2026, 11, 1, 6, 30, 0)), ms(2026, 11, 1, 7, 0, 0));
    assert_int_equal(next("*/15 * * * *", ny, ms(2026, 11, 1, 6, 0, 0)), ms(2026, 11, 1, 7, 0, 0));
    assert_int_equal(next("*/15 * * * *", ny, ms(2026, 11, 1, 6, 0, 0) - 1), ms(2026, 11, 1, 7, 0, 0));
    assert_int_equal(next("*/15 * * * *", ny, ms(2026, 11, 1, 5, 45, 0) - 1), ms(2026, 11, 1, 5, 45, 0));
    /* London: 01:30 on 2026-03-29 does not exist; 01:30 on 2026-10-25 is BST's */
    assert_int_equal(next("30 1 * * *", lon, ms(2026, 3, 28, 12, 0, 0)), ms(2026, 3, 29, 1, 0, 0));
    assert_int_equal(next("30 1 * * *", lon, ms(2026, 10, 24, 12, 0, 0)), ms(2026, 10, 25, 0, 30, 0));
    assert_int_equal(next("30 1 * * *", lon, ms(2026, 10, 25, 0, 30, 0)), ms(2026, 10, 26, 1, 30, 0));
    /* Lord Howe moves by 30 minutes: 02:00 +10:30 -> 02:30 +11 on 2026-10-04,
     * 02:00 +11 -> 01:30 +10:30 on 2026-04-05 */
    assert_int_equal(next("15 2 * * *", lh, ms(2026, 10, 3, 12, 0, 0)), ms(2026, 10, 3, 15, 30, 0));
    assert_int_equal(next("45 2 * * *", lh, ms(2026, 10, 3, 12, 0, 0)), ms(2026, 10, 3, 15, 45, 0));
    assert_int_equal(next("45 1 * * *", lh, ms(2026, 4, 4, 12, 0, 0)), ms(2026, 4, 4, 14, 45, 0));
    assert_int_equal(next("45 1 * * *", lh, ms(2026, 4, 4, 14, 45, 0)), ms(2026, 4, 5, 15, 15, 0));
    assert_int_equal(next("15 1 * * *", lh, ms(2026, 4, 4, 12, 0, 0)), ms(2026, 4, 4, 14, 15, 0));
    /* Kathmandu +05:45 */
    assert_int_equal(next("0 9 * * *", "Asia/Kathmandu", ms(2026, 1, 1, 0, 0, 0)), ms(2026, 1, 1, 3, 15, 0));
    /* Sao Paulo: -03 now; 2018-11-04 skipped midnight itself */
    assert_int_equal(next("0 0 * * *", "America/Sao_Paulo", ms(2026, 1, 1, 0, 0, 0)), ms(2026, 1, 1, 3, 0, 0));
    assert_int_equal(next("0 0 * * *", "America/Sao_Paulo", ms(2018, 11, 3, 12, 0, 0)), ms(2018, 11, 4, 3, 0, 0));
    assert_int_equal(next("0 0 4 11 *", "America/Sao_Paulo", ms(2018, 1, 1, 0, 0, 0)), ms(2018, 11, 4, 3, 0, 0));
    /* day boundaries are the zone's: Monday 00:30 in Kathmandu is Sunday in UTC */
    assert_int_equal(next("30 0 * * MON", "Asia/Kathmandu", ms(2026, 1, 1, 0, 0, 0)), ms(2026, 1, 4, 18, 45, 0));
    /* every minute across both New York changes: no gaps, no repeats */
    cron_expr c = parse("* * * * *");
    const tz *z = zone(ny);
    int64_t t = ms(2026, 3, 7, 0, 0, 0), prev = t;
    int runs = 0;
    while (t < ms(2026, 3, 10, 0, 0, 0)) {
        assert_int_equal(cron_next(&c, z, t, &t), 0);
        assert_int_equal(t - prev, 60000);
        prev = t, runs++;
    }
    assert_int_equal(runs, 3 * 1440);
    for (t = prev = ms(2026, 10, 31, 0, 0, 0); t < ms(2026, 11, 3, 0, 0, 0); prev = t) {
        assert_int_equal(cron_next(&c, z, t, &t), 0);
        /* the repeated hour is not run again: one 61-minute step */
        assert_true(t - prev == 60000 || (prev == ms(2026, 11, 1, 5, 59, 0) && t == ms(2026, 11, 1, 7, 0, 0)));
    }
}

/* ---- against a brute-force scan ------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void) { return testutil_rnd(&rng_state); }

/* A random field: *, N, N-M, lists, steps. */
static void rnd_field(char *out, size_t cap, int lo, int hi)
{
    size_t n = 0;
    int items = 1 + (int)(rnd() % 3);
    if (rnd() % 3 == 0) {
        if (rnd() % 2) snprintf(out, cap, "*");
        else snprintf(out, cap, "*/%d", 1 + (int)(rnd() % 7));
        return;
    }
    for (int i = 0; i < items; i++) {
        int a = lo + (int)(rnd() % (uint64_t)(hi - lo + 1));
        int b = a + (int)(rnd() % (uint64_t)(hi - a + 1));
        switch (rnd() % 4) {
        case 0: n += (size_t)snprintf(out + n, cap - n, "%s%d", i ? "," : "", a); break;
        case 1: n += (size_t)snprintf(out + n, cap - n, "%s%d-%d", i ? "," : "", a, b); break;
        case 2: n += (size_t)snprintf(out + n, cap - n, "%s%d-%d/%d", i ? "," : "", a, b, 1 + (int)(rnd() % 5)); break;
        default: n += (size_t)snprintf(out + n, cap - n, "%s%d/%d", i ? "," : "", a, 1 + (int)(rnd() % 7)); break;
        }
    }
}

static int matches(const cron_expr *c, int64_t t)
{
    static const tz *u;
    tz_civil v;
    if (!u) u = zone("UTC");
    tz_local(u, t, &v);
    int dom = (c->mday >> v.mday) & 1, dow = (c->wday >> v.wday) & 1;
    int day = c->dom_star || c->dow_star ? dom && dow : dom || dow;
    return ((c->sec >> v.sec) & 1) && ((c->min >> v.min) & 1) && ((c->hour >> v.hour) & 1) &&
           ((c->mon >> v.mon) & 1) && day;
}

static void test_random_model(void **state)
{
    (void)state;
    const char *seed = getenv("TICKD_TEST_SEED");
    rng_state = seed ? strtoull(seed, NULL, 10) : 13;
    int checked = 0, never = 0;
    for (int k = 0; k < 1000; k++) {
        char f[6][64], expr[400];
        int sec = rnd() % 4 == 0;
        rnd_field(f[0], 64, 0, 59);
        rnd_field(f[1], 64, 0, 59);
        rnd_field(f[2], 64, 0, 23);
        rnd_field(f[3], 64, 1, 31);
        rnd_field(f[4], 64, 1, 12);
        rnd_field(f[5], 64, 0, 7);
        snprintf(expr, sizeof(expr), "%s%s%s %s %s %s %s", sec ? f[0] : "", sec ? " " : "",
                 f[1], f[2], f[3], f[4], f[5]);
        cron_expr c;
        if (cron_parse(&c, expr, strlen(expr), err)) fail_msg("%s: %s", expr, err);
        /* scan at most 120 days, by second or minute from a random start */
        int64_t after = utc(2026, 1, 1, 0, 0, 0) * 1000 + (int64_t)(rnd() % (UINT64_C(3) * 365 * 86400000));
        int64_t got;
        int r = cron_next(&c, NULL, after, &got);
        int64_t step = sec ? 1 : 60, t = after / 1000 + 1;
        if (!sec) t = (t + 59) / 60 * 60;
        int64_t end = t + (sec ? 2 * 86400 : 120 * 86400);
        while (t < end && !matches(&c, t)) t += step;
        if (t < end) {
            if (r != 0 || got != t * 1000)
                fail_msg("%s after %" PRId64 ": got %d %" PRId64 ", scan %" PRId64, expr, after, r, got, t * 1000);
            checked++;
        } else if (r == 0) {
            /* beyond the scan: it must at least match and be later */
            assert_true(got / 1000 >= end && matches(&c, got / 1000));
        } else {
            never++;
        }
    }
    printf("test_random_model: %d expressions checked against the scan, %d never run\n", checked, never);
    assert_true(checked > 600);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_next_utc),
        cmocka_unit_test(test_dst),
        cmocka_unit_test(test_random_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
