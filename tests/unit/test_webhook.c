/* test_webhook.c -- unit tests for the receiver's side of webhook.c
 * (webhook_verify, as tickctl listen uses it): the Standard Webhooks test
 * vector, rotation, every reason a callback is refused, and what tickd's own
 * signer makes verifying. */
#include <stdio.h>
#include <string.h>

#include "delivery/webhook.h"

#include "testutil.h"

/* the specification's example (standard-webhooks, libraries' tests) */
#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define OTHER "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"
#define MSG_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define TS "1614265330"
#define BODY "{\"test\": 2432232314}"
#define SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static webhook_keys *keys(const char *list)
{
    webhook_keys *k;
    char err[256];
    if (webhook_keys_parse_as("--secret", list, &k, err, sizeof(err)) != 0)
        fail_msg("parse: %s", err);
    return k;
}

/* webhook_verify of the vector's id and body, now = the vector's time + skew */
static int check(const webhook_keys *k, const char *ts, const char *sig, long skew, char *why)
{
    webhook_ctx *c = webhook_ctx_new();
    int rc = webhook_verify(k, c, MSG_ID, ts, sig, BODY, strlen(BODY), 1614265330 + skew, why,
                            256);
    webhook_ctx_free(c);
    return rc;
}

static void test_verify_vector(void **state)
{
    (void)state;
    char why[256];
    webhook_keys *k = keys(SECRET);
    assert_int_equal(check(k, TS, SIG, 0, why), 0);
    /* among other signatures, other versions, extra blanks: one match is enough */
    assert_int_equal(check(k, TS, "v1a,abc v1,AAAA  " SIG " v2,x", 0, why), 0);
    /* within the tolerance either way */
    assert_int_equal(check(k, TS, SIG, 300, why), 0);
    assert_int_equal(check(k, TS, SIG, -300, why), 0);
    /* a timestamp with leading zeros is the same number (the libraries read it so) */
    assert_int_equal(check(k, "0" TS, SIG, 0, why), 0);
    webhook_keys_free(k);

    /* rotation: either key verifies a signature made with it */
    k = keys(OTHER " " SECRET);
    assert_int_equal(check(k, TS, SIG, 0, why), 0);
    webhook_keys_free(k);
}

static void test_verify_refusals(void **state)
{
    (void)state;
    char why[256];
    webhook_keys *k = keys(SECRET);
    webhook_ctx *c = webhook_ctx_new();
    static const struct {
        const char *ts, *sig;
        long skew;
        const char *want;
    } bad[] = {
        {TS, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF=", 0, "no signature matches the secret"},
        {TS, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1O", 0, "no signature matches"},
        {TS, "v1,", 0, "no v1 signature"},
        {TS, "v1,!!!!" SIG, 0, "no signature matches"},
        {TS, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", 0, "no v1 signature in webhook-signature"},
        {TS, "", 0, "no v1 signature"},
        {TS, SIG, 301, "timestamp 301 s old (the tolerance is 300 s)"},
        {TS, SIG, -301, "timestamp 301 s in the future"},
        {"1614265330.5", SIG, 0, "webhook-timestamp is not Unix seconds"},
        {"-1614265330", SIG, 0, "not Unix seconds"},
        {"", SIG, 0, "not Unix seconds"},
        {"99999999999999999999999", SIG, 0, "not Unix seconds"},
        {"1614265331", SIG, 0, "no signature matches"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        why[0] = '\0';
        if (check(k, bad[i].ts, bad[i].sig, bad[i].skew, why) != -1)
            fail_msg("case %zu verified", i);
        assert_contains(why, bad[i].want);
    }
    /* a tampered body, another id, a missing header */
    assert_int_equal(webhook_verify(k, c, MSG_ID, TS, SIG, BODY " ", strlen(BODY) + 1,
                                    1614265330, why, sizeof(why)), -1);
    assert_int_equal(webhook_verify(k, c, "msg_other", TS, SIG, BODY, strlen(BODY),
                                    1614265330, why, sizeof(why)), -1);
    assert_int_equal(webhook_verify(k, c, NULL, TS, SIG, BODY, strlen(BODY), 1614265330, why,
                                    sizeof(why)), -1);
    assert_string_equal(why, "no webhook-id header");
    assert_int_equal(webhook_verify(k, c, MSG_ID, NULL, SIG, BODY, strlen(BODY), 1614265330,
                                    why, sizeof(why)), -1);
    assert_string_equal(why, "no webhook-timestamp header");
    assert_int_equal(webhook_verify(k, c, MSG_ID, TS, NULL, BODY, strlen(BODY), 1614265330,
                                    why, sizeof(why)), -1);
    assert_string_equal(why, "no webhook-signature header");
    webhook_keys_free(k);
    /* signed with one secret, checked with another */
    k = keys(OTHER);
    assert_int_equal(check(k, TS, SIG, 0, why), -1);
    assert_string_equal(why, "no signature matches the secret");
    webhook_keys_free(k);
    webhook_ctx_free(c);
}

static void test_verify_what_tickd_signs(void **state)
{
    (void)state;
    char sig[WEBHOOK_SIG_MAX], why[256];
    webhook_keys *k = keys(SECRET " " OTHER);
    webhook_keys *one = keys(OTHER);
    webhook_ctx *c = webhook_ctx_new();
    const char body[] = "a\0binary\xff body";
    webhook_sign(k, c, "202612010900.5.1796115600000.k", 1796115600, body, sizeof(body), sig);
    assert_int_equal(webhook_verify(one, c, "202612010900.5.1796115600000.k", "1796115600", sig,
                                    body, sizeof(body), 1796115601, why, sizeof(why)), 0);
    /* an empty body signs "id.ts." */
    webhook_sign(k, c, "x", 1796115600, "", 0, sig);
    assert_int_equal(webhook_verify(k, c, "x", "1796115600", sig, "", 0, 1796115600, why,
                                    sizeof(why)), 0);
    webhook_keys_free(k);
    webhook_keys_free(one);
    webhook_ctx_free(c);
}

static void test_parse_names_the_flag(void **state)
{
    (void)state;
    webhook_keys *k;
    char err[256];
    assert_int_equal(webhook_keys_parse_as("--secret", "whsec_c2hvcnQ=", &k, err, sizeof(err)),
                     -1);
    assert_string_equal(err, "--secret: secret 1 decodes to 5 bytes; 24..64 are needed");
    assert_int_equal(webhook_keys_parse("nope", &k, err, sizeof(err)), -1);
    assert_contains(err, "callback.signing_secrets: secret 1 does not start with whsec_");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_vector),
        cmocka_unit_test(test_verify_refusals),
        cmocka_unit_test(test_verify_what_tickd_signs),
        cmocka_unit_test(test_parse_names_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
