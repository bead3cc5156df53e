/* test_schedule.c -- unit tests for schedule definitions and run planning:
 * validation and its messages, the normalized form read back, the runs one
 * pass makes (lead, times, end_at, catch_up all / latest / none, batches),
 * and a run's task (key, id, schedule_id). Times are given, no clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/schedule.h"

#include "testutil.h"

#define NOW INT64_C(1800000000000) /* 2027-01-15T08:00:00Z */
#define LEAD 3500

static char err[400];

static schedule_def def(const char *json)
{
    schedule_def d;
    cJSON *o = cJSON_Parse(json);
    if (!o) fail_msg("not JSON: %s", json);
    if (schedule_def_parse(o, NOW, &d, err, sizeof(err)) != 0) fail_msg("%s: %s", json, err);
    cJSON_Delete(o);
    return d;
}

static const char *refuse(const char *json)
{
    schedule_def d;
    cJSON *o = cJSON_Parse(json);
    if (!o) fail_msg("not JSON: %s", json);
    int rc = schedule_def_parse(o, NOW, &d, err, sizeof(err));
    cJSON_Delete(o);
    if (rc == 0) fail_msg("accepted: %s", json);
    return err;
}

static void test_parse_and_load(void **state)
{
    (void)state;
    schedule_def d = def("{\"key\":\"k\",\"cron\":\"0 9 * * MON-FRI\",\"tz\":\"Europe/Berlin\","
                         "\"times\":3,\"task\":{\"callback_url\":\"http://h/x\"}}");
    assert_string_equal(d.key, "k");
    assert_int_equal(d.every_ms, 0);
    assert_int_equal(d.times, 3);
    assert_int_equal(d.catch_up, CATCH_LATEST);
    schedule_def back;
    assert_int_equal(schedule_def_load(d.json, &back, err, sizeof(err)), 0);
    assert_string_equal(back.json, d.json);
    assert_string_equal(back.tz_name, "Europe/Berlin");
    schedule_def_free(&back);
    schedule_def_free(&d);

    /* every_ms: start_at defaults to now + every_ms, and is kept */
    d = def("{\"every_ms\":60000,\"task\":{\"callback_url\":\"http://h/\"}}");
    assert_true(d.key_generated);
    assert_int_equal(d.start_at_ms, NOW + 60000);
    assert_non_null(strstr(d.json, "\"start_at\":1800000060000"));
    schedule_def_free(&d);

    char id[SCHED_ID_MAX];
    schedule_id("abc", id);
    assert_string_equal(id, "sch.abc");
    assert_string_equal(schedule_id_key(id), "abc");
    assert_null(schedule_id_key("abc"));
    assert_null(schedule_id_key("sch."));
    assert_null(schedule_id_key("sch.a/b"));
}

static void test_errors(void **state)
{
    (void)state;
    static const struct { const char *json, *msg; } cases[] = {
        {"{\"cron\":\"0 0 32 * *\",\"task\":{\"callback_url\":\"http://h/\"}}",
         "cron: field 3 (day of month): 32 is out of range 1-31"},
        {"{\"cron\":\"0 9 * * *\",\"tz\":\"No/Where\",\"task\":{\"callback_url\":\"http://h/\"}}",
         "tz: "},
        {"{\"cron\":\"0 9 * * *\",\"every_ms\":1000,\"task\":{}}", "every_ms: give every_ms or cron"},
        {"{\"every_ms\":1000,\"times\":0,\"task\":{\"callback_url\":\"http://h/\"}}", "times: "},
        {"{\"every_ms\":1000,\"times\":1.5,\"task\":{\"callback_url\":\"http://h/\"}}", "times: "},
        {"{\"every_ms\":1000,\"start_at\":1900000000000,\"end_at\":1899999999999,"
         "\"task\":{\"callback_url\":\"http://h/\"}}", "end_at: before start_at"},
        {"{\"every_ms\":1000,\"task\":{\"callback_url\":\"http://h/\",\"key\":\"x\"}}",
         "task.key: not allowed"},
        {"{\"every_ms\":1000,\"task\":{\"callback_url\":\"http://h/\",\"timeout_ms\":0}}",
         "task.timeout_ms:"},
        {"{\"every_ms\":1000}", "task: required"},
        {"{\"every_ms\":1000,\"task\":{\"callback_url\":\"http://h/\"},\"times\":2,\"times\":3}",
         "times: given more than once"},
        {"{\"cron\":\"0 0 30 2 *\",\"task\":{\"callback_url\":\"http://h/\"}}",
         "cron: the schedule would never run"},
        {"[]", "schedule: must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        const char *got = refuse(cases[i].json);
        if (!testutil_starts_with(got, cases[i].msg))
            fail_msg("%s: got \"%s\", want \"%s...\"", cases[i].json, got, cases[i].msg);
    }
}

/* Times from the API are 1970 to the end of 9999; a definition stored by a
 * tickd before those bounds (start_at before 1970) still reads back and runs,
 * rather than failing every pass for ever. */
static void test_time_bounds(void **state)
{
    (void)state;
    const char *got = refuse("{\"every_ms\":1000,\"start_at\":\"1969-12-31T23:59:59Z\","
                             "\"task\":{\"callback_url\":\"http://h/\"}}");
    assert_string_equal(got, "start_at: before 1970");
    got = refuse("{\"every_ms\":1000,\"end_at\":253402300800000,"
                 "\"task\":{\"callback_url\":\"http://h/\"}}");
    assert_true(strncmp(got, "end_at: must be integer Unix milliseconds", 41) == 0);
    /* the last time: its only run, none after */
    schedule_def d = def("{\"every_ms\":1000,\"start_at\":\"9999-12-31T23:59:59.999Z\","
                         "\"task\":{\"callback_url\":\"http://h/\"}}");
    assert_int_equal(schedule_first(&d, NOW), TASK_TIME_MAX_MS);
    int64_t at[3];
    assert_int_equal(schedule_upcoming(&d, TASK_TIME_MAX_MS, 0, 3, at), 1);
    schedule_def_free(&d);

    const char *old = "{\"key\":\"old\",\"every_ms\":1000,\"start_at\":-1000,"
                      "\"catch_up\":\"latest\",\"task\":{\"callback_url\":\"http://h/\"}}";
    assert_int_equal(schedule_def_load(old, &d, err, sizeof(err)), 0);
    assert_string_equal(d.json, old);
    assert_int_equal(schedule_first(&d, NOW), NOW + 1000);
    schedule_plan p;
    schedule_plan_runs(&d, NOW, 0, NOW, LEAD, 5500, &p);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.at[0], NOW);
    schedule_def_free(&d);
}

static schedule_def every(int64_t every_ms, int64_t start, const char *extra)
{
    char json[512];
    snprintf(json, sizeof(json), "{\"every_ms\":%lld,\"start_at\":%lld%s,"
             "\"task\":{\"callback_url\":\"http://h/\"}}", (long long)every_ms, (long long)start,
             extra);
    return def(json);
}

static void test_plan_ahead_times_end(void **state)
{
    (void)state;
    schedule_plan p;
    schedule_def d = every(1000, NOW + 500, "");
    /* runs up to now + lead */
    schedule_plan_runs(&d, NOW + 500, 0, NOW, LEAD, LEAD, &p);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.at[0], NOW + 500);
    assert_int_equal(p.at[3], NOW + 3500);
    assert_int_equal(p.next, NOW + 4500);
    assert_int_equal(p.skipped, 0);
    schedule_def_free(&d);

    /* times: 5 in all, 3 made: two more, then completed */
    d = every(1000, NOW, ",\"times\":5");
    schedule_plan_runs(&d, NOW + 3000, 3, NOW + 3000, LEAD, LEAD, &p);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.next, -1);
    int64_t up[5];
    assert_int_equal(schedule_upcoming(&d, NOW + 3000, 3, 5, up), 2);
    schedule_def_free(&d);

    /* end_at: nothing after it */
    d = every(1000, NOW, ",\"end_at\":1800000002000");
    schedule_plan_runs(&d, NOW, 0, NOW, LEAD, LEAD, &p);
    assert_int_equal(p.n, 3);
    assert_int_equal(p.next, -1);
    schedule_def_free(&d);
}

static void test_plan_catch_up(void **state)
{
    (void)state;
    schedule_plan p;
    /* next run 100 s ago: 96 runs missed (those more than the lead late) */
    schedule_def d = every(1000, NOW - 100000, ",\"catch_up\":\"all\"");
    schedule_plan_runs(&d, NOW - 100000, 0, NOW, LEAD, LEAD, &p);
    assert_int_equal(p.n, SCHED_PLAN_MAX);       /* in batches, oldest first */
    assert_int_equal(p.at[0], NOW - 100000);
    assert_int_equal(p.next, NOW - 100000 + 100 * 1000);
    schedule_plan_runs(&d, p.next, 100, NOW, LEAD, LEAD, &p);
    assert_int_equal(p.n, 4);                    /* the rest, up to now + lead */
    assert_int_equal(p.at[3], NOW + 3000);
    schedule_def_free(&d);

    d = every(1000, NOW - 100000, ",\"catch_up\":\"latest\"");
    schedule_plan_runs(&d, NOW - 100000, 0, NOW, LEAD, LEAD, &p);
    assert_int_equal(p.at[0], NOW - 4000);       /* the latest missed */
    assert_int_equal(p.skipped, 96);
    assert_int_equal(p.at[1], NOW - 3000);       /* late, but within the lead */
    assert_int_equal(p.at[p.n - 1], NOW + 3000);
    schedule_def_free(&d);

    d = every(1000, NOW - 100000, ",\"catch_up\":\"none\"");
    schedule_plan_runs(&d, NOW - 100000, 0, NOW, LEAD, LEAD, &p);
    assert_int_equal(p.skipped, 97);
    assert_int_equal(p.at[0], NOW - 3000);
    schedule_def_free(&d);

    /* cron, a year missed: walked over passes, never more than one run */
    d = def("{\"cron\":\"* * * * *\",\"catch_up\":\"latest\","
            "\"task\":{\"callback_url\":\"http://h/\"}}");
    int64_t next = NOW - INT64_C(365) * 86400000, skipped = 0;
    int made = 0, passes = 0;
    do {
        schedule_plan_runs(&d, next, 0, NOW, LEAD, LEAD, &p);
        skipped += p.skipped;
        made += p.n;
        next = p.next;
    } while (p.n == 0 && ++passes < 10);
    assert_true(passes >= 2);
    assert_int_equal(p.at[0], NOW - 60000);      /* 07:59, the latest missed */
    assert_int_equal(skipped, 365 * 1440 - 1);
    assert_int_equal(made, p.n);
    schedule_def_free(&d);
}

static void test_run_task(void **state)
{
    (void)state;
    schedule_def d = def("{\"key\":\"rk\",\"every_ms\":1000,"
                         "\"task\":{\"callback_url\":\"http://h/\",\"req\":{\"a\":1}}}");
    task_input t;
    assert_int_equal(schedule_run_task(&d, "sch.rk", 7, NOW - 90000, NOW, &t, err, sizeof(err)), 0);
    assert_string_equal(t.key, "s:rk:7");
    assert_int_equal(t.execute_at_ms, NOW - 90000);
    assert_int_equal(t.home_now_ms, NOW);
    char *spec = task_input_spec(&t);
    cJSON *o = cJSON_Parse(spec);
    free(spec);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "schedule_id")->valuestring, "sch.rk");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "req"), "a")->valueint, 1);
    cJSON_Delete(o);
    task_input_free(&t);
    schedule_def_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_load),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_time_bounds),
        cmocka_unit_test(test_plan_ahead_times_end),
        cmocka_unit_test(test_plan_catch_up),
        cmocka_unit_test(test_run_task),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
