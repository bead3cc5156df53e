/* test_trace.c -- unit tests for the ids trace.c derives: spans against
 * vectors from OpenSSL's SipHash-2-4 and new traces against Python's
 * hashlib (over the parts trace.h names), and spans over ids of every
 * length against OpenSSL's SipHash computed here (span_oracle.h). */
#include <stdio.h>
#include <string.h>

#include "base/trace.h"

#include "span_oracle.h"
#include "testutil.h"

#define PARENT "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define ID "202611280725.6.1795850742118.ulqOnBFB7G6C41EluZu7Jr"

/* `openssl mac -macopt hexkey:<"tickd trace span" in hex> -macopt size:8
 * SIPHASH` (OpenSSL's SipHash-2-4) over f"{parent}\n{due}" NUL id NUL
 * attempt: the span of trace.h, byte for byte */
static void test_spans_match_siphash(void **state)
{
    (void)state;
    char out[TRACE_PARENT_LEN + 1], id300[301];
    memset(id300, 'k', 300);
    id300[300] = '\0';
    trace_for_attempt(PARENT, ID, 1, 1795850742118LL, out);
    assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-fa6cbf50b11b4a0e-01");
    trace_for_attempt(PARENT, ID, 12, 1795850742119LL, out);
    assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-11133f6e2a08af73-01");
    trace_for_attempt(PARENT, id300, 123456, 0, out);
    assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-2a37912dc8d0c004-01");
    char id600[601]; /* longer than the stack's piece: hashed from the heap */
    memset(id600, 'k', 600);
    id600[600] = '\0';
    trace_for_attempt(PARENT, id600, 7, 1795850742118LL, out);
    assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-cb58dc53bffa4c7e-01");
}

/* trace and parent ids: the first 16 and 8 bytes of SHA-256 over "trace"
 * and "root", NUL, the id, NUL, "0" (Python's hashlib) */
static void test_new_trace_matches_sha256(void **state)
{
    (void)state;
    char out[TRACE_PARENT_LEN + 1];
    trace_new("sched/run/1795850742118", out);
    assert_string_equal(out, "00-58507fb435624771df2936ae33226edf-11cb9c9fc9096c89-01");
}

/* Every id length from 0 to 40 (the message's last word holds each of 0
 * to 7 bytes, several times over) and a thousand random ids, attempts and
 * due times: each span is OpenSSL's SipHash of what trace.h names, keeps
 * the parent's trace id and flags, and is lowercase hex. */
static void test_spans_match_openssl_at_every_length(void **state)
{
    (void)state;
    uint64_t seed = 27;
    char id[200], a[TRACE_PARENT_LEN + 1], want[17];
    for (int i = 0; i < 1041; i++) {
        size_t n = i <= 40 ? (size_t)i : 1 + (size_t)(testutil_rnd(&seed) % (sizeof(id) - 1));
        for (size_t k = 0; k < n; k++) id[k] = (char)('a' + testutil_rnd(&seed) % 26);
        id[n] = '\0';
        int attempt = 1 + (int)(testutil_rnd(&seed) % 100000);
        int64_t due = (int64_t)(testutil_rnd(&seed) % 4102444800000ULL);
        trace_for_attempt(PARENT, id, attempt, due, a);
        assert_int_equal(span_oracle(PARENT, id, attempt, (long long)due, want), 0);
        assert_memory_equal(a, PARENT, 36);
        assert_memory_equal(a + 36, want, 16);
        assert_string_equal(a + 52, "-01");
        for (int k = 36; k < 52; k++)
            if (!((a[k] >= '0' && a[k] <= '9') || (a[k] >= 'a' && a[k] <= 'f')))
                fail_msg("span not lowercase hex: %s", a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans_match_siphash),
        cmocka_unit_test(test_new_trace_matches_sha256),
        cmocka_unit_test(test_spans_match_openssl_at_every_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
