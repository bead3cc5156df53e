/* test_trace.c -- unit tests for the span ids trace.c derives: against
 * vectors from Python's hashlib (SHA-256 over the parts trace.h names), and
 * a hashing state used again against one made for each call. */
#include <stdio.h>
#include <string.h>

#include "base/trace.h"

#include "testutil.h"

#define PARENT "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define ID "202611280725.6.1795850742118.ulqOnBFB7G6C41EluZu7Jr"

/* hashlib.sha256(f"{parent}\n{due}".encode() + b"\0" + id.encode() + b"\0"
 * + str(attempt).encode()).hexdigest()[:16] */
static void test_spans_match_sha256(void **state)
{
    (void)state;
    char out[TRACE_PARENT_LEN + 1], id300[301];
    memset(id300, 'k', 300);
    id300[300] = '\0';
    trace_ctx *c = trace_ctx_new();
    for (int round = 0; round < 2; round++) {
        trace_ctx *use = round ? c : NULL;
        trace_for_attempt(use, PARENT, ID, 1, 1795850742118LL, out);
        assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-fdcd1e81c983b914-01");
        trace_for_attempt(use, PARENT, ID, 12, 1795850742119LL, out);
        assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-6279cfe99ce98041-01");
        trace_for_attempt(use, PARENT, id300, 123456, 0, out);
        assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-6c9bf088a694bc6b-01");
    }
    trace_ctx_free(c);
}

/* trace and parent ids: the first 16 and 8 bytes of SHA-256 over "trace"
 * and "root", NUL, the id, NUL, "0" */
static void test_new_trace_matches_sha256(void **state)
{
    (void)state;
    char out[TRACE_PARENT_LEN + 1];
    trace_ctx *c = trace_ctx_new();
    trace_new(NULL, "sched/run/1795850742118", out);
    assert_string_equal(out, "00-58507fb435624771df2936ae33226edf-11cb9c9fc9096c89-01");
    trace_new(c, "sched/run/1795850742118", out);
    assert_string_equal(out, "00-58507fb435624771df2936ae33226edf-11cb9c9fc9096c89-01");
    trace_ctx_free(c);
    trace_ctx_free(NULL);
}

/* One state used for a thousand spans in a row gives what a state of each
 * call's own gives: nothing of a call is left in it for the next. */
static void test_a_state_used_again_keeps_nothing(void **state)
{
    (void)state;
    uint64_t seed = 27;
    trace_ctx *c = trace_ctx_new();
    char id[200], a[TRACE_PARENT_LEN + 1], b[TRACE_PARENT_LEN + 1];
    for (int i = 0; i < 1000; i++) {
        size_t n = 1 + (size_t)(testutil_rnd(&seed) % (sizeof(id) - 1));
        for (size_t k = 0; k < n; k++) id[k] = (char)('a' + testutil_rnd(&seed) % 26);
        id[n] = '\0';
        int attempt = 1 + (int)(testutil_rnd(&seed) % 100000);
        int64_t due = (int64_t)(testutil_rnd(&seed) % 4102444800000ULL);
        trace_for_attempt(c, PARENT, id, attempt, due, a);
        trace_for_attempt(NULL, PARENT, id, attempt, due, b);
        assert_string_equal(a, b);
        assert_memory_equal(a, PARENT, 36);
        assert_string_equal(a + 52, "-01");
        for (int k = 36; k < 52; k++)
            if (!((a[k] >= '0' && a[k] <= '9') || (a[k] >= 'a' && a[k] <= 'f')))
                fail_msg("span not lowercase hex: %s", a);
    }
    trace_ctx_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans_match_sha256),
        cmocka_unit_test(test_new_trace_matches_sha256),
        cmocka_unit_test(test_a_state_used_again_keeps_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
