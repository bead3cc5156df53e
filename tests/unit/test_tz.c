/* test_tz.c -- unit tests for tz: zones read from TZif files.
 *
 * Real zones come from the system's zoneinfo (package tzdata); the expected
 * instants were read off zdump. Crafted zones are written to a temp dir to
 * reach the parser's corners: v1 files, footers of every rule form, broken
 * files. test_cron_oracle.py also checks every system zone against CPython's
 * zoneinfo. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/tz.h"

#include "testutil.h"

static char err[256];

/* ---- calendar ------------------------------------------------------------ */

static void test_calendar(void **state)
{
    (void)state;
    /* against glibc's timegm, over 1900-2400 */
    for (int y = 1900; y <= 2400; y += 7)
        for (int m = 1; m <= 12; m++) {
            struct tm tm = {.tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = 28};
            assert_int_equal(tz_days_from_civil(y, m, 28) * 86400, (int64_t)timegm(&tm));
            int yy, mm, dd;
            tz_civil_from_days(tz_days_from_civil(y, m, 28), &yy, &mm, &dd);
            assert_true(yy == y && mm == m && dd == 28);
        }
    assert_int_equal(tz_days_in_month(2024, 2), 29);
    assert_int_equal(tz_days_in_month(2100, 2), 28);
    assert_int_equal(tz_days_in_month(2000, 2), 29);
    assert_int_equal(tz_days_in_month(2026, 4), 30);
    assert_int_equal(tz_days_from_civil(1970, 1, 1), 0);
}

/* ---- names --------------------------------------------------------------- */

static void test_names(void **state)
{
    (void)state;
    static const struct {
        const char *name, *why;
    } bad[] = {
        {"", "empty"},
        {"/etc/localtime", "absolute path"},
        {"../../etc/passwd", "'.'"},
        {"Europe/../../etc", "'.'"},
        {"Europe/./London", "'.'"},
        {"Europe//London", "empty path component"},
        {"Europe/London/", "empty path component"},
        {"Europe/Lon don", "outside"},
        {"Europe/London\n", "outside"},
        {"Europe\\London", "outside"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "too long"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(tz_get(bad[i].name, err));
        if (!strstr(err, bad[i].why)) fail_msg("%s: %s", bad[i].name, err);
        assert_non_null(strstr(err, "is not a time zone name"));
    }
    assert_null(tz_get("Mars/Olympus_Mons", err));
    assert_string_equal(err, "tz: unknown time zone 'Mars/Olympus_Mons'");
    assert_null(tz_get("Europe", err)); /* a directory */
    assert_string_equal(err, "tz: unknown time zone 'Europe'");

    /* cached: the same pointer every time; names with + - _ digits */
    const tz *a = zone("America/New_York");
    assert_ptr_equal(a, zone("America/New_York"));
    assert_string_equal(tz_name(a), "America/New_York");
    zone("Etc/GMT+5");
    zone("America/Port-au-Prince");
    zone("America/Argentina/Buenos_Aires");
}

static void *get_many(void *arg)
{
    (void)arg;
    char e[256];
    const tz *first = tz_get("Asia/Tokyo", e);
    for (int i = 0; i < 2000; i++)
        if (tz_get("Asia/Tokyo", e) != first || tz_get("Europe/Paris", e) == NULL) return NULL;
    return (void *)first;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t th[4];
    void *got[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, get_many, NULL);
    for (int i = 0; i < 4; i++) pthread_join(th[i], &got[i]);
    for (int i = 0; i < 4; i++) {
        assert_non_null(got[i]);
        assert_ptr_equal(got[i], got[0]);
    }
}

/* ---- real zones ------------------------------------------------------------ */

static void test_offsets(void **state)
{
    (void)state;
    const tz *ny = zone("America/New_York"), *lon = zone("Europe/London"),
             *lh = zone("Australia/Lord_Howe"), *ktm = zone("Asia/Kathmandu"),
             *sp = zone("America/Sao_Paulo"), *u = zone("UTC");
    /* 2026-03-08 07:00Z: New York springs forward */
    int64_t t = utc(2026, 3, 8, 7, 0, 0);
    assert_int_equal(tz_offset(ny, t - 1), -5 * 3600);
    assert_int_equal(tz_offset(ny, t), -4 * 3600);
    assert_int_equal(tz_next_change(ny, t - 1), t);
    assert_int_equal(tz_next_change(ny, t - 86400 * 30), t);
    assert_int_equal(tz_next_change(ny, t), utc(2026, 11, 1, 6, 0, 0));
    /* London: 2026-03-29 01:00Z and 2026-10-25 01:00Z */
    assert_int_equal(tz_offset(lon, utc(2026, 3, 29, 0, 59, 59)), 0);
    assert_int_equal(tz_offset(lon, utc(2026, 3, 29, 1, 0, 0)), 3600);
    assert_int_equal(tz_offset(lon, utc(2026, 10, 25, 1, 0, 0)), 0);
    /* Lord Howe: +10:30 / +11; 2026-10-04 02:00 local becomes 02:30 */
    assert_int_equal(tz_offset(lh, utc(2026, 7, 1, 0, 0, 0)), 37800);
    assert_int_equal(tz_offset(lh, utc(2026, 12, 1, 0, 0, 0)), 39600);
    assert_int_equal(tz_next_change(lh, utc(2026, 7, 1, 0, 0, 0)), utc(2026, 10, 3, 15, 30, 0));
    /* Kathmandu: +05:45 since 1986, +05:30 before */
    assert_int_equal(tz_offset(ktm, utc(2026, 1, 1, 0, 0, 0)), 20700);
    assert_int_equal(tz_offset(ktm, utc(1980, 1, 1, 0, 0, 0)), 19800);
    assert_int_equal(tz_next_change(ktm, utc(2026, 1, 1, 0, 0, 0)), INT64_MAX);
    /* Sao Paulo: -03 all year since 2019; DST in 2018 */
    assert_int_equal(tz_offset(sp, utc(2026, 1, 1, 0, 0, 0)), -3 * 3600);
    assert_int_equal(tz_offset(sp, utc(2018, 12, 1, 0, 0, 0)), -2 * 3600);
    assert_int_equal(tz_offset(u, utc(2026, 1, 1, 0, 0, 0)), 0);
    /* far past the table: the footer's rule (New York 2100: EDT in July) */
    assert_int_equal(tz_offset(ny, utc(2100, 7, 1, 0, 0, 0)), -4 * 3600);
    assert_int_equal(tz_offset(ny, utc(2100, 1, 1, 0, 0, 0)), -5 * 3600);
    assert_int_equal(tz_next_change(ny, utc(2100, 1, 1, 0, 0, 0)), utc(2100, 3, 14, 7, 0, 0));
    assert_int_equal(tz_offset(lh, utc(2200, 1, 1, 0, 0, 0)), 39600);
    /* before the first transition: local mean time */
    assert_int_equal(tz_offset(ny, utc(1800, 1, 1, 0, 0, 0)), -17762);
    /* clamped at the ends, no overflow */
    assert_int_equal(tz_offset(ny, INT64_MAX), tz_offset(ny, utc(9999, 12, 31, 0, 0, 0)));
    assert_int_equal(tz_offset(ny, INT64_MIN), -17762);
    assert_int_equal(tz_next_change(ny, INT64_MAX), INT64_MAX);
}

static void test_local(void **state)
{
    (void)state;
    tz_civil c;
    tz_local(zone("Asia/Kathmandu"), utc(2026, 12, 31, 18, 15, 7), &c);
    assert_true(c.year == 2027 && c.mon == 1 && c.mday == 1 && c.hour == 0 && c.min == 0 &&
                c.sec == 7 && c.wday == 5 && c.utoff_s == 20700);
    tz_local(zone("America/New_York"), utc(2026, 11, 1, 5, 30, 0), &c); /* first 01:30 */
    assert_true(c.hour == 1 && c.min == 30 && c.utoff_s == -4 * 3600 && c.wday == 0);
    tz_local(zone("America/New_York"), utc(2026, 11, 1, 6, 30, 0), &c); /* second 01:30 */
    assert_true(c.hour == 1 && c.min == 30 && c.utoff_s == -5 * 3600);
    tz_local(zone("UTC"), -1, &c);
    assert_true(c.year == 1969 && c.mon == 12 && c.mday == 31 && c.hour == 23 && c.sec == 59 &&
                c.wday == 3);
}

static void test_rfc3339(void **state)
{
    (void)state;
    char buf[TZ_RFC3339_MAX];
    assert_int_equal(tz_rfc3339(zone("America/New_York"), utc(2026, 3, 8, 7, 0, 0) * 1000, buf), 25);
    assert_string_equal(buf, "2026-03-08T03:00:00-04:00");
    tz_rfc3339(zone("Asia/Kathmandu"), utc(2026, 1, 1, 0, 0, 0) * 1000 + 250, buf);
    assert_string_equal(buf, "2026-01-01T05:45:00.250+05:45");
    tz_rfc3339(zone("UTC"), -1, buf);
    assert_string_equal(buf, "1969-12-31T23:59:59.999Z");
    tz_rfc3339(zone("Europe/London"), utc(2026, 1, 1, 0, 0, 0) * 1000, buf);
    assert_string_equal(buf, "2026-01-01T00:00:00+00:00");
    tz_rfc3339(zone("Australia/Lord_Howe"), utc(2026, 7, 1, 0, 0, 0) * 1000, buf);
    assert_string_equal(buf, "2026-07-01T10:30:00+10:30");
    tz_rfc3339(zone("America/New_York"), utc(1850, 1, 1, 0, 0, 0) * 1000, buf);
    assert_string_equal(buf, "1850-01-01T00:00:00Z"); /* LMT -4:56:02 */
}

static int64_t wall(int y, int mo, int d, int h, int mi)
{
    return utc(y, mo, d, h, mi, 0);
}

static void test_resolve(void **state)
{
    (void)state;
    const tz *ny = zone("America/New_York"), *lh = zone("Australia/Lord_Howe");
    int64_t u[2];
    /* gap: 02:30 on 2026-03-08 never happens; the gap ends at 07:00Z */
    assert_int_equal(tz_resolve(ny, wall(2026, 3, 8, 2, 30), u), 0);
    assert_int_equal(u[0], utc(2026, 3, 8, 7, 0, 0));
    assert_int_equal(tz_resolve(ny, wall(2026, 3, 8, 2, 0), u), 0);
    assert_int_equal(tz_resolve(ny, wall(2026, 3, 8, 1, 59) + 59, u), 1);
    assert_int_equal(u[0], utc(2026, 3, 8, 6, 59, 59));
    assert_int_equal(tz_resolve(ny, wall(2026, 3, 8, 3, 0), u), 1);
    assert_int_equal(u[0], utc(2026, 3, 8, 7, 0, 0));
    /* fold: 01:30 on 2026-11-01 happens at 05:30Z and 06:30Z */
    assert_int_equal(tz_resolve(ny, wall(2026, 11, 1, 1, 30), u), 2);
    assert_int_equal(u[0], utc(2026, 11, 1, 5, 30, 0));
    assert_int_equal(u[1], utc(2026, 11, 1, 6, 30, 0));
    assert_int_equal(tz_resolve(ny, wall(2026, 11, 1, 2, 0), u), 1);
    assert_int_equal(u[0], utc(2026, 11, 1, 7, 0, 0));
    /* Lord Howe's half-hour: gap 02:00-02:30 in October, fold 01:30-02:00 in April */
    assert_int_equal(tz_resolve(lh, wall(2026, 10, 4, 2, 15), u), 0);
    assert_int_equal(u[0], utc(2026, 10, 3, 15, 30, 0));
    assert_int_equal(tz_resolve(lh, wall(2026, 10, 4, 2, 30), u), 1);
    assert_int_equal(tz_resolve(lh, wall(2026, 4, 5, 1, 45), u), 2);
    assert_int_equal(u[1] - u[0], 1800);
    assert_int_equal(tz_resolve(lh, wall(2026, 4, 5, 1, 29), u), 1);
    /* Sao Paulo 2018-11-04: midnight itself was skipped */
    assert_int_equal(tz_resolve(zone("America/Sao_Paulo"), wall(2018, 11, 4, 0, 0), u), 0);
    assert_int_equal(u[0], utc(2018, 11, 4, 3, 0, 0));
    /* round trip over a year of quarter hours in each zone */
    const char *names[] = {"America/New_York", "Europe/London", "Australia/Lord_Howe",
                           "Asia/Kathmandu", "America/Sao_Paulo", "UTC"};
    for (size_t k = 0; k < 6; k++) {
        const tz *z = zone(names[k]);
        for (int64_t t = utc(2026, 1, 1, 0, 0, 0); t < utc(2027, 1, 1, 0, 0, 0); t += 900) {
            int64_t l = t + tz_offset(z, t);
            int n = tz_resolve(z, l, u);
            assert_true(n == 1 || n == 2);
            assert_true(u[0] == t || (n == 2 && u[1] == t));
        }
    }
}

/* ---- crafted zone files --------------------------------------------------------- */

static char dir[64];

static void put32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {v >> 24, v >> 16, v >> 8, v};
    fwrite(b, 1, 4, f);
}

/* Write a TZif file: version '\0' (v1, 32-bit data only) or '2'/'3' (a minimal
 * v1 block, then the 64-bit data and the footer). */
static void write_tzif(const char *name, char version, int ntrans, const int64_t *trans,
                       const unsigned char *idx, int ntypes, const int32_t *offs,
                       const char *footer, uint32_t leapcnt)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int pass = version ? 0 : 1; pass < 2; pass++) {
        int wide = version && pass == 1;
        int full = pass == 1;
        fwrite("TZif", 1, 4, f);
        fputc(version, f);
        for (int i = 0; i < 15; i++) fputc(0, f);
        uint32_t cnt[6] = {0, 0, full ? leapcnt : 0, full ? (uint32_t)ntrans : 0,
                           full ? (uint32_t)ntypes : 1, 4};
        for (int i = 0; i < 6; i++) put32(f, cnt[i]);
        if (!full) { /* the v1 block of a v2 file: one type, no transitions */
            put32(f, 0);
            fputc(0, f), fputc(0, f);
            fwrite("LMT", 1, 4, f);
            continue;
        }
        for (int i = 0; i < ntrans; i++) {
            if (wide) put32(f, (uint32_t)((uint64_t)trans[i] >> 32));
            put32(f, (uint32_t)trans[i]);
        }
        fwrite(idx, 1, (size_t)ntrans, f);
        for (int i = 0; i < ntypes; i++) {
            put32(f, (uint32_t)offs[i]);
            fputc(i > 0, f), fputc(0, f);
        }
        fwrite("ABC", 1, 4, f);
        for (uint32_t i = 0; i < leapcnt; i++) {
            if (wide) put32(f, 0);
            put32(f, 78796800 + i), put32(f, i + 1);
        }
    }
    if (version) fprintf(f, "\n%s\n", footer);
    fclose(f);
}

static void write_raw(const char *name, const void *b, size_t n)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tickd-tz-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    tz_set_dir(dir);
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) return -1;
    tz_set_dir(NULL);
    return 0;
}

static void test_crafted(void **state)
{
    (void)state;
    int64_t tr[2] = {utc(2000, 1, 1, 0, 0, 0), utc(2000, 6, 1, 0, 0, 0)};
    unsigned char ix[2] = {1, 0};
    int32_t offs[2] = {3600, 7200};

    /* v1: 32-bit times, no footer: the last type holds for ever */
    write_tzif("V1", '\0', 2, tr, ix, 2, offs, NULL, 0);
    const tz *z = zone("V1");
    assert_int_equal(tz_offset(z, tr[0] - 1), 3600);
    assert_int_equal(tz_offset(z, tr[0]), 7200);
    assert_int_equal(tz_offset(z, tr[1]), 3600);
    assert_int_equal(tz_offset(z, utc(2300, 1, 1, 0, 0, 0)), 3600);
    assert_int_equal(tz_next_change(z, tr[1]), INT64_MAX);

    /* v2 with a footer: US rules after the table */
    write_tzif("V2", '2', 2, tr, ix, 2, offs, "EST5EDT,M3.2.0,M11.1.0", 0);
    z = zone("V2");
    assert_int_equal(tz_offset(z, tr[0]), 7200);
    assert_int_equal(tz_offset(z, utc(2026, 1, 1, 0, 0, 0)), -5 * 3600);
    assert_int_equal(tz_offset(z, utc(2026, 3, 8, 7, 0, 0)), -4 * 3600);
    assert_int_equal(tz_offset(z, utc(2026, 3, 8, 6, 59, 59)), -5 * 3600);
    assert_int_equal(tz_offset(z, utc(2026, 11, 1, 6, 0, 0)), -5 * 3600);

    /* footer only, no transitions: quoted names, Julian days, times past 24h,
     * minutes in offsets, the southern hemisphere, negative DST (Dublin) */
    static const struct {
        const char *name, *footer;
        int64_t t;
        int off;
    } cases[] = {
        {"F1", "<+0545>-5:45", 1767225600, 20700},
        {"F2", "AEST-10AEDT,M10.1.0,M4.1.0/3", 1767225600, 39600},   /* January: summer */
        {"F3", "AEST-10AEDT,M10.1.0,M4.1.0/3", 1782864000, 36000},   /* July */
        {"F4", "IST-1GMT0,M10.5.0,M3.5.0/1", 1767225600, 0},         /* winter is "DST" */
        {"F5", "IST-1GMT0,M10.5.0,M3.5.0/1", 1782864000, 3600},
        {"F6", "XXX3YYY,J60/2,J300", 1767225600, -3 * 3600},         /* before Mar 1 */
        {"F7", "XXX3YYY,J60/2,J300", 1782864000, -2 * 3600},
        {"F8", "XXX3YYY2,59/2,299/-1", 1782864000, -2 * 3600},       /* zero-based days */
        {"F9", "EST5EDT,0/0,J365/25", 1767225600, -4 * 3600},        /* DST all year */
        {"F10", "EST5EDT,0/0,J365/25", 1782864000, -4 * 3600},
        {"F11", "<-03>3<-02>,M3.5.0/-2,M10.5.0/-1", 1782864000, -2 * 3600}, /* negative times */
        {"F12", "WART4WARST,J1/0,J365/25", 1782864000, -3 * 3600},
        {"F13", "ABC-14", 1767225600, 14 * 3600},
        {"F14", "ABC+12:30:15", 1767225600, -45015},
        {"F15", "EST5EDT", 1782864000, -4 * 3600}, /* no rule: the US rule */
        {"F16", "", 1767225600, 3600},              /* empty footer: the last type */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_tzif(cases[i].name, '3', cases[i].footer[0] ? 0 : 2, tr, ix, 2, offs,
                   cases[i].footer, 0);
        z = zone(cases[i].name);
        if (tz_offset(z, cases[i].t) != cases[i].off)
            fail_msg("%s \"%s\": %d, want %d", cases[i].name, cases[i].footer,
                     tz_offset(z, cases[i].t), cases[i].off);
    }
    /* DST all year has no change to report */
    assert_int_equal(tz_next_change(zone("F9"), 1767225600), INT64_MAX);
    /* Julian J60 is Mar 1 even in leap years; zero-based 59 is Feb 29 then */
    int64_t u[2];
    assert_int_equal(tz_next_change(zone("F6"), utc(2028, 1, 1, 0, 0, 0)), utc(2028, 3, 1, 5, 0, 0));
    assert_int_equal(tz_next_change(zone("F8"), utc(2028, 1, 1, 0, 0, 0)), utc(2028, 2, 29, 5, 0, 0));
    /* a gap at the footer's change resolves to it */
    assert_int_equal(tz_resolve(zone("V2"), utc(2030, 3, 10, 2, 30, 0), u), 0);
    assert_int_equal(u[0], utc(2030, 3, 10, 7, 0, 0));

    /* broken files name the zone and the reason, and are not cached */
    static const struct {
        const char *name, *footer, *why;
    } badf[] = {
        {"B1", "EST", "bad footer TZ string"},
        {"B2", "EST5EDT,M13.1.0,M11.1.0", "bad footer TZ string"},
        {"B3", "EST5EDT,M3.2.0", "bad footer TZ string"},
        {"B4", "E5", "bad footer TZ string"},
        {"B5", "<E>5", "bad footer TZ string"},
        {"B6", "EST25", "bad footer TZ string"},
        {"B7", "EST5EDT,J0,J365", "bad footer TZ string"},
        {"B8", "EST5EDT,M3.2.0/168,M11.1.0", "bad footer TZ string"},
    };
    for (size_t i = 0; i < sizeof(badf) / sizeof(badf[0]); i++) {
        write_tzif(badf[i].name, '2', 2, tr, ix, 2, offs, badf[i].footer, 0);
        assert_null(tz_get(badf[i].name, err));
        if (!strstr(err, badf[i].why) || !strstr(err, badf[i].name))
            fail_msg("%s: %s", badf[i].name, err);
    }
    write_tzif("Leap", '2', 2, tr, ix, 2, offs, "UTC0", 2);
    assert_null(tz_get("Leap", err));
    assert_non_null(strstr(err, "leap-second zones are not supported"));
    unsigned char bad_idx[2] = {0, 2};
    write_tzif("BadIdx", '2', 2, tr, bad_idx, 2, offs, "UTC0", 0);
    assert_null(tz_get("BadIdx", err));
    assert_non_null(strstr(err, "bad transition table"));
    int64_t unsorted[2] = {tr[1], tr[0]};
    write_tzif("Unsorted", '2', 2, unsorted, ix, 2, offs, "UTC0", 0);
    assert_null(tz_get("Unsorted", err));
    int32_t huge[2] = {3600, 27 * 3600};
    write_tzif("HugeOff", '2', 2, tr, ix, 2, huge, "UTC0", 0);
    assert_null(tz_get("HugeOff", err));
    assert_non_null(strstr(err, "bad local time type"));
    write_raw("Empty", "", 0);
    assert_null(tz_get("Empty", err));
    assert_string_equal(err, "tz: Empty: not a valid TZif file (no TZif magic)");
    write_raw("Text", "# not a zone\n", 13);
    assert_null(tz_get("Text", err));
    /* every truncation of a good file is refused, none crashes */
    char path[256];
    snprintf(path, sizeof(path), "%s/V2", dir);
    FILE *f = fopen(path, "rb");
    unsigned char buf[512];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    for (size_t k = 0; k < n; k++) { /* the footer's last newline is needed */
        char nm[32];
        snprintf(nm, sizeof(nm), "Cut%zu", k);
        write_raw(nm, buf, k);
        if (tz_get(nm, err)) fail_msg("a file cut at %zu of %zu bytes was accepted", k, n);
    }
    /* tz_parse: an image in memory, not cached, freed by the caller */
    char path2[256];
    snprintf(path2, sizeof(path2), "%s/V2", dir);
    f = fopen(path2, "rb");
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    tz *p = tz_parse("Mem", buf, n, err);
    assert_non_null(p);
    assert_int_equal(tz_offset(p, utc(2026, 3, 8, 7, 0, 0)), -4 * 3600);
    tz_free(p);
    assert_null(tz_parse("Mem", buf, n - 1, err));
    assert_string_equal(err, "tz: Mem: not a valid TZif file (bad footer)");
    /* transitions that keep the offset are not changes */
    int64_t tr3[3] = {tr[0], tr[1], utc(2001, 1, 1, 0, 0, 0)};
    unsigned char ix3[3] = {1, 2, 0};
    int32_t offs3[3] = {3600, 7200, 7200};
    write_tzif("Same", '2', 3, tr3, ix3, 3, offs3, "ABC-1", 0);
    assert_int_equal(tz_next_change(zone("Same"), tr[0]), utc(2001, 1, 1, 0, 0, 0));
    /* UTC is built in: no file needed */
    assert_non_null(tz_get("UTC", err));
    /* a zone that failed is retried: now the file is good */
    write_tzif("Text", '2', 2, tr, ix, 2, offs, "UTC0", 0);
    assert_non_null(tz_get("Text", err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calendar),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_local),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test_setup_teardown(test_crafted, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
