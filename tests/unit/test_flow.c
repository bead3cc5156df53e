/* test_flow.c -- unit tests for flow.c (settings, destinations, the
 * replica's copy of the settings) and a task's queue (task.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/flow.h"
#include "store/store.h"
#include "model/task.h"

#include "testutil.h"

static int parse(const char *json, int queue, flow_settings *fs, char *err)
{
    cJSON *o = cJSON_Parse(json);
    int rc = flow_settings_parse(o, queue, fs, err, 256);
    cJSON_Delete(o);
    return rc;
}

static void test_settings(void **state)
{
    (void)state;
    flow_settings fs;
    char err[256];
    assert_int_equal(parse("{\"rate\":0.5,\"burst\":3,\"max_concurrency\":7,\"paused\":true}", 1,
                           &fs, err), 0);
    assert_true(fs.rate == 0.5 && fs.burst == 3 && fs.max_concurrency == 7 && fs.paused);
    char *json = flow_settings_json(&fs, 1);
    assert_string_equal(json, "{\"rate\":0.5,\"burst\":3,\"max_concurrency\":7,\"paused\":true}");
    free(json);
    assert_int_equal(parse("{\"rate\":null,\"max_concurrency\":null}", 1, &fs, err), 0);
    assert_true(fs.rate == 0 && fs.max_concurrency == 0);
    json = flow_settings_json(&fs, 1);
    assert_string_equal(json, "{}");
    free(json);
    /* a rate's burst is written out: 1 when none was given */
    assert_int_equal(parse("{\"rate\":50}", 0, &fs, err), 0);
    json = flow_settings_json(&fs, 0);
    assert_string_equal(json, "{\"rate\":50,\"burst\":1}");
    free(json);

    static const struct { const char *json; int queue; const char *prefix; } bad[] = {
        {"{\"rate\":-1}", 1, "rate:"},
        {"{\"rate\":0}", 1, "rate:"},
        {"{\"rate\":1e300}", 1, "rate:"},
        {"{\"rate\":\"5\"}", 1, "rate:"},
        {"{\"burst\":2}", 1, "burst:"},
        {"{\"rate\":1,\"burst\":0}", 1, "burst:"},
        {"{\"rate\":1,\"burst\":2.5}", 1, "burst:"},
        {"{\"max_concurrency\":0}", 1, "max_concurrency:"},
        {"{\"max_concurrency\":-3}", 1, "max_concurrency:"},
        {"{\"max_concurrency\":true}", 1, "max_concurrency:"},
        {"{\"max_concurrency\":1000001}", 1, "max_concurrency:"},
        {"{\"paused\":1}", 1, "paused:"},
        {"{\"paused\":true}", 0, "paused:"},
        {"{\"rate\":1,\"rate\":2}", 1, "rate: given more than once"},
        {"{\"Rate\":1}", 1, "Rate: unknown field"},
        {"[]", 1, "body:"},
        {"7", 0, "body:"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        err[0] = '\0';
        if (parse(bad[i].json, bad[i].queue, &fs, err) == 0) fail_msg("%s accepted", bad[i].json);
        if (!testutil_starts_with(err, bad[i].prefix))
            fail_msg("%s: \"%s\" does not begin with \"%s\"", bad[i].json, err, bad[i].prefix);
    }
}

static void test_destinations(void **state)
{
    (void)state;
    static const char *good[] = {"example.com", "api.example.com:8443", "127.0.0.1:9000",
                                 "[::1]", "[::1]:80", "a-b.c", "localhost:1", "x:65535"};
    static const char *bad[] = {"", "Example.com", "example.com/x", "http://example.com",
                                "user@example.com", "example.com:", "example.com:0",
                                "example.com:65536", "example.com:08", "[::1", "[]",
                                "[::1]x", "ex ample.com", ":80", "example.com:123456"};
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
        if (!flow_dest_valid(good[i])) fail_msg("%s refused", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        if (flow_dest_valid(bad[i])) fail_msg("%s accepted", bad[i]);
    char d[FLOW_DEST_MAX];
    assert_int_equal(flow_dest_of_url("http://API.Example.com/x?y=1", d), 0);
    assert_string_equal(d, "api.example.com:80");
    assert_int_equal(flow_dest_of_url("https://example.com:8443/", d), 0);
    assert_string_equal(d, "example.com:8443");
    assert_int_equal(flow_dest_of_url("http://[::1]:9000/", d), 0);
    assert_string_equal(d, "[::1]:9000");
    assert_int_equal(flow_dest_of_url("not a url", d), -1);
}

/* Each case's input gives its destination through fn. */
typedef struct dest_case {
    const char *in, *dest;
} dest_case;

static void check_dests(int (*fn)(const char *, char *), const dest_case *c, size_t n)
{
    char d[FLOW_DEST_MAX];
    for (size_t i = 0; i < n; i++) {
        if (fn(c[i].in, d) != 0) fail_msg("%s refused", c[i].in);
        if (strcmp(d, c[i].dest) != 0) fail_msg("%s: %s, not %s", c[i].in, d, c[i].dest);
    }
}

/* One destination, one form: every spelling of an address or a name that
 * reaches the same place gives the same destination. */
static void test_destination_one_form(void **state)
{
    (void)state;
    static const dest_case urls[] = {
        {"http://127.0.0.1:9000/", "127.0.0.1:9000"},
        {"http://[::ffff:127.0.0.1]:9000/", "127.0.0.1:9000"},
        {"http://[::FFFF:7f00:1]:9000/", "127.0.0.1:9000"},
        {"http://127.1:9000/", "127.0.0.1:9000"},
        {"http://2130706433:9000/", "127.0.0.1:9000"},
        {"http://0x7f.0.0.1:9000/", "127.0.0.1:9000"},
        {"http://0177.0.0.1:9000/", "127.0.0.1:9000"},
        {"http://127.1.:9000/", "127.0.0.1:9000"},
        {"http://127.0.0.1:09000/", "127.0.0.1:9000"},
        {"http://[0:0:0:0:0:0:0:1]:9000/", "[::1]:9000"},
        {"http://[::1%25lo]:9000/", "[::1]:9000"},
        {"http://[2001:DB8::1]/", "[2001:db8::1]:80"},
        {"http://EXAMPLE.com./", "example.com:80"},
        {"http://example.com:80/", "example.com:80"},
        {"https://example.com/", "example.com:443"},
        {"https://example.com:443/x", "example.com:443"},
        {"http://%65xample.com/", "example.com:80"},
        {"http://user:pw@Example.COM:8080/", "example.com:8080"},
        {"http://LocalHost/", "localhost:80"},  /* a name: resolved when it connects */
    };
    check_dests(flow_dest_of_url, urls, sizeof(urls) / sizeof(*urls));
    /* the same again, each case twice in a row and after every other (the
     * last URL's destination is kept: a repeat gives it, never another's),
     * with URLs that give none between them */
    char d[FLOW_DEST_MAX];
    size_t nu = sizeof(urls) / sizeof(*urls);
    for (size_t i = 0; i < nu; i++) {
        for (size_t k = 0; k < nu; k++) {
            const dest_case *c = &urls[(i + k) % nu];
            for (int twice = 0; twice < 2; twice++) {
                if (flow_dest_of_url(c->in, d) != 0) fail_msg("%s refused", c->in);
                if (strcmp(d, c->dest) != 0) fail_msg("%s: %s, not %s", c->in, d, c->dest);
            }
            if (k % 3 == 0) {
                assert_int_equal(flow_dest_of_url("not a url", d), -1);
                assert_int_equal(flow_dest_of_url("not a url", d), -1);
            }
        }
    }
    /* URLs alike but for their last bytes, each after the others */
    static const dest_case near[] = {
        {"http://127.0.0.1:9000/", "127.0.0.1:9000"},
        {"http://127.0.0.1:9001/", "127.0.0.1:9001"},
        {"http://127.0.0.1:900/", "127.0.0.1:900"},
        {"http://127.0.0.1:9001/x", "127.0.0.1:9001"},
        {"http://127.0.0.1/", "127.0.0.1:80"},
    };
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof(near) / sizeof(*near); i++) {
            const dest_case *c = &near[(i * (size_t)(round + 2)) % (sizeof(near) / sizeof(*near))];
            if (flow_dest_of_url(c->in, d) != 0) fail_msg("%s refused", c->in);
            if (strcmp(d, c->dest) != 0) fail_msg("%s: %s, not %s", c->in, d, c->dest);
        }
    assert_int_equal(flow_dest_of_url("http://127.0.0.1:90000/", d), -1);
    /* one the start of the last one read, and the last one the start of
     * the next */
    assert_int_equal(flow_dest_of_url("http://127.0.0.1:9001/", d), 0);
    assert_int_equal(flow_dest_of_url("http://127.0.0.1:900", d), 0);
    assert_string_equal(d, "127.0.0.1:900");
    assert_int_equal(flow_dest_of_url("http://127.0.0.1:9001/", d), 0);
    assert_string_equal(d, "127.0.0.1:9001");
    /* two too long to keep, alike in their first 600 bytes */
    char l1[700], l2[700];
    snprintf(l1, sizeof(l1), "http://%0600d@h1.example/", 0);
    snprintf(l2, sizeof(l2), "http://%0600d@h2.example/", 0);
    for (int twice = 0; twice < 2; twice++) {
        assert_int_equal(flow_dest_of_url(l1, d), 0);
        assert_string_equal(d, "h1.example:80");
        assert_int_equal(flow_dest_of_url(l2, d), 0);
        assert_string_equal(d, "h2.example:80");
    }
    /* past what is kept (a URL of 512 bytes or more): each read anew */
    char longurl[700];
    snprintf(longurl, sizeof(longurl), "http://Long.Example.com:81/%0600d", 7);
    for (int twice = 0; twice < 2; twice++) {
        assert_int_equal(flow_dest_of_url(longurl, d), 0);
        assert_string_equal(d, "long.example.com:81");
        assert_int_equal(flow_dest_of_url("http://[::1]:9000/", d), 0);
        assert_string_equal(d, "[::1]:9000");
    }
    /* a destination named in the API takes the same form; a port only when
     * named (without one it is every port of the host) */
    static const dest_case names[] = {
        {"127.0.0.1", "127.0.0.1"},
        {"[::ffff:127.0.0.1]:9000", "127.0.0.1:9000"},
        {"[::ffff:7f00:1]", "127.0.0.1"},
        {"127.1", "127.0.0.1"},
        {"2130706433:9000", "127.0.0.1:9000"},
        {"0x7f.1", "127.0.0.1"},
        {"example.com.", "example.com"},
        {"example.com.:8443", "example.com:8443"},
        {"[0::1]:80", "[::1]:80"},
        {"localhost", "localhost"},
    };
    check_dests(flow_dest_canon, names, sizeof(names) / sizeof(*names));
    assert_int_equal(flow_dest_canon("Example.com", d), -1);
    assert_int_equal(flow_dest_canon("example.com/x", d), -1);
    assert_int_equal(flow_dest_canon("", d), -1);
}

/* A task's route, its spec read as the store hands it over (task_spec.h). */
static int route(const flow_cache *fc, const char *text, int64_t now_ms, char *q, char *d)
{
    task_spec *spec = task_spec_read(text, strlen(text));
    int rc = flow_cache_route(fc, spec, now_ms, q, d);
    task_spec_free(spec);
    return rc;
}

static void test_cache_route(void **state)
{
    (void)state;
    flow_cache *fc = flow_cache_new(100);
    char q[TASK_QUEUE_MAX], d[FLOW_DEST_MAX];
    const char *spec = "{\"key\":\"k\",\"callback_url\":\"http://h.example:81/x\",\"method\":\"POST\","
                       "\"execute_at\":1,\"retry\":{\"max_attempts\":5,\"backoff_ms\":1000},"
                       "\"timeout_ms\":2500,\"queue\":\"mail\"}";
    assert_true(flow_cache_empty(fc));
    assert_int_equal(route(fc, spec, 1000, q, d), 0);
    assert_string_equal(q, "mail");
    assert_string_equal(d, "h.example:81");
    /* the generation: the same over a page that changes nothing and over
     * time, another once settings or holds come in (a route's 0 is only
     * trusted while it is the same: scheduler.c) */
    uint64_t g = flow_cache_gen(fc);
    flow_cache_apply(fc, NULL, 0, 0, 1, 1000);
    assert_true(flow_cache_gen(fc) == g);
    /* a host-wide destination applies to a URL with a port */
    store_flow_info items[] = {{.key = "d:h.example", .settings = "{\"rate\":1}"}};
    flow_cache_apply(fc, items, 1, 1, 1, 1000);
    assert_true(flow_cache_gen(fc) != g);
    g = flow_cache_gen(fc);
    flow_cache_set_waiting(fc, 3);
    assert_int_equal(flow_cache_waiting(fc), 3);
    assert_int_equal(route(fc, spec, 1000, q, d), 1);
    assert_string_equal(d, "h.example");
    /* a change without settings removes them */
    store_flow_info gone[] = {{.key = "d:h.example"}};
    flow_cache_apply(fc, gone, 1, 0, 1, 1000);
    assert_int_equal(route(fc, spec, 1000, q, d), 0);
    assert_true(flow_cache_empty(fc));
    assert_true(flow_cache_gen(fc) != g);
    /* a hold seen here outlives a copy from scratch that does not have it */
    g = flow_cache_gen(fc);
    flow_cache_hold(fc, "h.example:81", 5000, 1000);
    assert_true(flow_cache_gen(fc) != g);
    g = flow_cache_gen(fc);
    flow_cache_apply(fc, NULL, 0, 1, 1, 2000);
    assert_true(flow_cache_gen(fc) != g);
    assert_int_equal(route(fc, spec, 2000, q, d), 1);
    assert_int_equal(route(fc, spec, 6000, q, d), 0);
    assert_int_equal(route(fc, "not json", 6000, q, d), -1);
    /* an ended hold leaves the copy */
    flow_cache_apply(fc, NULL, 0, 0, 1, 6000);
    assert_true(flow_cache_empty(fc));
    flow_cache_free(fc);
}

/* Holds past the bound: the oldest set goes; a copy from scratch built over
 * several pages is put in use only with its last page. */
static void test_cache_bounds(void **state)
{
    (void)state;
    flow_cache *fc = flow_cache_new(3);
    char name[32];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "h%d.example:80", i);
        flow_cache_hold(fc, name, 10000 + i, 1000);
    }
    assert_int_equal(flow_cache_holds(fc), 3);
    char q[TASK_QUEUE_MAX], d[FLOW_DEST_MAX];
    const char *s0 = "{\"method\":\"GET\",\"callback_url\":\"http://h0.example/x\"}";
    const char *s4 = "{\"method\":\"GET\",\"callback_url\":\"http://h4.example/x\"}";
    assert_int_equal(route(fc, s0, 2000, q, d), 0);
    assert_int_equal(route(fc, s4, 2000, q, d), 1);
    /* set again, h2 becomes the newest: h3 is the oldest now */
    flow_cache_hold(fc, "h2.example:80", 20000, 2000);
    flow_cache_hold(fc, "h9.example:80", 20000, 2000);
    const char *s2 = "{\"method\":\"GET\",\"callback_url\":\"http://h2.example/x\"}";
    const char *s3 = "{\"method\":\"GET\",\"callback_url\":\"http://h3.example/x\"}";
    assert_int_equal(route(fc, s2, 2000, q, d), 1);
    assert_int_equal(route(fc, s3, 2000, q, d), 0);
    /* many entries: found by hash */
    store_flow_info it[1];
    char key[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof(key), "q:q%d", i);
        it[0] = (store_flow_info){.key = key, .settings = "{\"rate\":1}"};
        flow_cache_apply(fc, it, 1, i == 0, i == 19999, 2000);
        if (i < 19999)
            assert_int_equal(route(fc, "{\"callback_url\":\"http://x/\",\"method\":\"POST\",\"queue\":\"q5\"}",
                                              2000, q, d), 0);
    }
    assert_int_equal(route(fc, "{\"callback_url\":\"http://x/\",\"method\":\"POST\",\"queue\":\"q5\"}", 2000,
                           q, d), 1);
    assert_int_equal(route(fc, s2, 2000, q, d), 1);
    flow_cache_free(fc);
}

static void test_task_queue(void **state)
{
    (void)state;
    cJSON *o = cJSON_Parse("{\"callback_url\":\"http://x/\",\"queue\":\"q.1-a_b\","
                           "\"req\":{\"timeout_ms\":5,\"queue\":\"fake\"},"
                           "\"on_failure\":{\"callback_url\":\"http://y/\","
                           "\"header\":{\"X\":\",\\\"queue\\\":\\\"no\"}}}");
    task_input t;
    char err[256];
    assert_int_equal(task_input_parse(o, 1000, &t, err, sizeof(err)), 0);
    assert_string_equal(t.queue, "q.1-a_b");
    task_input_free(&t);
    cJSON_Delete(o);
    /* the default queue is not written */
    o = cJSON_Parse("{\"callback_url\":\"http://x/\",\"queue\":\"default\"}");
    assert_int_equal(task_input_parse(o, 1000, &t, err, sizeof(err)), 0);
    assert_string_equal(t.queue, "");
    char *spec = task_input_spec(&t);
    assert_null(strstr(spec, "queue"));
    free(spec);
    task_input_free(&t);
    cJSON_Delete(o);
    assert_true(task_queue_valid("a"));
    assert_false(task_queue_valid(""));
    assert_false(task_queue_valid("a:b"));
    assert_false(task_queue_valid("a b"));
    char long_name[80];
    memset(long_name, 'x', 65);
    long_name[65] = '\0';
    assert_false(task_queue_valid(long_name));
    long_name[64] = '\0';
    assert_true(task_queue_valid(long_name));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_destinations),
        cmocka_unit_test(test_destination_one_form),
        cmocka_unit_test(test_cache_route),
        cmocka_unit_test(test_cache_bounds),
        cmocka_unit_test(test_task_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
