/* test_task.c -- unit tests for task.c: slice and id naming, keys, buckets,
 * RFC 3339 parsing, retry backoff and validation of the API's task JSON. */
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/task.h"
#include "model/task_spec.h"
#include "base/util.h"

#include "testutil.h"

/* 2026-11-22T05:00:00Z */
#define T0_MS INT64_C(1795323600000)

/* ---- helpers ----------------------------------------------------------- */

/* Parse the JSON text `json` as a task at now_ms; expect success. */
static void parse_ok_obj(const cJSON *obj, int64_t now_ms, task_input *out)
{
    char err[256] = "";
    int rc = task_input_parse(obj, now_ms, out, err, sizeof(err));
    if (rc != 0) fail_msg("task_input_parse failed: %s", err);
    assert_non_null(out->rec);
}

static void parse_ok(const char *json, int64_t now_ms, task_input *out)
{
    cJSON *obj = cJSON_Parse(json);
    if (!obj) fail_msg("bad test JSON: %s", json);
    parse_ok_obj(obj, now_ms, out);
    cJSON_Delete(obj);
}

/* Expect a parse error of `obj` whose message begins with `prefix`; returns
 * nothing, checks that nothing was left allocated in out. */
static void parse_err_obj(const cJSON *obj, int64_t now_ms, const char *prefix)
{
    char err[512] = "";
    task_input out;
    memset(&out, 0x5a, sizeof(out));
    int rc = task_input_parse(obj, now_ms, &out, err, sizeof(err));
    if (rc != -1) {
        char *s = cJSON_PrintUnformatted(obj);
        fprintf(stderr, "accepted: %s\n", s ? s : "?");
        free(s);
        task_input_free(&out);
        fail_msg("expected an error beginning with \"%s\"", prefix);
    }
    assert_null(out.rec);
    assert_prefix(err, prefix);
    /* the reason follows the field name */
    assert_true(strlen(err) > strlen(prefix) || prefix[strlen(prefix) - 1] != ' ');
}

static void parse_err(const char *json, int64_t now_ms, const char *prefix)
{
    cJSON *obj = cJSON_Parse(json);
    if (!obj) fail_msg("bad test JSON: %s", json);
    parse_err_obj(obj, now_ms, prefix);
    cJSON_Delete(obj);
}

/* The error message itself, for exact checks. */
static void parse_err_text(const char *json, int64_t now_ms, char *err, size_t errlen)
{
    task_input out;
    cJSON *obj = cJSON_Parse(json);
    if (!obj) fail_msg("bad test JSON: %s", json);
    err[0] = '\0';
    int rc = task_input_parse(obj, now_ms, &out, err, errlen);
    cJSON_Delete(obj);
    if (rc == 0) task_input_free(&out);
    assert_int_equal(rc, -1);
    assert_null(out.rec);
}

static cJSON *spec_of(const task_input *t)
{
    char *text = task_input_spec(t);
    cJSON *s = cJSON_Parse(text);
    if (!s) fail_msg("spec is not JSON: %s", text);
    free(text);
    return s;
}

static double num_field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v)) fail_msg("field %s is not a number", name);
    return v->valuedouble;
}

static const char *str_field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v)) fail_msg("field %s is not a string", name);
    return v->valuestring;
}

/* A task object with a valid callback_url, to add fields to. */
static cJSON *base_task(void)
{
    cJSON *o = cJSON_CreateObject();
    assert_non_null(o);
    assert_non_null(cJSON_AddStringToObject(o, "callback_url", "http://cb.test/hook"));
    return o;
}

/* ---- slices ------------------------------------------------------------ */

/* Slice names against libc's calendar (gmtime_r, strftime, timegm), an
 * implementation written elsewhere: every minute of random times from 1970
 * to 9999, and names of impossible minutes refused as timegm's round trip
 * refuses them. */
static void test_slice_against_libc(void **state)
{
    (void)state;
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t ms = (int64_t)(x % (uint64_t)TASK_TIME_MAX_MS);
        char mine[TASK_SLICE_MAX], libc[TASK_SLICE_MAX];
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&sec, &tm);
        size_t n = strftime(libc, sizeof(libc), "%Y%m%d%H%M", &tm);
        snprintf(libc + n, sizeof(libc) - n, ".%d", (int)(x >> 50) & 0x3ff);
        task_slice_name(ms, (int)(x >> 50) & 0x3ff, mine);
        assert_string_equal(mine, libc);
        /* again in the same minute (its digits kept), with another bucket:
         * the time's second and ms moved, never its minute */
        int64_t again = ms - (ms % 60000 + 60000) % 60000 + (int64_t)((x >> 20) % 60000);
        char same[TASK_SLICE_MAX], want[TASK_SLICE_MAX];
        task_slice_name(again, (int)(x >> 30) & 0x3ff, same);
        snprintf(want, sizeof(want), "%.*s.%d", (int)n, libc, (int)(x >> 30) & 0x3ff);
        assert_string_equal(same, want);
        assert_int_equal(task_slice_minute(mine), (int64_t)timegm(&tm) / 60);
        assert_int_equal(task_slice_bucket(mine), (int)(x >> 50) & 0x3ff);
        /* a name with one field pushed out of range: timegm would normalize it */
        char bad[TASK_SLICE_MAX];
        memcpy(bad, mine, sizeof(bad));
        int field = (int)(x >> 40) % 4;
        const char *over[4] = {"13", "32", "24", "60"};
        memcpy(bad + 4 + 2 * field, over[field], 2);
        assert_int_equal(task_slice_minute(bad), -1);
    }
    /* the bucket: the digits after the first dot, of a slice or an id */
    char id[TASK_ID_MAX];
    task_id_make("202611281200.17", INT64_C(1795872000000), "k.2", id, sizeof(id));
    assert_int_equal(task_slice_bucket(id), 17);
    assert_int_equal(task_slice_bucket("202611281200.0"), 0);
    assert_int_equal(task_slice_bucket("202611281200"), 0);
    assert_int_equal(task_slice_bucket("202611281200."), 0);
    assert_int_equal(task_slice_bucket("x.12ab"), 12);
    assert_int_equal(task_slice_bucket("x.99999999999999999999"), 999999999);
    /* days past each month's end */
    assert_int_equal(task_slice_minute("202502290000.0"), -1);
    assert_int_not_equal(task_slice_minute("202402290000.0"), -1);
    assert_int_equal(task_slice_minute("190002290000.0"), -1);
    assert_int_equal(task_slice_minute("202604310000.0"), -1);
    assert_int_equal(task_slice_minute("202600010000.0"), -1);
    assert_int_equal(task_slice_minute("202601000000.0"), -1);
    assert_int_equal(task_slice_minute("196912312359.0"), -1);
}

static void test_slice_name_known(void **state)
{
    (void)state;
    char s[TASK_SLICE_MAX];

    task_slice_name(0, 0, s);
    assert_string_equal(s, "197001010000.0");
    task_slice_name(T0_MS, 3, s);
    assert_string_equal(s, "202611220500.3");
    /* every ms of a minute is in the same slice */
    task_slice_name(T0_MS + 59999, 15, s);
    assert_string_equal(s, "202611220500.15");
    task_slice_name(T0_MS + 60000, 15, s);
    assert_string_equal(s, "202611220501.15");
    task_slice_name(T0_MS - 1, 0, s);
    assert_string_equal(s, "202611220459.0");
    /* year boundary */
    task_slice_name(INT64_C(1767225540000) + 59999, 7, s);
    assert_string_equal(s, "202512312359.7");
    task_slice_name(INT64_C(1767225600000), 7, s);
    assert_string_equal(s, "202601010000.7");
    /* month boundary */
    task_slice_name(INT64_C(1738367940000) + 59999, 1, s);
    assert_string_equal(s, "202501312359.1");
    task_slice_name(INT64_C(1738368000000), 1, s);
    assert_string_equal(s, "202502010000.1");
    /* leap day */
    task_slice_name(INT64_C(1709164800000), 0, s);
    assert_string_equal(s, "202402290000.0");
    task_slice_name(INT64_C(951827640000), 2, s);
    assert_string_equal(s, "200002291234.2");
    /* past 2038 */
    task_slice_name(INT64_C(2147483648000), 0, s);
    assert_string_equal(s, "203801190314.0");
    task_slice_name(INT64_C(4107542400000), 0, s);
    assert_string_equal(s, "210003010000.0");
    /* bucket suffix: largest bucket count, up to 4 digits */
    task_slice_name(T0_MS, 1023, s);
    assert_string_equal(s, "202611220500.1023");
    task_slice_name(T0_MS, 9999, s);
    assert_string_equal(s, "202611220500.9999");
    assert_true(strlen(s) < TASK_SLICE_MAX);
}

static void test_slice_minute_round_trip(void **state)
{
    (void)state;
    char s[TASK_SLICE_MAX];
    const int64_t times[] = {0, 60000, T0_MS, T0_MS + 59999, INT64_C(1767225540000),
                             INT64_C(1767225600000), INT64_C(1709164800000),
                             INT64_C(951827640000), INT64_C(2147483648000),
                             INT64_C(4107542400000), INT64_C(253402300799000)};
    for (size_t i = 0; i < sizeof(times) / sizeof(*times); i++) {
        for (int b = 0; b < 1024; b += 341) {
            task_slice_name(times[i], b, s);
            assert_int_equal(task_slice_minute(s), times[i] / 60000);
        }
    }
    /* every minute of a leap year's February and the turn of the year */
    for (int64_t m = INT64_C(1706745600000) / 60000; m < INT64_C(1709251200000) / 60000;
         m += 7) {
        task_slice_name(m * 60000 + 123, 0, s);
        assert_int_equal(task_slice_minute(s), m);
    }
    assert_int_equal(task_slice_minute("202611220500.0"), T0_MS / 60000);
    /* the bucket does not matter */
    assert_int_equal(task_slice_minute("202611220500.1023"), T0_MS / 60000);
}

static void test_slice_minute_malformed(void **state)
{
    (void)state;
    assert_int_equal(task_slice_minute(""), -1);
    assert_int_equal(task_slice_minute("2026"), -1);
    assert_int_equal(task_slice_minute("20261122050"), -1);
    assert_int_equal(task_slice_minute("202611220500"), -1);      /* no '.' */
    assert_int_equal(task_slice_minute("202611220500-0"), -1);
    assert_int_equal(task_slice_minute("20261122050a.0"), -1);
    assert_int_equal(task_slice_minute("2026-1122050.0"), -1);
    assert_int_equal(task_slice_minute(" 02611220500.0"), -1);
    assert_int_equal(task_slice_minute("2026112205000.0"), -1);   /* 13 digits */
    assert_int_equal(task_slice_minute("x"), -1);
    /* out-of-range fields name no real minute */
    assert_int_equal(task_slice_minute("202613010000.0"), -1);
    assert_int_equal(task_slice_minute("202602300000.0"), -1);
    assert_int_equal(task_slice_minute("202611222400.0"), -1);
    assert_int_equal(task_slice_minute("202611220560.0"), -1);
    assert_int_equal(task_slice_minute("202600010000.0"), -1);
    assert_int_equal(task_slice_minute("000001010000.0"), -1);
}

/* ---- ids --------------------------------------------------------------- */

static void test_id_round_trip(void **state)
{
    (void)state;
    char slice[TASK_SLICE_MAX], id[TASK_ID_MAX], s2[TASK_SLICE_MAX];
    char key[TASK_KEY_MAX + 1], k2[TASK_KEY_MAX + 1];
    int64_t at;
    const char *keys[] = {"a", "order-42", "a.b.c", "x:y_z-0.9", "1.2.3", "...", "0"};

    for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
        task_slice_name(T0_MS + 250, task_bucket(keys[i], 16), slice);
        task_id_make(slice, T0_MS + 250, keys[i], id, sizeof(id));
        assert_int_equal(task_id_parse(id, s2, &at, k2), 0);
        assert_string_equal(s2, slice);
        assert_int_equal(at, T0_MS + 250);
        assert_string_equal(k2, keys[i]);
        assert_int_equal(task_id_at(id), T0_MS + 250);
    }
    assert_int_equal(task_id_at("202611220500.3"), -1);
    assert_int_equal(task_id_at("202611220500.3.k"), -1);

    task_id_make("202611220500.3", T0_MS, "order-42", id, sizeof(id));
    assert_string_equal(id, "202611220500.3.1795323600000.order-42");

    /* longest key, 4-digit bucket, execute_at 0 */
    memset(key, 'k', TASK_KEY_MAX);
    key[TASK_KEY_MAX] = '\0';
    task_slice_name(0, 1023, slice);
    task_id_make(slice, 0, key, id, sizeof(id));
    assert_true(strlen(id) < TASK_ID_MAX);
    assert_int_equal(task_id_parse(id, s2, &at, k2), 0);
    assert_string_equal(s2, "197001010000.1023");
    assert_int_equal(at, 0);
    assert_string_equal(k2, key);

    /* a random key */
    task_key_random(key);
    task_slice_name(T0_MS, 9, slice);
    task_id_make(slice, INT64_C(999999999999999), key, id, sizeof(id));
    assert_int_equal(task_id_parse(id, s2, &at, k2), 0);
    assert_int_equal(at, INT64_C(999999999999999));
    assert_string_equal(k2, key);

    /* same key and execute_at, same id */
    char id2[TASK_ID_MAX];
    task_id_make(slice, T0_MS, "k", id, sizeof(id));
    task_id_make(slice, T0_MS, "k", id2, sizeof(id2));
    assert_string_equal(id, id2);
}

static void test_cursor_valid(void **state)
{
    (void)state;
    const char *id = "202611261200.3.1795000000000.k:1";
    char c[400];
    snprintf(c, sizeof(c), "202611261200.3~1795000000000~%s", id);
    assert_true(task_cursor_valid(c));
    const char *bad[] = {"202611261200.3~..~", "202611261200.3~1e5~", "202611261200.3~+5~",
                         "202611261200.3~~", "202611261200.~5~", "202611261200.12345~5~",
                         "202611261200.3x~5~", "202613261200.3~5~", "202611261200.3~-5~",
                         "202611261200.3~12345678901234567~", "~5~", "202611261200.3~5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(c, sizeof(c), "%s%s", bad[i], id);
        if (task_cursor_valid(c)) fail_msg("valid: %s", c);
    }
    snprintf(c, sizeof(c), "202611261200.3~5~%s~", id);
    assert_false(task_cursor_valid(c));
    assert_false(task_cursor_valid("202611261200.3~5~202611261200.3.1.a/b"));
    assert_false(task_cursor_valid(""));
}

static void test_id_malformed(void **state)
{
    (void)state;
    char slice[TASK_SLICE_MAX], key[TASK_KEY_MAX + 1];
    int64_t at;
    char longkey[300];
    const char *bad[] = {
        "",
        "2026",
        "202611220500",                       /* slice without bucket */
        "202611220500.",                      /* nothing after the slice */
        "202611220500.3",                     /* no execute_at, no key */
        "202611220500.3.",                    /* ditto */
        "202611220500.3.1795323600000",       /* no key */
        "202611220500.3.1795323600000.",      /* empty key */
        "202611220500..1795323600000.k",      /* empty bucket */
        "202611220500.x.1795323600000.k",     /* bucket not digits */
        "202611220500.12345.1795323600000.k", /* bucket over 4 digits */
        "202611220500.3..k",                  /* empty execute_at */
        "202611220500.3.-1.k",                /* negative execute_at */
        "202611220500.3.+1.k",
        "202611220500.3.12a.k",
        "202611220500.3.1234567890123456.k",  /* execute_at over 15 digits */
        "202611220500.3.1795323600000.k/y",   /* bad key chars */
        "202611220500.3.1795323600000.k y",
        "202611220500.3.1795323600000.k%20",
        "202611220500.3.1795323600000.ké",
        "20261122050x.3.1795323600000.k",     /* bad slice */
        "2026112205000.3.1795323600000.k",
        "202611220500-3.1795323600000.k",
        "x02611220500.3.1795323600000.k",
        "202611220500.3-1795323600000.k",
        "202611220500.3.1795323600000-k",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        if (task_id_parse(bad[i], slice, &at, key) != -1)
            fail_msg("accepted malformed id \"%s\"", bad[i]);
    }
    /* key of 201 characters */
    int n = snprintf(longkey, sizeof(longkey), "202611220500.3.1795323600000.");
    memset(longkey + n, 'k', TASK_KEY_MAX + 1);
    longkey[n + TASK_KEY_MAX + 1] = '\0';
    assert_int_equal(task_id_parse(longkey, slice, &at, key), -1);
    longkey[n + TASK_KEY_MAX] = '\0';
    assert_int_equal(task_id_parse(longkey, slice, &at, key), 0);
}

/* ---- keys -------------------------------------------------------------- */

static void test_key_valid(void **state)
{
    (void)state;
    char k[TASK_KEY_MAX + 2];

    assert_false(task_key_valid(""));
    assert_true(task_key_valid("a"));
    assert_true(task_key_valid("AZaz09._:-"));
    assert_true(task_key_valid("."));
    assert_true(task_key_valid("order:2026-11-22_05.00"));

    memset(k, 'x', TASK_KEY_MAX);
    k[TASK_KEY_MAX] = '\0';
    assert_true(task_key_valid(k));        /* 200 */
    k[TASK_KEY_MAX] = 'x';
    k[TASK_KEY_MAX + 1] = '\0';
    assert_false(task_key_valid(k));       /* 201 */
    k[TASK_KEY_MAX - 1] = '\0';
    assert_true(task_key_valid(k));        /* 199 */

    const char *bad[] = {" ", "a b", "a/b", "a?b", "a#b", "a%b", "a+b", "a=b", "a&b",
                         "a\tb", "a\nb", "\"", "'", "a,b", "a;b", "a@b", "a~b", "a*b",
                         "ä", "a\x7f", "\xff"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        if (task_key_valid(bad[i])) fail_msg("accepted key \"%s\"", bad[i]);
    /* a bad character at the very end of a 200-character key */
    memset(k, 'x', TASK_KEY_MAX);
    k[TASK_KEY_MAX - 1] = '/';
    k[TASK_KEY_MAX] = '\0';
    assert_false(task_key_valid(k));
}

static void test_key_random(void **state)
{
    (void)state;
    char a[64], b[64];
    memset(a, '#', sizeof(a));
    task_key_random(a);
    task_key_random(b);
    assert_int_equal(strlen(a), 22);
    assert_int_equal(strlen(b), 22);
    assert_true(task_key_valid(a));
    assert_true(task_key_valid(b));
    assert_string_not_equal(a, b);
    assert_int_equal(a[23], '#'); /* writes exactly 23 bytes */
    for (int i = 0; i < 1000; i++) {
        task_key_random(a);
        assert_int_equal(strlen(a), 22);
        for (const char *p = a; *p; p++)
            assert_true((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                        (*p >= '0' && *p <= '9'));
    }
}

/* ---- buckets ----------------------------------------------------------- */

static void test_bucket_known_and_stable(void **state)
{
    (void)state;
    /* FNV-1a 32: "" 0x811c9dc5, "a" 0xe40c292c, "foobar" 0xbf9cf968 */
    assert_int_equal(task_bucket("", 16), 0x811c9dc5u % 16);
    assert_int_equal(task_bucket("a", 16), 0xe40c292cu % 16);
    assert_int_equal(task_bucket("foobar", 16), 0xbf9cf968u % 16);
    assert_int_equal(task_bucket("foobar", 1024), 0xbf9cf968u % 1024);
    assert_int_equal(task_bucket("order-42", 16), 4);
    assert_int_equal(task_bucket("order-42", 16), task_bucket("order-42", 16));
    assert_int_equal(task_bucket("anything", 1), 0);
    /* high bit set: the hash is unsigned, the bucket never negative */
    assert_int_equal(task_bucket("a", 7), (int)(0xe40c292cu % 7));
}

static void test_bucket_spread(void **state)
{
    (void)state;
    enum { N = 10000, B = 16 };
    int count[B] = {0};
    char k[32];
    for (int i = 0; i < N; i++) {
        task_key_random(k);
        int b = task_bucket(k, B);
        assert_in_range(b, 0, B - 1);
        assert_int_equal(task_bucket(k, B), b);
        count[b]++;
    }
    /* expect 625 each, sd ~24: +-5 sd */
    for (int b = 0; b < B; b++)
        if (count[b] < 500 || count[b] > 750)
            fail_msg("bucket %d got %d of %d keys", b, count[b], N);

    /* sequential keys, the usual case, also spread */
    int seq[B] = {0};
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "order-%d", i);
        seq[task_bucket(k, B)]++;
    }
    for (int b = 0; b < B; b++)
        if (seq[b] < 450 || seq[b] > 800)
            fail_msg("bucket %d got %d of %d sequential keys", b, seq[b], N);

    /* in range for other counts */
    for (int buckets = 1; buckets <= 1024; buckets = buckets * 3 + 1)
        for (int i = 0; i < 200; i++) {
            snprintf(k, sizeof(k), "k%d", i);
            assert_in_range(task_bucket(k, buckets), 0, buckets - 1);
        }
}

/* ---- RFC 3339 ---------------------------------------------------------- */

static void rfc_ok(const char *s, int64_t want)
{
    char err[160] = "";
    int64_t ms = -12345;
    if (task_parse_rfc3339(s, &ms, err, sizeof(err)) != 0)
        fail_msg("rejected \"%s\": %s", s, err);
    if (ms != want)
        fail_msg("\"%s\": got %lld, want %lld", s, (long long)ms, (long long)want);
}

static void rfc_bad(const char *s, const char *why)
{
    char err[160] = "";
    int64_t ms = 0;
    if (task_parse_rfc3339(s, &ms, err, sizeof(err)) != -1)
        fail_msg("accepted \"%s\" as %lld", s, (long long)ms);
    assert_true(err[0] != '\0');
    if (!strstr(err, why)) fail_msg("\"%s\": error \"%s\" lacks \"%s\"", s, err, why);
}

static void test_rfc3339_valid(void **state)
{
    (void)state;
    rfc_ok("2026-11-22T05:00:00Z", T0_MS);
    rfc_ok("2026-11-22t05:00:00z", T0_MS);
    rfc_ok("1970-01-01T00:00:00Z", 0);
    rfc_ok("1970-01-01T00:00:00.001Z", 1);
    rfc_ok("2026-11-22T05:00:00.250Z", T0_MS + 250);
    rfc_ok("2026-11-22T05:00:00.5Z", T0_MS + 500);
    rfc_ok("2026-11-22T05:00:00.05Z", T0_MS + 50);
    rfc_ok("2026-11-22T05:00:00.999Z", T0_MS + 999);
    rfc_ok("2026-11-22T05:00:00.123456789Z", T0_MS + 123); /* truncated to ms */
    rfc_ok("2026-11-22T05:00:00.000000Z", T0_MS);
    rfc_ok("2026-11-22T07:00:00+02:00", T0_MS);
    rfc_ok("2026-11-22T00:30:00-04:30", T0_MS);
    rfc_ok("2026-11-22T05:00:00+00:00", T0_MS);
    rfc_ok("2026-11-22T05:00:00-00:00", T0_MS);
    rfc_ok("2026-11-22T07:00:00.250+02:00", T0_MS + 250);
    rfc_ok("2026-11-23T04:59:00+23:59", T0_MS);
    rfc_ok("2026-11-21T05:01:00-23:59", T0_MS);
    /* offsets across a day and a year */
    rfc_ok("2026-01-01T01:00:00+01:00", INT64_C(1767225600000));
    rfc_ok("2025-12-31T23:00:00-01:00", INT64_C(1767225600000));
    /* leap days */
    rfc_ok("2024-02-29T00:00:00Z", INT64_C(1709164800000));
    rfc_ok("2000-02-29T12:34:00Z", INT64_C(951827640000));
    rfc_ok("2038-01-19T03:14:08Z", INT64_C(2147483648000));
    rfc_ok("2100-03-01T00:00:00Z", INT64_C(4107542400000));
    /* month ends */
    rfc_ok("2025-01-31T23:59:00Z", INT64_C(1738367940000));
    rfc_ok("2025-12-31T23:59:00Z", INT64_C(1767225540000));
    rfc_ok("2025-04-30T00:00:00Z", INT64_C(1745971200000));
    /* a leap second is held on :59 */
    rfc_ok("2016-12-31T23:59:60Z", INT64_C(1483228799000));
    /* the bounds: 1970 to the last ms of 9999, offsets included */
    rfc_ok("1970-01-01T01:00:00+01:00", 0);
    rfc_ok("9999-12-31T23:59:59.999Z", TASK_TIME_MAX_MS);
    rfc_ok("9999-12-31T23:59:59.999999Z", TASK_TIME_MAX_MS);
    rfc_ok("9999-12-31T23:59:60.999Z", TASK_TIME_MAX_MS);
    rfc_ok("9999-12-31T00:00:00-23:59", TASK_TIME_MAX_MS - 999 - 60000 + 1000);
}

static void test_time_bounds(void **state)
{
    (void)state;
    rfc_bad("1969-12-31T23:59:59Z", "before 1970");
    rfc_bad("1970-01-01T00:59:59+01:00", "before 1970");
    rfc_bad("0000-01-01T00:00:00Z", "before 1970");
    rfc_bad("9999-12-31T23:59:59.999-00:01", "after 9999-12-31T23:59:59.999Z");
    /* one parser for JSON numbers, JSON strings and query text */
    char err[300];
    int64_t ms = -5;
    cJSON *v = cJSON_Parse("[253402300799999, 253402300800000, -1, 1.5, 1e-400, 1e400, "
                           "\"9999-12-31T23:59:59.999Z\", \"99999999999999999999\", "
                           "\"1969-12-31T23:59:59Z\", true, 0]");
    const int ok[] = {1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1};
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        err[0] = '\0';
        int rc = task_json_time(e, "start_at", &ms, err, sizeof(err));
        if ((rc == 0) != ok[i]) fail_msg("item %d: rc %d: %s", i, rc, err);
        if (rc != 0 && strncmp(err, "start_at: ", 10) != 0) fail_msg("item %d: %s", i, err);
    }
    cJSON_Delete(v);
    assert_int_equal(task_text_time("253402300799999", "to", &ms, err, sizeof(err)), 0);
    assert_int_equal(ms, TASK_TIME_MAX_MS);
    assert_int_equal(task_text_time("0", "to", &ms, err, sizeof(err)), 0);
    assert_int_equal(ms, 0);
    const char *bad[] = {"253402300800000", "99999999999999999999", "-1", "", "1e5", " 5",
                         "1969-12-31T23:59:59Z", "0x10"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
        if (task_text_time(bad[k], "from", &ms, err, sizeof(err)) == 0)
            fail_msg("accepted \"%s\" as %lld", bad[k], (long long)ms);
        assert_true(strncmp(err, "from: ", 6) == 0);
    }
}

static void test_json_num_bounds(void **state)
{
    (void)state;
    double d;
    int64_t n;
    cJSON *v = cJSON_Parse("[0.0001, 1000000, 0.12345678901234, 0.123456789012345, 5e-324, "
                           "1e400, 9007199254740991, 9007199254740993, 1.5, -0.0]");
    const cJSON *e = v->child;
    assert_int_equal(task_json_num(e, 0.0001, 1e6, 0, &d), 0);
    assert_true(d == 0.0001);
    assert_int_equal(task_json_num(e = e->next, 0.0001, 1e6, 0, &d), 0);
    assert_int_equal(task_json_num(e = e->next, 0.0001, 1e6, 0, &d), 0);   /* 14 digits */
    assert_int_equal(task_json_num(e = e->next, 0.0001, 1e6, 0, &d), -1);  /* 15 */
    assert_int_equal(task_json_num(e = e->next, 0.0001, 1e6, 0, &d), -1);  /* 5e-324 */
    assert_int_equal(task_json_num(e = e->next, 0, HUGE_VAL, 0, &d), -1);  /* inf */
    assert_int_equal(task_json_int(e = e->next, 0, INT64_MAX, &n), 0);
    assert_int_equal(n, INT64_C(9007199254740991));
    assert_int_equal(task_json_int(e = e->next, 0, INT64_MAX, &n), -1);    /* past 2^53 */
    assert_int_equal(task_json_int(e = e->next, 0, 10, &n), -1);           /* 1.5 */
    assert_int_equal(task_json_int(e = e->next, 0, 10, &n), 0);            /* -0 */
    assert_int_equal(n, 0);
    cJSON_Delete(v);
    /* what cJSON reads as another number is found in the text */
    char err[300];
    const char *lost[][2] = {{"{\"req\":{\"x\":1e-400}}", "req.x: a number"},
                             {"[0, -1E-999]", "[1]: a number"},
                             {"{\"a\":[{\"b\":2e308}]}", "a[0].b: a number"},
                             {"1e-400", "body: a number"},
                             {"{\"s\":\"1e-400\",\"z\":[0,0e-400,-0.0,0.000]}", NULL}};
    for (size_t k = 0; k < sizeof(lost) / sizeof(*lost); k++) {
        err[0] = '\0';
        int rc = task_json_check(lost[k][0], strlen(lost[k][0]), err, sizeof(err));
        if (!lost[k][1]) {
            if (rc != 0) fail_msg("%s: %s", lost[k][0], err);
        } else if (rc != -1 || strncmp(err, lost[k][1], strlen(lost[k][1])) != 0) {
            fail_msg("%s: %d %s", lost[k][0], rc, err);
        }
    }
}

static void test_rfc3339_invalid(void **state)
{
    (void)state;
    const char *fmt = "RFC 3339";
    const char *date = "not a valid date";

    rfc_bad("", fmt);
    rfc_bad("2026-11-22", fmt);
    rfc_bad("2026-11-22T05:00", fmt);
    rfc_bad("2026-11-22T05:00:00", fmt);          /* short, no zone */
    rfc_bad("2026-11-22 05:00:00Z", fmt);
    rfc_bad("2026/11/22T05:00:00Z", fmt);
    rfc_bad("26-11-22T05:00:00Z", fmt);
    rfc_bad("2026-1-22T05:00:00Z", fmt);
    rfc_bad("2026-11-22T5:00:00Z", fmt);
    rfc_bad("2026-11-22T05:00:0Z", fmt);
    rfc_bad("2026-11-22X05:00:00Z", fmt);
    rfc_bad("+026-11-22T05:00:00Z", fmt);
    rfc_bad("tomorrow at noon please", fmt);
    rfc_bad("1795323600000", fmt);

    rfc_bad("2026-00-22T05:00:00Z", date);
    rfc_bad("2026-13-22T05:00:00Z", date);
    rfc_bad("2026-11-00T05:00:00Z", date);
    rfc_bad("2026-11-31T05:00:00Z", date);
    rfc_bad("2026-04-31T05:00:00Z", date);
    rfc_bad("2026-01-32T05:00:00Z", date);
    rfc_bad("2026-02-30T05:00:00Z", date);
    rfc_bad("2025-02-29T05:00:00Z", date);       /* not a leap year */
    rfc_bad("1900-02-29T05:00:00Z", date);       /* century, not a leap year */
    rfc_bad("2100-02-29T05:00:00Z", date);
    rfc_bad("2026-11-22T24:00:00Z", date);
    rfc_bad("2026-11-22T05:60:00Z", date);
    rfc_bad("2026-11-22T05:00:61Z", date);
    rfc_bad("2026-11-22T99:99:99Z", date);

    rfc_bad("2026-11-22T05:00:00.Z", "empty fraction");
    rfc_bad("2026-11-22T05:00:00.", "empty fraction");
    rfc_bad("2026-11-22T05:00:00+02", "bad offset");
    rfc_bad("2026-11-22T05:00:00+2:00", "bad offset");
    rfc_bad("2026-11-22T05:00:00+0200", "bad offset");
    rfc_bad("2026-11-22T05:00:00+24:00", "bad offset");
    rfc_bad("2026-11-22T05:00:00+02:60", "bad offset");
    rfc_bad("2026-11-22T05:00:00+", "bad offset");
    rfc_bad("2026-11-22T05:00:00-", "bad offset");
    rfc_bad("2026-11-22T05:00:00-ab:cd", "bad offset");
    rfc_bad("2026-11-22T05:00:00 ", "missing Z or offset");
    rfc_bad("2026-11-22T05:00:00UTC", "missing Z or offset");
    rfc_bad("2026-11-22T05:00:00.250", "missing Z or offset");
    rfc_bad("2026-11-22T05:00:00,250Z", "missing Z or offset");
    rfc_bad("2026-11-22T05:00:00ZZ", "trailing");
    rfc_bad("2026-11-22T05:00:00Z ", "trailing");
    rfc_bad("2026-11-22T05:00:00Zjunk", "trailing");
    rfc_bad("2026-11-22T05:00:00+02:00:00", "trailing");
    rfc_bad("2026-11-22T05:00:00+02:00Z", "trailing");
    rfc_bad("2026-11-22T05:00:00.25xZ", "missing Z or offset");
}

/* ---- backoff ----------------------------------------------------------- */

static void test_backoff_doubling_and_cap(void **state)
{
    (void)state;
    assert_int_equal(task_backoff_ms(1000, 1, 0.0), 1000);
    assert_int_equal(task_backoff_ms(1000, 2, 0.0), 2000);
    assert_int_equal(task_backoff_ms(1000, 3, 0.0), 4000);
    assert_int_equal(task_backoff_ms(1000, 4, 0.0), 8000);
    assert_int_equal(task_backoff_ms(1000, 12, 0.0), 2048000);
    assert_int_equal(task_backoff_ms(1000, 13, 0.0), TASK_BACKOFF_CAP_MS); /* 4096000 */
    assert_int_equal(task_backoff_ms(1000, 100, 0.0), TASK_BACKOFF_CAP_MS);
    assert_int_equal(task_backoff_ms(1000, 1000000, 0.0), TASK_BACKOFF_CAP_MS);
    assert_int_equal(task_backoff_ms(1, 1, 0.0), 1);
    assert_int_equal(task_backoff_ms(1, 10, 0.0), 512);
    assert_int_equal(task_backoff_ms(1, 99, 0.0), TASK_BACKOFF_CAP_MS);
    assert_int_equal(task_backoff_ms(3600000, 1, 0.0), TASK_BACKOFF_CAP_MS);
    assert_int_equal(task_backoff_ms(3600000, 2, 0.0), TASK_BACKOFF_CAP_MS);
    assert_int_equal(task_backoff_ms(86400000, 1, 0.0), TASK_BACKOFF_CAP_MS);
    assert_int_equal(task_backoff_ms(86400000, 100, 0.0), TASK_BACKOFF_CAP_MS);
    /* base * 2^(n-1) for a range of bases and attempts */
    for (int64_t base = 1; base <= 86400000; base = base * 7 + 3)
        for (int n = 1; n <= 100; n++) {
            int64_t want = base;
            for (int i = 1; i < n && want < TASK_BACKOFF_CAP_MS; i++) want *= 2;
            if (want > TASK_BACKOFF_CAP_MS) want = TASK_BACKOFF_CAP_MS;
            assert_int_equal(task_backoff_ms(base, n, 0.0), want);
        }
}

static void test_backoff_jitter(void **state)
{
    (void)state;
    const double js[] = {0.0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999, 0.999999999};
    const int64_t bases[] = {1, 2, 5, 10, 1000, 1234, 60000, 86400000};
    for (size_t b = 0; b < sizeof(bases) / sizeof(*bases); b++)
        for (int n = 1; n <= 20; n++) {
            int64_t full = task_backoff_ms(bases[b], n, 0.0), prev = full;
            for (size_t j = 0; j < sizeof(js) / sizeof(*js); j++) {
                int64_t d = task_backoff_ms(bases[b], n, js[j]);
                assert_true(d >= 1);
                assert_true(d <= full);
                /* at least 80 % of the undithered wait */
                assert_true(d * 5 >= full * 4);
                /* more jitter, never a longer wait */
                assert_true(d <= prev);
                prev = d;
            }
        }
    assert_int_equal(task_backoff_ms(1000, 1, 0.5), 900);
    assert_int_equal(task_backoff_ms(1000, 1, 0.999999), 801); /* the cut is truncated */
    assert_int_equal(task_backoff_ms(1000, 1, 0.2), 960);
    assert_int_equal(task_backoff_ms(TASK_BACKOFF_CAP_MS, 1, 0.5), 3240000);
    /* never below 1 */
    assert_int_equal(task_backoff_ms(1, 1, 0.999), 1);
    assert_int_equal(task_backoff_ms(0, 1, 0.5), 1);
    assert_int_equal(task_backoff_ms(0, 5, 0.0), 1);
}

/* ---- task_input_parse: success ----------------------------------------- */

static void test_input_defaults(void **state)
{
    (void)state;
    task_input t;
    parse_ok("{\"callback_url\":\"http://cb.test/hook\"}", T0_MS, &t);

    assert_int_equal(strlen(t.key), 22);
    assert_true(task_key_valid(t.key));
    assert_int_equal(t.execute_at_ms, T0_MS);
    assert_int_equal(t.due_ms, T0_MS);
    assert_int_equal(t.timeout_ms, 10000);
    assert_int_equal(t.max_attempts, 5);

    cJSON *s = spec_of(&t);
    assert_string_equal(str_field(s, "key"), t.key);
    assert_string_equal(str_field(s, "callback_url"), "http://cb.test/hook");
    assert_string_equal(str_field(s, "method"), "POST");
    assert_true(num_field(s, "execute_at") == (double)T0_MS);
    assert_true(num_field(s, "timeout_ms") == 10000);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "retry");
    assert_true(cJSON_IsObject(r));
    assert_true(num_field(r, "max_attempts") == 5);
    assert_true(num_field(r, "backoff_ms") == 1000);
    assert_null(cJSON_GetObjectItemCaseSensitive(s, "header"));
    assert_null(cJSON_GetObjectItemCaseSensitive(s, "req"));
    assert_null(cJSON_GetObjectItemCaseSensitive(s, "delay_ms"));
    cJSON_Delete(s);
    task_input_free(&t);
    assert_null(t.rec);
    task_input_free(&t); /* twice is harmless */

    /* two tasks without a key get different keys */
    task_input a, b;
    parse_ok("{\"callback_url\":\"http://cb.test/hook\"}", T0_MS, &a);
    parse_ok("{\"callback_url\":\"http://cb.test/hook\"}", T0_MS, &b);
    assert_string_not_equal(a.key, b.key);
    task_input_free(&a);
    task_input_free(&b);
}

static void test_input_all_fields(void **state)
{
    (void)state;
    task_input t;
    parse_ok("{\"key\":\"order-42\",\"callback_url\":\"https://cb.test:8443/h?x=1&y=2\","
             "\"method\":\"PUT\",\"header\":{\"X-Sig\":\"abc\",\"Content-Type\":\"text/plain\"},"
             "\"req\":{\"a\":[1,2,{\"b\":null}]},\"execute_at\":1795323660000,"
             "\"retry\":{\"max_attempts\":3,\"backoff_ms\":250},\"timeout_ms\":1500}",
             T0_MS, &t);
    assert_string_equal(t.key, "order-42");
    assert_int_equal(t.execute_at_ms, T0_MS + 60000);
    assert_int_equal(t.due_ms, T0_MS + 60000);
    assert_int_equal(t.timeout_ms, 1500);
    assert_int_equal(t.max_attempts, 3);

    cJSON *s = spec_of(&t);
    assert_string_equal(str_field(s, "key"), "order-42");
    assert_string_equal(str_field(s, "callback_url"), "https://cb.test:8443/h?x=1&y=2");
    assert_string_equal(str_field(s, "method"), "PUT");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(s, "header");
    assert_true(cJSON_IsObject(h));
    assert_int_equal(cJSON_GetArraySize(h), 2);
    assert_string_equal(str_field(h, "X-Sig"), "abc");
    assert_string_equal(str_field(h, "Content-Type"), "text/plain");
    cJSON *want = cJSON_Parse("{\"a\":[1,2,{\"b\":null}]}");
    assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(s, "req"), want, 1));
    cJSON_Delete(want);
    assert_true(num_field(s, "execute_at") == (double)(T0_MS + 60000));
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "retry");
    assert_true(num_field(r, "max_attempts") == 3);
    assert_true(num_field(r, "backoff_ms") == 250);
    assert_true(num_field(s, "timeout_ms") == 1500);
    cJSON_Delete(s);
    task_input_free(&t);
}

/* on_failure: stored as sent with its method made explicit (the stored
 * spec parses back to itself), every error named on_failure.<field> */
static void test_input_on_failure(void **state)
{
    (void)state;
    task_input t, again;
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"on_failure\":{\"callback_url\":"
             "\"https://dlq.test/f\",\"header\":{\"X-Team\":\"a\"}}}", T0_MS, &t);
    cJSON *s = spec_of(&t);
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(s, "on_failure");
    assert_string_equal(str_field(of, "callback_url"), "https://dlq.test/f");
    assert_string_equal(str_field(of, "method"), "POST");
    assert_string_equal(str_field(cJSON_GetObjectItemCaseSensitive(of, "header"), "X-Team"), "a");
    assert_true(num_field(s, "timeout_ms") == 10000);
    parse_ok_obj(s, T0_MS, &again);
    assert_string_equal(again.rec, t.rec);
    task_input_free(&again);
    cJSON_Delete(s);
    task_input_free(&t);

    const char *bad[][2] = {
        {"1", "on_failure: must be an object"},
        {"{}", "on_failure.callback_url: required"},
        {"{\"callback_url\":7}", "on_failure.callback_url: must be a string"},
        {"{\"callback_url\":\"mailto:x@y\"}", "on_failure.callback_url: must be an absolute"},
        {"{\"callback_url\":\"http://d/\",\"method\":\"HEAD\"}", "on_failure.method: must be one of"},
        {"{\"callback_url\":\"http://d/\",\"header\":{\"a b\":\"x\"}}",
         "on_failure.header.a b: name is not an HTTP token"},
        {"{\"callback_url\":\"http://d/\",\"header\":{\"Tickd-Event\":\"x\"}}",
         "on_failure.header.Tickd-Event: set by tickd"},
        {"{\"callback_url\":\"http://d/\",\"req\":1}", "on_failure.req: unknown field"},
        {"{\"callback_url\":\"http://d/\",\"method\":\"PUT\",\"method\":\"PUT\"}",
         "on_failure.method: given more than once"},
    };
    char json[512];
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(json, sizeof(json), "{\"callback_url\":\"http://cb.test/\",\"on_failure\":%s}",
                 bad[i][0]);
        parse_err(json, T0_MS, bad[i][1]);
    }
}

static void test_input_methods(void **state)
{
    (void)state;
    const char *m[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
    char json[256];
    for (size_t i = 0; i < sizeof(m) / sizeof(*m); i++) {
        task_input t;
        snprintf(json, sizeof(json),
                 "{\"callback_url\":\"http://cb.test/\",\"method\":\"%s\"}", m[i]);
        parse_ok(json, T0_MS, &t);
        cJSON *s = spec_of(&t);
        assert_string_equal(str_field(s, "method"), m[i]);
        cJSON_Delete(s);
        task_input_free(&t);
    }
}

static void test_input_execute_at(void **state)
{
    (void)state;
    task_input t;
    cJSON *s;

    /* RFC 3339 */
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"execute_at\":\"2026-11-22T07:00:10.250+02:00\"}",
             T0_MS - 1000, &t);
    assert_int_equal(t.execute_at_ms, T0_MS + 10250);
    assert_int_equal(t.due_ms, T0_MS + 10250);
    s = spec_of(&t);
    assert_true(num_field(s, "execute_at") == (double)(T0_MS + 10250));
    cJSON_Delete(s);
    task_input_free(&t);

    /* in the past: due now, but the time asked for is kept */
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"execute_at\":1795323595000}", T0_MS, &t);
    assert_int_equal(t.execute_at_ms, T0_MS - 5000);
    assert_int_equal(t.due_ms, T0_MS);
    s = spec_of(&t);
    assert_true(num_field(s, "execute_at") == (double)(T0_MS - 5000));
    cJSON_Delete(s);
    task_input_free(&t);

    parse_ok("{\"callback_url\":\"http://cb.test/\",\"execute_at\":\"2000-02-29T12:34:00Z\"}",
             T0_MS, &t);
    assert_int_equal(t.execute_at_ms, INT64_C(951827640000));
    assert_int_equal(t.due_ms, T0_MS);
    task_input_free(&t);

    parse_ok("{\"callback_url\":\"http://cb.test/\",\"execute_at\":0}", T0_MS, &t);
    assert_int_equal(t.execute_at_ms, 0);
    assert_int_equal(t.due_ms, T0_MS);
    task_input_free(&t);

    /* exactly now */
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"execute_at\":1795323600000}", T0_MS, &t);
    assert_int_equal(t.execute_at_ms, T0_MS);
    assert_int_equal(t.due_ms, T0_MS);
    task_input_free(&t);

    /* a float with an integer value is an integer */
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"execute_at\":1.7953236e12}", T0_MS, &t);
    assert_int_equal(t.execute_at_ms, T0_MS);
    task_input_free(&t);

    /* ten years ahead is the limit, inclusive */
    cJSON *o = base_task();
    cJSON_AddNumberToObject(o, "execute_at", (double)(T0_MS + TASK_MAX_AHEAD_MS));
    parse_ok_obj(o, T0_MS, &t);
    assert_int_equal(t.execute_at_ms, T0_MS + TASK_MAX_AHEAD_MS);
    s = spec_of(&t);
    assert_true(num_field(s, "execute_at") == (double)(T0_MS + TASK_MAX_AHEAD_MS));
    cJSON_Delete(s);
    task_input_free(&t);
    cJSON_Delete(o);
}

static void test_input_delay(void **state)
{
    (void)state;
    task_input t;
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"delay_ms\":1500}", T0_MS, &t);
    assert_int_equal(t.execute_at_ms, T0_MS + 1500);
    assert_int_equal(t.due_ms, T0_MS + 1500);
    cJSON *s = spec_of(&t);
    assert_true(num_field(s, "execute_at") == (double)(T0_MS + 1500));
    assert_null(cJSON_GetObjectItemCaseSensitive(s, "delay_ms"));
    cJSON_Delete(s);
    task_input_free(&t);

    parse_ok("{\"callback_url\":\"http://cb.test/\",\"delay_ms\":0}", T0_MS, &t);
    assert_int_equal(t.execute_at_ms, T0_MS);
    assert_int_equal(t.due_ms, T0_MS);
    task_input_free(&t);

    cJSON *o = base_task();
    cJSON_AddNumberToObject(o, "delay_ms", (double)TASK_MAX_AHEAD_MS);
    parse_ok_obj(o, T0_MS, &t);
    assert_int_equal(t.execute_at_ms, T0_MS + TASK_MAX_AHEAD_MS);
    task_input_free(&t);
    cJSON_Delete(o);
}

static void test_input_req_verbatim(void **state)
{
    (void)state;
    const char *reqs[] = {
        "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\\u00e9\\n\"}}",
        "[1,\"two\",3.5,[],{}]",
        "\"just a string with \\\"quotes\\\"\"",
        "42",
        "-1.25e-3",
        "true",
        "false",
        "null",
        "{}",
        "[]",
        "\"\"",
    };
    for (size_t i = 0; i < sizeof(reqs) / sizeof(*reqs); i++) {
        task_input t;
        cJSON *o = base_task();
        cJSON *req = cJSON_Parse(reqs[i]);
        if (!req) fail_msg("bad test JSON %s", reqs[i]);
        cJSON *want = cJSON_Duplicate(req, 1);
        cJSON_AddItemToObject(o, "req", req);
        parse_ok_obj(o, T0_MS, &t);
        cJSON *s = spec_of(&t);
        const cJSON *got = cJSON_GetObjectItemCaseSensitive(s, "req");
        if (!got) fail_msg("req %s missing from record %s", reqs[i], t.rec);
        if (!cJSON_Compare(got, want, 1))
            fail_msg("req %s became %s", reqs[i], t.rec);
        cJSON_Delete(want);
        cJSON_Delete(s);
        task_input_free(&t);
        cJSON_Delete(o);
    }
}

static void test_input_bounds_accepted(void **state)
{
    (void)state;
    const char *ok[] = {
        "{\"callback_url\":\"http://cb.test/\",\"retry\":{\"max_attempts\":1}}",
        "{\"callback_url\":\"http://cb.test/\",\"retry\":{\"max_attempts\":100}}",
        "{\"callback_url\":\"http://cb.test/\",\"retry\":{\"backoff_ms\":1}}",
        "{\"callback_url\":\"http://cb.test/\",\"retry\":{\"backoff_ms\":86400000}}",
        "{\"callback_url\":\"http://cb.test/\",\"retry\":{}}",
        "{\"callback_url\":\"http://cb.test/\",\"timeout_ms\":1}",
        "{\"callback_url\":\"http://cb.test/\",\"timeout_ms\":300000}",
        "{\"callback_url\":\"http://cb.test/\",\"header\":{}}",
        "{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-Empty\":\"\"}}",
        "{\"callback_url\":\"http://cb.test/\",\"header\":{\"Tickd-Other\":\"ok\"}}",
        "{\"callback_url\":\"http://cb.test/\",\"header\":{\"!#$%&'*+-.^_`|~\":\"v\"}}",
        "{\"callback_url\":\"HTTP://cb.test/\"}",
        "{\"callback_url\":\"HttpS://cb.test/\"}",
        "{\"callback_url\":\"http://127.0.0.1:9/x\"}",
        "{\"callback_url\":\"http://[::1]:8080/x\"}",
        "{\"callback_url\":\"http://user:pw@cb.test/x#frag\"}",
        "{\"key\":\"a\",\"callback_url\":\"http://cb.test/\"}",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
        task_input t;
        parse_ok(ok[i], T0_MS, &t);
        task_input_free(&t);
    }

    task_input t;
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"retry\":{\"max_attempts\":100,"
             "\"backoff_ms\":86400000},\"timeout_ms\":300000}", T0_MS, &t);
    assert_int_equal(t.max_attempts, 100);
    assert_int_equal(t.timeout_ms, 300000);
    cJSON *s = spec_of(&t);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "retry");
    assert_true(num_field(r, "max_attempts") == 100);
    assert_true(num_field(r, "backoff_ms") == 86400000);
    cJSON_Delete(s);
    task_input_free(&t);

    /* 200-character key */
    cJSON *o = base_task();
    char key[TASK_KEY_MAX + 1];
    memset(key, 'K', TASK_KEY_MAX);
    key[TASK_KEY_MAX] = '\0';
    cJSON_AddStringToObject(o, "key", key);
    parse_ok_obj(o, T0_MS, &t);
    assert_string_equal(t.key, key);
    task_input_free(&t);
    cJSON_Delete(o);

    /* 100 headers, a value of 8192 bytes */
    o = base_task();
    cJSON *h = cJSON_AddObjectToObject(o, "header");
    char name[32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "X-H%d", i);
        cJSON_AddStringToObject(h, name, "v");
    }
    parse_ok_obj(o, T0_MS, &t);
    task_input_free(&t);
    cJSON_Delete(o);

    o = base_task();
    h = cJSON_AddObjectToObject(o, "header");
    char *big = malloc(8193);
    assert_non_null(big);
    memset(big, 'v', 8192);
    big[8192] = '\0';
    cJSON_AddStringToObject(h, "X-Big", big);
    free(big);
    parse_ok_obj(o, T0_MS, &t);
    task_input_free(&t);
    cJSON_Delete(o);
}

static void test_input_url_length(void **state)
{
    (void)state;
    char url[TASK_URL_MAX + 2];
    task_input t;
    int n = snprintf(url, sizeof(url), "http://cb.test/");

    /* exactly 2048 bytes: accepted */
    memset(url + n, 'a', (size_t)(TASK_URL_MAX - n));
    url[TASK_URL_MAX] = '\0';
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "callback_url", url);
    parse_ok_obj(o, T0_MS, &t);
    cJSON *s = spec_of(&t);
    assert_string_equal(str_field(s, "callback_url"), url);
    cJSON_Delete(s);
    task_input_free(&t);
    cJSON_Delete(o);

    /* 2049: rejected */
    url[TASK_URL_MAX] = 'a';
    url[TASK_URL_MAX + 1] = '\0';
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "callback_url", url);
    parse_err_obj(o, T0_MS, "callback_url: ");
    char err[256];
    assert_int_equal(task_input_parse(o, T0_MS, &t, err, sizeof(err)), -1);
    assert_contains(err, "2048");
    cJSON_Delete(o);

    /* far longer */
    char *huge = malloc(100000);
    assert_non_null(huge);
    memcpy(huge, "https://cb.test/", 16);
    memset(huge + 16, 'b', 100000 - 17);
    huge[100000 - 1] = '\0';
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "callback_url", huge);
    free(huge);
    parse_err_obj(o, T0_MS, "callback_url: ");
    cJSON_Delete(o);
}

/* ---- task_input_parse: errors ------------------------------------------ */

static void test_input_not_object(void **state)
{
    (void)state;
    parse_err("[]", T0_MS, "task: ");
    parse_err("[{\"callback_url\":\"http://cb.test/\"}]", T0_MS, "task: ");
    parse_err("\"http://cb.test/\"", T0_MS, "task: ");
    parse_err("null", T0_MS, "task: ");
    parse_err("42", T0_MS, "task: ");
}

static void test_input_unknown_field(void **state)
{
    (void)state;
    char err[256];
    parse_err_text("{\"callback_url\":\"http://cb.test/\",\"foo\":1}", T0_MS, err, sizeof(err));
    assert_string_equal(err, "foo: unknown field");
    parse_err("{\"foo\":1}", T0_MS, "foo: unknown field");
    /* field names are case-sensitive */
    parse_err("{\"callback_url\":\"http://cb.test/\",\"Method\":\"GET\"}", T0_MS,
              "Method: unknown field");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"headers\":{}}", T0_MS,
              "headers: unknown field");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"retry\":{\"max\":1}}", T0_MS,
              "retry.max: unknown field");
}

static void test_input_key_errors(void **state)
{
    (void)state;
    parse_err("{\"key\":\"\",\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: ");
    parse_err("{\"key\":\"a b\",\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: ");
    parse_err("{\"key\":\"a/b\",\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: ");
    parse_err("{\"key\":\"caf\\u00e9\",\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: ");
    parse_err("{\"key\":42,\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: ");
    parse_err("{\"key\":null,\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: ");
    parse_err("{\"key\":[\"a\"],\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: ");

    cJSON *o = base_task();
    char key[TASK_KEY_MAX + 2];
    memset(key, 'K', TASK_KEY_MAX + 1);
    key[TASK_KEY_MAX + 1] = '\0';
    cJSON_AddStringToObject(o, "key", key);
    parse_err_obj(o, T0_MS, "key: ");
    cJSON_Delete(o);
}

/* A key a user gives cannot be a name tickd makes (task.c lists them). */
static void test_input_key_reserved(void **state)
{
    (void)state;
    char err[256];
    const char *what = NULL;
    parse_err_text("{\"key\":\"s:hij:1\",\"callback_url\":\"http://cb.test/\"}", T0_MS, err,
                   sizeof(err));
    assert_string_equal(err, "key: must not start with \"s:\" (reserved for schedule runs)");
    parse_err("{\"key\":\"s:\",\"callback_url\":\"http://cb.test/\"}", T0_MS, "key: must not");
    assert_string_equal(task_key_reserved("s:a:1", &what), TASK_RUN_PREFIX);
    assert_string_equal(what, "schedule runs");
    assert_null(task_key_reserved("s", NULL));
    assert_null(task_key_reserved("S:a:1", NULL));
    assert_null(task_key_reserved("x:s:1", NULL));
    /* the names tickd makes use the prefix, and no id holds the event
     * separator */
    assert_int_equal(strncmp("s:", TASK_RUN_PREFIX, 2), 0);
    assert_int_equal(task_key_valid("a" TASK_EVENT_SEP "b"), 0);
    /* tickd's own run keys pass where it makes them */
    cJSON *o = base_task();
    cJSON_AddStringToObject(o, "key", "s:hij:1");
    task_input t;
    assert_int_equal(task_input_parse_made(o, T0_MS, &t, err, sizeof(err)), 0);
    assert_string_equal(t.key, "s:hij:1");
    task_input_free(&t);
    cJSON_Delete(o);
}

static void test_input_url_errors(void **state)
{
    (void)state;
    char err[256];
    parse_err_text("{}", T0_MS, err, sizeof(err));
    assert_string_equal(err, "callback_url: required");
    parse_err("{\"method\":\"GET\"}", T0_MS, "callback_url: ");
    parse_err("{\"callback_url\":42}", T0_MS, "callback_url: ");
    parse_err("{\"callback_url\":null}", T0_MS, "callback_url: ");
    parse_err("{\"callback_url\":\"\"}", T0_MS, "callback_url: ");

    const char *bad[] = {
        "ftp://cb.test/x",
        "file:///etc/passwd",
        "gopher://cb.test/",
        "javascript:alert(1)",
        "ws://cb.test/",
        "mailto:a@cb.test",
        "//cb.test/x",
        "/relative/path",
        "cb.test/x",
        "http:/cb.test",
        "http:cb.test",
        " http://cb.test/",
        "httpx://cb.test/",
        "http://",
        "https://",
        "http:///path",
        "http://cb.test/a b",
        "http://cb.test/a\tb",
        "http://cb.test/\r\nX-Injected: 1",
        "http://cb.test/\x7f",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "callback_url", bad[i]);
        parse_err_obj(o, T0_MS, "callback_url: ");
        cJSON_Delete(o);
    }
    parse_err_text("{\"callback_url\":\"ftp://cb.test/x\"}", T0_MS, err, sizeof(err));
    assert_contains(err, "http");
}

static void test_input_method_errors(void **state)
{
    (void)state;
    const char *bad[] = {"\"get\"", "\"Post\"", "\"HEAD\"", "\"OPTIONS\"", "\"CONNECT\"",
                         "\"TRACE\"", "\"\"", "\"POST \"", "1", "null", "[\"GET\"]"};
    char json[256];
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(json, sizeof(json), "{\"callback_url\":\"http://cb.test/\",\"method\":%s}",
                 bad[i]);
        parse_err(json, T0_MS, "method: ");
    }
}

static void test_input_header_errors(void **state)
{
    (void)state;
    char err[256];
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":[]}", T0_MS, "header: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":\"X: y\"}", T0_MS, "header: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":null}", T0_MS, "header: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"\":\"v\"}}", T0_MS, "header: ");

    /* reserved, any case */
    const char *reserved[] = {"tickd-task-id", "Tickd-Task-Id", "TICKD-ATTEMPT",
                              "tickd-scheduled-at", "content-length", "Content-Length",
                              "Transfer-Encoding", "connection"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(*reserved); i++) {
        cJSON *o = base_task();
        cJSON *h = cJSON_AddObjectToObject(o, "header");
        cJSON_AddStringToObject(h, "X-Ok", "fine");
        cJSON_AddStringToObject(h, reserved[i], "1");
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "header.%s: ", reserved[i]);
        parse_err_obj(o, T0_MS, prefix);
        cJSON_Delete(o);
    }

    /* values */
    parse_err_text("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"a\\r\\nX-B: b\"}}",
                   T0_MS, err, sizeof(err));
    assert_prefix(err, "header.X-A: ");
    assert_contains(err, "CR or LF");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"a\\nb\"}}", T0_MS,
              "header.X-A: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"a\\rb\"}}", T0_MS,
              "header.X-A: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"\\n\"}}", T0_MS,
              "header.X-A: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":1}}", T0_MS,
              "header.X-A: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":null}}", T0_MS,
              "header.X-A: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":[\"a\"]}}", T0_MS,
              "header.X-A: ");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":{}}}", T0_MS,
              "header.X-A: ");

    /* names */
    const char *names[] = {"X A", "X:A", "X(A)", "X/A", "X@A", "X\"A", "X,A", "X;A",
                           "X=A", "X{A}", "X\\A", "X\tA", "X\nA", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        cJSON *o = base_task();
        cJSON *h = cJSON_AddObjectToObject(o, "header");
        cJSON_AddStringToObject(h, names[i], "v");
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "header.%s: ", names[i]);
        parse_err_obj(o, T0_MS, prefix);
        cJSON_Delete(o);
    }

    /* a name of 257 characters */
    cJSON *o = base_task();
    cJSON *h = cJSON_AddObjectToObject(o, "header");
    char name[300];
    memset(name, 'N', 257);
    name[257] = '\0';
    cJSON_AddStringToObject(h, name, "v");
    parse_err_obj(o, T0_MS, "header");
    cJSON_Delete(o);
    /* 256 is fine */
    o = base_task();
    h = cJSON_AddObjectToObject(o, "header");
    name[256] = '\0';
    cJSON_AddStringToObject(h, name, "v");
    task_input t;
    parse_ok_obj(o, T0_MS, &t);
    task_input_free(&t);
    cJSON_Delete(o);

    /* 101 headers */
    o = base_task();
    h = cJSON_AddObjectToObject(o, "header");
    for (int i = 0; i < 101; i++) {
        snprintf(name, sizeof(name), "X-H%d", i);
        cJSON_AddStringToObject(h, name, "v");
    }
    parse_err_obj(o, T0_MS, "header: ");
    cJSON_Delete(o);

    /* a value of 8193 bytes */
    o = base_task();
    h = cJSON_AddObjectToObject(o, "header");
    char *big = malloc(8194);
    assert_non_null(big);
    memset(big, 'v', 8193);
    big[8193] = '\0';
    cJSON_AddStringToObject(h, "X-Big", big);
    free(big);
    parse_err_obj(o, T0_MS, "header.X-Big: ");
    cJSON_Delete(o);
}

static void test_input_time_errors(void **state)
{
    (void)state;
    char err[256];
    const char *u = "{\"callback_url\":\"http://cb.test/\",";
    char json[512];
#define J(rest) (snprintf(json, sizeof(json), "%s%s", u, rest), json)

    /* both */
    parse_err_text(J("\"execute_at\":1795323600000,\"delay_ms\":10}"), T0_MS, err, sizeof(err));
    assert_prefix(err, "execute_at: ");
    assert_contains(err, "delay_ms");
    parse_err(J("\"delay_ms\":10,\"execute_at\":\"2026-11-22T05:00:00Z\"}"), T0_MS, "execute_at: ");
    parse_err(J("\"delay_ms\":0,\"execute_at\":0}"), T0_MS, "execute_at: ");

    /* execute_at */
    parse_err(J("\"execute_at\":-1}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":1795323600000.5}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":true}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":null}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":{}}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":[1795323600000]}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":1e300}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":\"\"}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":\"1795323600000\"}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":\"tomorrow\"}"), T0_MS, "execute_at: ");
    parse_err_text(J("\"execute_at\":\"2026-11-22T05:00:00\"}"), T0_MS, err, sizeof(err));
    assert_prefix(err, "execute_at: ");
    assert_contains(err, "RFC 3339");
    parse_err_text(J("\"execute_at\":\"2025-02-29T05:00:00Z\"}"), T0_MS, err, sizeof(err));
    assert_prefix(err, "execute_at: ");
    assert_contains(err, "not a valid date");
    parse_err_text(J("\"execute_at\":\"1969-12-31T23:59:59.999Z\"}"), T0_MS, err, sizeof(err));
    assert_string_equal(err, "execute_at: before 1970");

    /* more than ten years ahead */
    cJSON *o = base_task();
    cJSON_AddNumberToObject(o, "execute_at", (double)(T0_MS + TASK_MAX_AHEAD_MS + 1));
    parse_err_obj(o, T0_MS, "execute_at: ");
    assert_int_equal(task_input_parse(o, T0_MS, &(task_input){0}, err, sizeof(err)), -1);
    assert_string_equal(err, "execute_at: more than ten years ahead");
    cJSON_Delete(o);
    parse_err(J("\"execute_at\":\"2040-01-01T00:00:00Z\"}"), T0_MS, "execute_at: more than ten years");
    parse_err(J("\"execute_at\":\"9999-12-31T23:59:59Z\"}"), T0_MS, "execute_at: ");
    parse_err(J("\"execute_at\":4503599627370496}"), T0_MS, "execute_at: ");  /* 2^52 */
    parse_err(J("\"execute_at\":9007199254740993}"), T0_MS, "execute_at: ");

    /* delay_ms */
    parse_err(J("\"delay_ms\":-1}"), T0_MS, "delay_ms: ");
    parse_err(J("\"delay_ms\":1.5}"), T0_MS, "delay_ms: ");
    parse_err(J("\"delay_ms\":\"100\"}"), T0_MS, "delay_ms: ");
    parse_err(J("\"delay_ms\":null}"), T0_MS, "delay_ms: ");
    parse_err(J("\"delay_ms\":true}"), T0_MS, "delay_ms: ");
    parse_err(J("\"delay_ms\":1e300}"), T0_MS, "delay_ms: ");
    o = base_task();
    cJSON_AddNumberToObject(o, "delay_ms", (double)(TASK_MAX_AHEAD_MS + 1));
    parse_err_obj(o, T0_MS, "delay_ms: ");
    cJSON_Delete(o);
#undef J
}

static void test_input_retry_timeout_errors(void **state)
{
    (void)state;
    const char *u = "{\"callback_url\":\"http://cb.test/\",";
    char json[512];
#define J(rest) (snprintf(json, sizeof(json), "%s%s", u, rest), json)
    parse_err(J("\"retry\":5}"), T0_MS, "retry: ");
    parse_err(J("\"retry\":[]}"), T0_MS, "retry: ");
    parse_err(J("\"retry\":null}"), T0_MS, "retry: ");
    parse_err(J("\"retry\":{\"attempts\":3}}"), T0_MS, "retry.attempts: unknown field");

    const char *ma[] = {"0", "101", "-1", "1.5", "\"5\"", "null", "true", "1e10"};
    for (size_t i = 0; i < sizeof(ma) / sizeof(*ma); i++) {
        char rest[128];
        snprintf(rest, sizeof(rest), "\"retry\":{\"max_attempts\":%s}}", ma[i]);
        parse_err(J(rest), T0_MS, "retry.max_attempts: ");
    }
    const char *bo[] = {"0", "86400001", "-1000", "0.5", "\"1000\"", "null", "{}"};
    for (size_t i = 0; i < sizeof(bo) / sizeof(*bo); i++) {
        char rest[128];
        snprintf(rest, sizeof(rest), "\"retry\":{\"backoff_ms\":%s}}", bo[i]);
        parse_err(J(rest), T0_MS, "retry.backoff_ms: ");
    }
    const char *to[] = {"0", "300001", "-5", "2.5", "\"x\"", "null", "false", "[]"};
    for (size_t i = 0; i < sizeof(to) / sizeof(*to); i++) {
        char rest[128];
        snprintf(rest, sizeof(rest), "\"timeout_ms\":%s}", to[i]);
        parse_err(J(rest), T0_MS, "timeout_ms: ");
    }
#undef J
}

/* An error after a key was filled in (or generated) still leaves out clean. */
static void test_input_error_leaves_out_clean(void **state)
{
    (void)state;
    char err[256];
    task_input t;
    cJSON *o = cJSON_Parse("{\"key\":\"k1\",\"callback_url\":\"http://cb.test/\","
                           "\"timeout_ms\":0}");
    assert_non_null(o);
    memset(&t, 0x7f, sizeof(t));
    assert_int_equal(task_input_parse(o, T0_MS, &t, err, sizeof(err)), -1);
    assert_null(t.rec);
    assert_string_equal(t.key, "");
    assert_int_equal(t.due_ms, 0);
    task_input_free(&t); /* harmless on a failed parse */
    cJSON_Delete(o);

    /* a tiny err buffer is truncated, not overrun */
    char small[8];
    o = cJSON_Parse("{\"callback_url\":\"http://cb.test/\",\"method\":\"HEAD\"}");
    assert_non_null(o);
    assert_int_equal(task_input_parse(o, T0_MS, &t, small, sizeof(small)), -1);
    assert_string_equal(small, "method:");
    cJSON_Delete(o);
}

/* ---- NUL and exactness ------------------------------------------------- */

/* The first NUL of `json` (task_json_check), or the first string
 * that is not UTF-8 (task_json_check_utf8), as api.c reports it; "" when
 * there is none. */
typedef int json_check_fn(const char *s, size_t len, char *err, size_t errlen);
static const char *json_err(json_check_fn *check, const char *json, size_t len)
{
    static char err[400];
    err[0] = '\0';
    if (check(json, len, err, sizeof(err)) == 0) assert_string_equal(err, "");
    else assert_true(err[0] != '\0');
    return err;
}
#define nul_err(json, len) json_err(task_json_check, (json), (len))
#define NUL_ERR(lit) nul_err((lit), sizeof(lit) - 1)

static void test_json_nul_found_everywhere(void **state)
{
    (void)state;
    assert_string_equal(NUL_ERR("{\"key\":\"a\\u0000b\",\"callback_url\":\"http://x/\"}"),
                        "key: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"callback_url\":\"http://x/\\u0000.evil\"}"),
                        "callback_url: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"method\":\"GET\\u0000\"}"),
                        "method: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"header\":{\"X-A\":\"v\\u0000w\"}}"),
                        "header.X-A: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"header\":{\"X-A\\u0000B\":\"v\"}}"),
                        "header.X-A\\u0000B: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"req\":\"\\u0000\"}"),
                        "req: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"req\":{\"a\":[1,{\"b\\\"c\":[\"x\",\"\\u0000\"]}]}}"),
                        "req.a[1].b\"c[1]: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"execute_at\":\"2026-11-22T05:00:00Z\\u0000junk\"}"),
                        "execute_at: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"tasks\":[{},{\"key\":\"\\u0000\"}]}"),
                        "tasks[1].key: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("\"\\u0000\""), "body: contains a NUL character (\\u0000)");
    /* a raw 0 byte inside a string */
    assert_string_equal(NUL_ERR("{\"key\":\"a\0b\"}"), "key: contains a NUL character (\\u0000)");
    /* other escapes, and an escaped backslash before text that reads u0000 */
    assert_string_equal(NUL_ERR("{\"req\":\"\\\\u0000\"}"), "");
    assert_string_equal(NUL_ERR("{\"req\":\"\\\\\\\\u0000 \\u0001 \\u00000\"}"),
                        "req: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"req\":\"\\\\\\\\u0000 \\u0001 \\u1000\"}"), "");
    assert_string_equal(NUL_ERR("{\"a\":\"\\\"\\u0000\"}"), "a: contains a NUL character (\\u0000)");
    assert_string_equal(NUL_ERR("{\"a\":\"\\u000\"}"), "");
    assert_string_equal(NUL_ERR("{\"a\":\"\\u0000"), "a: contains a NUL character (\\u0000)");
}

static int count_path(const char *path, void *priv)
{
    (void)path;
    ++*(int *)priv;
    return 0;
}

static void test_json_nul_counts_and_survives_garbage(void **state)
{
    (void)state;
    int n = 0;
    const char two[] = "{\"tasks\":[{\"key\":\"\\u0000\"},{\"header\":{\"\\u0000\":\"\\u0000\"}}]}";
    assert_int_equal(task_json_nuls(two, sizeof(two) - 1, count_path, &n), 3);
    assert_int_equal(n, 3);
    /* a very long path is cut, never overrun */
    char big[4096];
    size_t len = 0;
    len += (size_t)snprintf(big + len, sizeof(big) - len, "{");
    for (int i = 0; i < 60; i++) len += (size_t)snprintf(big + len, sizeof(big) - len, "\"name%02d\":{", i);
    len += (size_t)snprintf(big + len, sizeof(big) - len, "\"x\":\"\\u0000\"");
    for (int i = 0; i < 61; i++) big[len++] = '}';
    const char *e = nul_err(big, len);
    assert_true(strlen(e) < 400);
    assert_prefix(e, "name00.name01.");
    /* garbage: nothing found, nothing read out of bounds (ASan run) */
    const char *junk[] = {"", "{", "[", "\"", "\\", "{\"", "{\"a", "{\"a\":", "[[[[", "}}}]]]",
                          "{\"a\"\"b\"}", "\"\\u", "\"\\u00", ",,,:::"};
    for (size_t i = 0; i < sizeof(junk) / sizeof(*junk); i++)
        assert_string_equal(nul_err(junk[i], strlen(junk[i])), "");
    /* nesting deeper than cJSON accepts ends the walk */
    static char deep[5000];
    memset(deep, '[', sizeof(deep));
    assert_string_equal(nul_err(deep, sizeof(deep)), "");
}

/* task_json_plain passes only what the scan would pass: no backslash, no
 * exponent, no run of 300 number characters */
static void test_json_plain(void **state)
{
    (void)state;
    static const char *plain[] = {
        "{\"callback_url\":\"http://127.0.0.1:9/cb\",\"method\":\"POST\",\"delay_ms\":3600000}",
        "{\"req\":{\"e\":\"ee\",\"n\":[-1.5,0,12]}}", "[]"};
    static const char *not_plain[] = {"{\"a\":1e400}", "{\"a\":1E-400}", "{\"a\":1.e5}",
                                      "{\"a\":\"\\u0000\"}", "{\"x2e\":0}"};
    for (size_t i = 0; i < sizeof(plain) / sizeof(*plain); i++) {
        assert_int_equal(task_json_plain(plain[i], strlen(plain[i])), 1);
        assert_string_equal(nul_err(plain[i], strlen(plain[i])), "");
    }
    for (size_t i = 0; i < sizeof(not_plain) / sizeof(*not_plain); i++)
        assert_int_equal(task_json_plain(not_plain[i], strlen(not_plain[i])), 0);
    /* long: plain but for a number of 300 characters (1e310 written out:
     * read as inf), or a string that long of digits */
    char big[400];
    memset(big, ' ', sizeof(big));
    big[0] = '[';
    big[sizeof(big) - 1] = ']';
    assert_int_equal(task_json_plain(big, sizeof(big)), 1);
    for (int n = 299; n <= 311; n++) {
        memset(big + 1, '1', (size_t)n);
        memset(big + 1 + n, ' ', sizeof(big) - 2 - (size_t)n);
        assert_int_equal(task_json_plain(big, sizeof(big)), n < 300);
        assert_string_equal(nul_err(big, sizeof(big)),
                            n < 310 ? "" : "[0]: " TASK_NUMBER_LOST);
        big[0] = '[';
        big[1] = '"';
        big[n] = '"';
        assert_int_equal(task_json_plain(big, sizeof(big)), n - 2 < 300);
        big[1] = big[n] = '1';
    }
}

/* The first string that is not UTF-8 as api_body reports it; "" when none. */
#define UTF8_ERR(lit) json_err(task_json_check_utf8, (lit), sizeof(lit) - 1)

static void test_json_utf8_found_everywhere(void **state)
{
    (void)state;
    assert_string_equal(UTF8_ERR("{\"req\":\"A\xff\x80\x80" "B\"}"),
                        "req: not valid UTF-8 (byte 0xFF at byte 1 of the string)");
    assert_string_equal(UTF8_ERR("{\"req\":{\"a\":[1,{\"b\":[\"x\",\"\xed\xa0\x80\"]}]}}"),
                        "req.a[1].b[1]: not valid UTF-8 (byte 0xED at byte 0 of the string)");
    assert_string_equal(UTF8_ERR("{\"header\":{\"X-A\":\"v\xc0\xaf\"}}"),
                        "header.X-A: not valid UTF-8 (byte 0xC0 at byte 1 of the string)");
    assert_string_equal(UTF8_ERR("{\"key\":\"k\xf4\x90\x80\x80\"}"),
                        "key: not valid UTF-8 (byte 0xF4 at byte 1 of the string)");
    assert_string_equal(UTF8_ERR("{\"tasks\":[{},{\"queue\":\"q\xe2\x82\"}]}"),
                        "tasks[1].queue: not valid UTF-8 (byte 0xE2 at byte 1 of the string)");
    /* a member name: named as sent (the API cleans what it prints) */
    assert_string_equal(UTF8_ERR("{\"cro\x9c\":1}"),
                        "cro\x9c: not valid UTF-8 (byte 0x9C at byte 3 of the string)");
    assert_string_equal(UTF8_ERR("\"\xf8\x88\x80\x80\x80\""),
                        "body: not valid UTF-8 (byte 0xF8 at byte 0 of the string)");
    /* an escape inside a sequence breaks it; escapes around one do not */
    assert_string_equal(UTF8_ERR("{\"req\":\"\xe2\\n\x82\xac\"}"),
                        "req: not valid UTF-8 (byte 0xE2 at byte 0 of the string)");
    assert_string_equal(UTF8_ERR("{\"req\":\"\\\"\xe2\x82\xac\\\\\",\"a\\u00e9\":\"\\ud83d\\ude00\"}"),
                        "");
    assert_string_equal(UTF8_ERR("{\"req\":\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"}"), "");
    /* a string cut by the end of the text */
    assert_string_equal(UTF8_ERR("{\"req\":\"\xf0\x9f\x98"),
                        "req: not valid UTF-8 (byte 0xF0 at byte 0 of the string)");
    /* NULs are the other check's */
    assert_string_equal(UTF8_ERR("{\"req\":\"a\\u0000b\"}"), "");
}

static void test_input_header_control_and_duplicates(void **state)
{
    (void)state;
    char err[512];
    parse_err_text("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"a\\u0001b\"}}",
                   T0_MS, err, sizeof(err));
    assert_string_equal(err, "header.X-A: value contains the control character 0x01 (only HTAB "
                             "is allowed)");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"\\u007f\"}}", T0_MS,
              "header.X-A: value contains the control character 0x7f");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"\\u001b[31m\"}}", T0_MS,
              "header.X-A: value contains the control character 0x1b");
    task_input t;
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"a\\tb \\u00e9\"}}", T0_MS,
             &t);
    assert_non_null(strstr(t.rec, "\"X-A\":\"a\\tb \xc3\xa9\""));
    task_input_free(&t);
    parse_err("{\"callback_url\":\"http://cb.test/\",\"header\":{\"X-A\":\"1\",\"X-A\":\"2\"}}",
              T0_MS, "header.X-A: given more than once");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"key\":\"a\",\"key\":\"b\"}", T0_MS,
              "key: given more than once");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"callback_url\":\"http://evil.test/\"}",
              T0_MS, "callback_url: given more than once");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"retry\":{\"max_attempts\":1,"
              "\"max_attempts\":9}}", T0_MS, "retry.max_attempts: given more than once");
    /* a long unknown name still leaves room for the reason */
    char big[700];
    int n = snprintf(big, sizeof(big), "{\"callback_url\":\"http://cb.test/\",\"");
    memset(big + n, 'z', 500);
    snprintf(big + n + 500, sizeof(big) - (size_t)n - 500, "\":1}");
    parse_err_text(big, T0_MS, err, 400);
    assert_contains(err, ": unknown field");
}

static void test_input_req_numbers_exact_or_refused(void **state)
{
    (void)state;
    parse_err("{\"callback_url\":\"http://cb.test/\",\"req\":{\"a\":[1,1e400]}}", T0_MS,
              "req.a[1]: a number that would not be stored exactly");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"req\":0.30000000000000004}", T0_MS,
              "req: a number");
    parse_err("{\"callback_url\":\"http://cb.test/\",\"req\":[1.7976931348623157e308]}", T0_MS,
              "req[0]: a number");
    /* cJSON writes a 16-digit integer in 15 digits: 9007199254740993 would
     * reach the receiver as 9007199254740990 */
    parse_err("{\"callback_url\":\"http://cb.test/\",\"req\":{\"id\":9007199254740993}}", T0_MS,
              "req.id: a number");
    task_input t;
    parse_ok("{\"callback_url\":\"http://cb.test/\",\"req\":{\"a\":[0.1,-0.5,1e300,42,"
             "900719925474099,2.5e-300]}}", T0_MS, &t);
    cJSON *s = spec_of(&t), *want = cJSON_Parse("{\"a\":[0.1,-0.5,1e300,42,900719925474099,"
                                                "2.5e-300]}");
    assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(s, "req"), want, 1));
    cJSON_Delete(want);
    cJSON_Delete(s);
    task_input_free(&t);
}

/* ---- records ------------------------------------------------------------ */

/* The spec a task given as `given` must have, written here from the input:
 * every default explicit (method, execute_at, retry, timeout_ms; a default
 * queue left out; an on_failure's method), delay_ms as execute_at. */
static cJSON *spec_wanted(const char *given, const task_input *t)
{
    cJSON *o = cJSON_Parse(given);
    assert_non_null(o);
    if (!cJSON_GetObjectItemCaseSensitive(o, "key")) cJSON_AddStringToObject(o, "key", t->key);
    if (!cJSON_GetObjectItemCaseSensitive(o, "method")) cJSON_AddStringToObject(o, "method", "POST");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "delay_ms");
    if (!cJSON_GetObjectItemCaseSensitive(o, "execute_at"))
        cJSON_AddNumberToObject(o, "execute_at", (double)t->execute_at_ms);
    cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "retry");
    if (!r) r = cJSON_AddObjectToObject(o, "retry");
    if (!cJSON_GetObjectItemCaseSensitive(r, "max_attempts"))
        cJSON_AddNumberToObject(r, "max_attempts", TASK_DEFAULT_ATTEMPTS);
    if (!cJSON_GetObjectItemCaseSensitive(r, "backoff_ms"))
        cJSON_AddNumberToObject(r, "backoff_ms", TASK_DEFAULT_BACKOFF_MS);
    if (!cJSON_GetObjectItemCaseSensitive(o, "timeout_ms"))
        cJSON_AddNumberToObject(o, "timeout_ms", TASK_DEFAULT_TIMEOUT_MS);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "queue");
    if (q && strcmp(q->valuestring, TASK_QUEUE_DEFAULT) == 0)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "queue");
    cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "on_failure");
    if (f && !cJSON_GetObjectItemCaseSensitive(f, "method")) cJSON_AddStringToObject(f, "method", "POST");
    return o;
}

/* The record gives the spec back, member for member, for every kind of task:
 * what was given, every default explicit; the same under the task's id, and
 * from a task parsed from it. */
static void test_record_round_trip(void **state)
{
    (void)state;
    static const char *inputs[] = {
        "{\"callback_url\":\"http://cb.test/hook\"}",
        "{\"key\":\"k.1:x-y_z\",\"callback_url\":\"https://cb.test/a?b=\\\"c\\\"&d=%0A\","
        "\"method\":\"GET\",\"header\":{\"X-A\":\"1\",\"X-B\":\"two words?\"},"
        "\"req\":{\"a\":[1,2.5,\"x\\ny\"],\"b\":null},\"execute_at\":1795000030000,"
        "\"retry\":{\"max_attempts\":9,\"backoff_ms\":77},\"timeout_ms\":300000,"
        "\"queue\":\"billing.eu\",\"on_failure\":{\"callback_url\":\"http://cb.test/dead\","
        "\"header\":{\"X-C\":\"3\"}}}",
        "{\"callback_url\":\"http://cb.test/hook\",\"req\":\"\",\"retry\":{\"max_attempts\":5},"
        "\"queue\":\"default\",\"method\":\"DELETE\"}",
        "{\"callback_url\":\"http://cb.test/hook\",\"on_failure\":{\"callback_url\":"
        "\"http://cb.test/x\",\"method\":\"PUT\"}}",
        "{\"callback_url\":\"http://cb.test/hook\",\"req\":{},\"retry\":{\"backoff_ms\":2000},"
        "\"delay_ms\":1500}",
    };
    for (size_t i = 0; i < sizeof(inputs) / sizeof(*inputs); i++) {
        task_input t, t2;
        char slice[TASK_SLICE_MAX], id[TASK_ID_MAX];
        parse_ok(inputs[i], T0_MS, &t);
        if (i == 0) assert_non_null(strstr(t.rec, "\n\n10000\n\n\n{}"));
        int lines = 0;
        for (const char *c = t.rec; *c; c++) lines += *c == '\n';
        assert_int_equal(lines, 5);
        char *spec = task_input_spec(&t);
        cJSON *a = cJSON_Parse(spec), *want = spec_wanted(inputs[i], &t);
        if (!a || !cJSON_Compare(a, want, 1)) {
            char *w = cJSON_PrintUnformatted(want);
            fail_msg("input %zu: spec\n%s\nwanted\n%s", i, spec, w);
        }
        /* the record is the smaller */
        assert_true(strlen(t.rec) < strlen(spec));
        /* the same under its id (what a store answers) */
        task_slice_name(t.due_ms, 3, slice);
        task_id_make(slice, t.execute_at_ms, t.key, id, sizeof(id));
        char *back = task_rec_spec(t.rec, strlen(t.rec), id);
        assert_non_null(back);
        assert_string_equal(back, spec);
        free(back);
        /* and a task parsed from the spec has the same record */
        parse_ok(spec, T0_MS, &t2);
        assert_string_equal(t2.rec, t.rec);
        task_input_free(&t2);
        cJSON_Delete(a);
        cJSON_Delete(want);
        free(spec);
        /* a member added (a schedule's run) is in the spec */
        assert_int_equal(task_input_add_member(&t, "schedule_id", "sch-1"), 0);
        spec = task_input_spec(&t);
        a = cJSON_Parse(spec);
        assert_non_null(a);
        assert_string_equal(str_field(a, "schedule_id"), "sch-1");
        back = task_rec_spec(t.rec, strlen(t.rec), id);
        assert_string_equal(back, spec);
        cJSON_Delete(a);
        free(back);
        free(spec);
        task_input_free(&t);
        assert_null(t.rec);
    }
}

/* What task_spec_read gives, against what cJSON reads from the spec: the
 * same task from its record and from its spec, member for member; the body
 * byte for byte what cJSON prints of req (what was sent before a task was
 * read once). */
static void spec_matches(const task_spec *ts, const char *spec_json)
{
    cJSON *o = cJSON_Parse(spec_json);
    assert_non_null(o);
    assert_null(ts->bad);
    assert_string_equal(ts->url, str_field(o, "callback_url"));
    assert_string_equal(ts->method, str_field(o, "method"));
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "queue");
    assert_string_equal(ts->queue, cJSON_IsString(q) ? q->valuestring : "");
    const cJSON *retry = cJSON_GetObjectItemCaseSensitive(o, "retry");
    assert_int_equal(ts->max_attempts,
                     (int)cJSON_GetObjectItemCaseSensitive(retry, "max_attempts")->valuedouble);
    assert_int_equal(ts->backoff_ms,
                     (int64_t)cJSON_GetObjectItemCaseSensitive(retry, "backoff_ms")->valuedouble);
    assert_int_equal(ts->timeout_ms,
                     (int64_t)cJSON_GetObjectItemCaseSensitive(o, "timeout_ms")->valuedouble);
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(o, "expires_at");
    assert_int_equal(ts->expires_ms, ex ? (int64_t)ex->valuedouble : 0);
    const char *spans[] = {"header", "on_failure", "traceparent", "tracestate"};
    const task_span *got[] = {&ts->header, &ts->on_failure, &ts->traceparent, &ts->tracestate};
    for (int k = 0; k < 4; k++) {
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(o, spans[k]);
        if (!want) {
            assert_int_equal(got[k]->n, 0);
            continue;
        }
        cJSON *v = cJSON_ParseWithLength(got[k]->p, got[k]->n);
        assert_true(cJSON_Compare(v, want, 1));
        cJSON_Delete(v);
    }
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(o, "req");
    size_t len;
    int json;
    char *buf;
    const char *body = task_spec_body(ts, &len, &json, &buf);
    char *want = !req ? xstrdup("") : cJSON_IsString(req) ? xstrdup(req->valuestring)
                                                          : cJSON_PrintUnformatted(req);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(body, want, len);
    assert_int_equal(json, req && !cJSON_IsString(req));
    free(buf);
    free(want);
    cJSON_Delete(o);
}

static void test_spec_read(void **state)
{
    (void)state;
    static const char *inputs[] = {
        "{\"callback_url\":\"http://cb.test/hook\"}",
        "{\"key\":\"k.1:x-y_z\",\"callback_url\":\"https://cb.test/a?b=\\\"c\\\"&d=%0A\","
        "\"method\":\"GET\",\"header\":{\"X-A\":\"1\",\"X-B\":\"two \\\"words\\\"?\"},"
        "\"req\":{\"a\":[1,2.5,\"x\\ny\",{\"}\":\"]\"}],\"b\":null,\"c\":-0.0001},"
        "\"execute_at\":1795000030000,"
        "\"retry\":{\"max_attempts\":9,\"backoff_ms\":77},\"timeout_ms\":300000,"
        "\"queue\":\"billing.eu\",\"on_failure\":{\"callback_url\":\"http://cb.test/dead\","
        "\"header\":{\"X-C\":\"3\"}}}",
        "{\"callback_url\":\"http://cb.test/hook\",\"req\":\"\",\"retry\":{\"max_attempts\":5},"
        "\"queue\":\"default\",\"method\":\"DELETE\"}",
        "{\"callback_url\":\"http://cb.test/hook\",\"req\":\"line\\nq\\\"\\\\ \\u00e9\\ud83d\\ude00\"}",
        "{\"callback_url\":\"http://cb.test/hook\",\"req\":[true,false,null,\"{[\"],"
        "\"method\":\"PATCH\"}",
        "{\"callback_url\":\"http://cb.test/hook\",\"req\":{},\"retry\":{\"backoff_ms\":2000}}",
    };
    for (size_t i = 0; i < sizeof(inputs) / sizeof(*inputs); i++) {
        task_input t;
        char slice[TASK_SLICE_MAX], id[TASK_ID_MAX];
        parse_ok(inputs[i], T0_MS, &t);
        if (i % 2) {
            /* what tickd adds beside the API's fields */
            assert_int_equal(task_input_add_member(&t, "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), 0);
            assert_int_equal(task_input_add_member(&t, "tracestate", "a=b,c=\"d\""), 0);
            assert_int_equal(task_input_add_json(&t, "expires_at", "1795000090000", 13), 0);
        }
        task_slice_name(t.due_ms, 3, slice);
        task_id_make(slice, t.execute_at_ms, t.key, id, sizeof(id));
        char *spec = task_input_spec(&t);
        task_spec *a = task_spec_read(t.rec, strlen(t.rec)), *b = task_spec_read(spec, strlen(spec));
        spec_matches(a, spec);
        spec_matches(b, spec);
        /* and the JSON the event shows is the spec */
        char *back = task_spec_json(a, id);
        cJSON *x = cJSON_Parse(back), *y = cJSON_Parse(spec);
        assert_true(cJSON_Compare(x, y, 1));
        cJSON_Delete(x);
        cJSON_Delete(y);
        free(back);
        free(spec);
        task_spec_free(a);
        task_spec_free(b);
        task_input_free(&t);
    }
    /* strings whose quotes follow runs of backslashes of every length (the
     * reader finds a string's end by its quotes: an even run before one
     * ends the string, an odd one escapes it), alone and inside containers,
     * in req and in a header: each read back as cJSON prints it */
    static const char *pieces[] = {"a", "\"", "\\", "\\\\", "\\\"", "\n", "\xc3\xa9", "}", "]"};
    uint64_t seed = 1776;
    for (int i = 0; i < 400; i++) {
        char raw[64] = "";
        int np = (int)(testutil_rnd(&seed) % 9);
        for (int k = 0; k < np; k++)
            strcat(raw, pieces[testutil_rnd(&seed) % (sizeof(pieces) / sizeof(*pieces))]);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "callback_url", "http://cb.test/hook");
        if (i % 3 == 0) {
            cJSON_AddStringToObject(o, "req", raw);
        } else {
            cJSON *req = cJSON_AddObjectToObject(o, "req");
            cJSON_AddStringToObject(req, raw, raw);
            cJSON *arr = cJSON_AddArrayToObject(req, "t");
            cJSON_AddItemToArray(arr, cJSON_CreateString(raw));
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(i));
        }
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "header"), "X-S",
                                i % 2 ? "plain" : "q\\\"");
        char *text = cJSON_PrintUnformatted(o);
        task_input t;
        parse_ok(text, T0_MS, &t);
        char *spec = task_input_spec(&t);
        task_spec *a = task_spec_read(t.rec, strlen(t.rec));
        spec_matches(a, spec);
        task_spec_free(a);
        free(spec);
        task_input_free(&t);
        free(text);
        cJSON_Delete(o);
    }
    /* a member given twice counts the first time, as cJSON reads it */
    const char *dup = "\"http://x/\"\n\n1000\n\n\n{\"traceparent\":\"a\",\"req\":1,"
                      "\"traceparent\":\"b\",\"req\":2}";
    task_spec *d = task_spec_read(dup, strlen(dup));
    char *tp = task_span_string(d->traceparent);
    assert_string_equal(tp, "a");
    assert_int_equal(d->req.n, 1);
    assert_int_equal(d->req.p[0], '1');
    free(tp);
    /* a word copied in place: whole when it fits and holds no escape */
    char w[4];
    task_span_word(d->traceparent, w, sizeof(w));
    assert_string_equal(w, "a");
    task_span w3 = {"\"abc\"", 5}, w4 = {"\"abcd\"", 6}, esc = {"\"a\\\"\"", 5};
    task_span num = {"12", 2}, none = {NULL, 0};
    task_span_word(w3, w, sizeof(w));
    assert_string_equal(w, "abc");
    task_span_word(w4, w, sizeof(w)); /* no room for its NUL */
    assert_string_equal(w, "");
    task_span_word(esc, w, sizeof(w));
    assert_string_equal(w, "");
    task_span_word(num, w, sizeof(w)); /* not a string */
    assert_string_equal(w, "");
    task_span_word(none, w, sizeof(w));
    assert_string_equal(w, "");
    task_spec_free(d);
    /* what cannot be read is said, not guessed at; never read past its end */
    static const char *bad[] = {
        "", "\"u\"\n\n1\n\n\n{", "\"u\"\n\n1\n\n\n{\"req\":", "\"u\"\n\n1\n\n\n{\"req\":\"x}",
        "\"u\"\n\n1\n\n\n{\"req\":[1,{2]}", "{", "{\"callback_url\":\"http://x/\"}",
        "{\"callback_url\":\"http://x/\",\"method\":\"POST\"", "\"u\"\n\n1\n\n\n{\"a\" 1}",
        "garbage",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        task_spec *ts = task_spec_read(bad[i], strlen(bad[i]));
        assert_non_null(ts->bad);
        assert_int_equal(ts->max_attempts, 1);
        assert_non_null(ts->url);
        assert_null(task_spec_json(ts, "202611221000.3.1795000030000.abc"));
        task_spec_free(ts);
    }
}

/* A URL's check is remembered only while the check set stays: accepted
 * URLs come back accepted, and a new check is applied to every URL again. */
static int deny_calls;
static int deny_host(void *priv, const char *host, int port, char *why, size_t whylen)
{
    (void)port;
    deny_calls++;
    if (strcmp(host, (const char *)priv) != 0) return 0;
    snprintf(why, whylen, "denied %s", host);
    return -1;
}

static void test_url_check_remembered(void **state)
{
    (void)state;
    char err[300], bad[] = "bad.test", ok[] = "ok.test";
    task_set_url_check(deny_host, bad);
    deny_calls = 0;
    assert_int_equal(task_url_valid("http://ok.test/a", err, sizeof(err)), 0);
    assert_int_equal(task_url_valid("http://ok.test/a", err, sizeof(err)), 0);
    assert_int_equal(deny_calls, 1); /* the second time, remembered */
    assert_int_equal(task_url_valid("http://bad.test/a", err, sizeof(err)), -1);
    assert_string_equal(err, "callback_url: denied bad.test");
    assert_int_equal(task_url_valid("http://bad.test/a", err, sizeof(err)), -1);
    assert_int_equal(deny_calls, 3); /* a refusal is never remembered */
    /* another check: what was accepted is checked again */
    task_set_url_check(deny_host, ok);
    assert_int_equal(task_url_valid("http://ok.test/a", err, sizeof(err)), -1);
    assert_int_equal(task_url_valid("http://bad.test/a", err, sizeof(err)), 0);
    /* many URLs, each checked whole (the same slot holds another URL) */
    for (int i = 0; i < 500; i++) {
        char url[64];
        snprintf(url, sizeof(url), "http://h%d.test/%d", i, i);
        assert_int_equal(task_url_valid(url, err, sizeof(err)), 0);
    }
    assert_int_equal(task_url_valid("http://ok.test/a", err, sizeof(err)), -1);
    task_set_url_check(NULL, NULL);
}

static void test_record_malformed(void **state)
{
    (void)state;
    const char *id = "202611221000.3.1795000030000.abc";
    static const char *bad[] = {
        "", "\"u\"", "\"u\"\n\n1\n\n\n", "\"u\"\n\n1\n\n\n{", "u\n\n1\n\n\n{}",
        "\"u\"\n\n1\n\nx\n{}", "\"u\"\n\n1\n\n\n", "\n\n\n\n\n{}",
        /* parts pasted into the spec hold only what they may */
        "\"u\"\nget\n1\n\n\n{}", "\"u\"\nPOST\"\n1\n\n\n{}", "\"u\"\n\n\n\n\n{}",
        "\"u\"\n\n12a\n\n\n{}", "\"u\"\n\n1234567890\n\n\n{}", "\"u\"\n\n1\nq q\n\n{}",
        "\"u\"\n\n1\nq\"\n\n{}", "\"u\"\n\n1\n\n5,1000x\n{}", "\"u\"\n\n1\n\n5\n{}",
        "\"u\"\n\n1\n\n,\n{}", "\"u\n\n1\n\n\n{}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        assert_null(task_rec_spec(bad[i], strlen(bad[i]), id));
    /* a good record, an id that names nothing */
    assert_null(task_rec_spec("\"u\"\n\n1\n\n\n{}", 11, "garbage"));
    /* a spec as schema 1 stored it is handed back as it is */
    char *s = task_rec_spec("{\"key\":\"a\"}", 11, "garbage");
    assert_string_equal(s, "{\"key\":\"a\"}");
    free(s);
    /* a length, not a NUL, ends the record */
    s = task_rec_spec("\"u\"\n\n1\n\n\n{}JUNK", 11, id);
    assert_non_null(s);
    cJSON *o = cJSON_Parse(s);
    assert_non_null(o);
    assert_string_equal(str_field(o, "key"), "abc");
    assert_true(num_field(o, "execute_at") == 1795000030000.0);
    assert_true(num_field(o, "timeout_ms") == 1);
    cJSON_Delete(o);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_name_known),
        cmocka_unit_test(test_slice_against_libc),
        cmocka_unit_test(test_record_round_trip),
        cmocka_unit_test(test_spec_read),
        cmocka_unit_test(test_url_check_remembered),
        cmocka_unit_test(test_record_malformed),
        cmocka_unit_test(test_slice_minute_round_trip),
        cmocka_unit_test(test_slice_minute_malformed),
        cmocka_unit_test(test_id_round_trip),
        cmocka_unit_test(test_id_malformed),
        cmocka_unit_test(test_key_valid),
        cmocka_unit_test(test_key_random),
        cmocka_unit_test(test_bucket_known_and_stable),
        cmocka_unit_test(test_bucket_spread),
        cmocka_unit_test(test_rfc3339_valid),
        cmocka_unit_test(test_time_bounds),
        cmocka_unit_test(test_cursor_valid),
        cmocka_unit_test(test_json_num_bounds),
        cmocka_unit_test(test_rfc3339_invalid),
        cmocka_unit_test(test_backoff_doubling_and_cap),
        cmocka_unit_test(test_backoff_jitter),
        cmocka_unit_test(test_input_defaults),
        cmocka_unit_test(test_input_on_failure),
        cmocka_unit_test(test_input_all_fields),
        cmocka_unit_test(test_input_methods),
        cmocka_unit_test(test_input_execute_at),
        cmocka_unit_test(test_input_delay),
        cmocka_unit_test(test_input_req_verbatim),
        cmocka_unit_test(test_input_bounds_accepted),
        cmocka_unit_test(test_input_url_length),
        cmocka_unit_test(test_input_not_object),
        cmocka_unit_test(test_input_unknown_field),
        cmocka_unit_test(test_input_key_errors),
        cmocka_unit_test(test_input_key_reserved),
        cmocka_unit_test(test_input_url_errors),
        cmocka_unit_test(test_input_method_errors),
        cmocka_unit_test(test_input_header_errors),
        cmocka_unit_test(test_input_time_errors),
        cmocka_unit_test(test_input_retry_timeout_errors),
        cmocka_unit_test(test_input_error_leaves_out_clean),
        cmocka_unit_test(test_json_nul_found_everywhere),
        cmocka_unit_test(test_json_nul_counts_and_survives_garbage),
        cmocka_unit_test(test_json_plain),
        cmocka_unit_test(test_json_utf8_found_everywhere),
        cmocka_unit_test(test_input_header_control_and_duplicates),
        cmocka_unit_test(test_input_req_numbers_exact_or_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
