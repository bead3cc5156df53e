/* test_netpolicy.c -- unit tests for netpolicy.c (CIDR lists, matching with
 * IPv4-mapped IPv6, tickd's own address, literal hosts) and webhook.c
 * (secrets, signatures against the Standard Webhooks test vector). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delivery/netpolicy.h"
#include "delivery/webhook.h"

#include "testutil.h"

/* addr ("1.2.3.4" or an IPv6 literal) and port as a sockaddr */
static const struct sockaddr *sa(const char *addr, int port)
{
    static struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
    } else {
        assert_int_equal(inet_pton(AF_INET6, addr, &s6->sin6_addr), 1);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
    }
    return (const struct sockaddr *)&ss;
}

static int allowed(const netpolicy *p, const char *addr, int port)
{
    char why[200];
    return netpolicy_check(p, sa(addr, port), why, sizeof(why)) == 0;
}

static void test_parse(void **state)
{
    (void)state;
    np_cidr *v;
    int n;
    char err[256];
    assert_int_equal(netpolicy_parse("k", "  10.0.0.0/8\t::1  192.0.2.7 fe80::/10 0.0.0.0/0 ", &v,
                                     &n, err, sizeof(err)), 0);
    assert_int_equal(n, 5);
    assert_int_equal(v[0].v6, 0);
    assert_int_equal(v[0].bits, 8);
    assert_int_equal(v[1].v6, 1);
    assert_int_equal(v[1].bits, 128);
    assert_int_equal(v[2].bits, 32);
    assert_int_equal(v[3].bits, 10);
    assert_int_equal(v[4].bits, 0);
    free(v);
    assert_int_equal(netpolicy_parse("k", "", &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    free(v);

    static const struct {
        const char *list, *want;
    } bad[] = {
        {"10.0.0.0/33", "k: \"10.0.0.0/33\": prefix length must be 0..32"},
        {"::/129", "k: \"::/129\": prefix length must be 0..128"},
        {"10.0.0.0/", "k: \"10.0.0.0/\": prefix length"},
        {"10.0.0.0/8x", "k: \"10.0.0.0/8x\": prefix length"},
        {"10.0.0.0/-1", "prefix length"},
        {"10.0.0.0/0008", "prefix length"},
        {"10.0.0.1/8", "k: \"10.0.0.1/8\": address has bits set past the /8 prefix"},
        {"fe80::1/10", "bits set past the /10"},
        {"1.2.3.4 example.com", "k: \"example.com\": not an IPv4 or IPv6 address"},
        {"/8", "not an IPv4 or IPv6 address"},
        {"10.1/16", "not an IPv4"},
        {"0x0a000000/8", "not an IPv4"},
        {"1.2.3.4,5.6.7.8", "not an IPv4"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        v = (np_cidr *)1;
        err[0] = '\0';
        if (netpolicy_parse("k", bad[i].list, &v, &n, err, sizeof(err)) != -1)
            fail_msg("\"%s\" parsed", bad[i].list);
        assert_null(v);
        assert_contains(err, bad[i].want);
    }
}

static void test_init_errors(void **state)
{
    (void)state;
    netpolicy p;
    char err[256];
    assert_int_equal(netpolicy_init(&p, "10.0.0.0/8 300.1.1.1", "", err, sizeof(err)), -1);
    assert_contains(err, "callback.deny: \"300.1.1.1\"");
    assert_int_equal(netpolicy_init(&p, "", "10.0.0.0/8 1.2.3.4/40", err, sizeof(err)), -1);
    assert_contains(err, "callback.allow: \"1.2.3.4/40\"");
    assert_int_equal(netpolicy_init(&p, "", "  ", err, sizeof(err)), -1);
    assert_contains(err, "callback.allow: only blanks");
}

static void test_match(void **state)
{
    (void)state;
    netpolicy p;
    char err[256], why[200];
    /* the default deny list */
    assert_int_equal(netpolicy_init(&p, "0.0.0.0/8 169.254.0.0/16 fe80::/10 ::ffff:0.0.0.0/104 "
                                        "::ffff:169.254.0.0/112 10.1.2.0/23", "", err, sizeof(err)), 0);
    assert_false(allowed(&p, "169.254.169.254", 80));
    assert_false(allowed(&p, "169.254.0.0", 80));
    assert_true(allowed(&p, "169.253.255.255", 80));
    assert_true(allowed(&p, "169.255.0.0", 80));
    assert_false(allowed(&p, "0.0.0.0", 80));
    assert_false(allowed(&p, "0.255.255.255", 80));
    assert_true(allowed(&p, "1.0.0.0", 80));
    assert_false(allowed(&p, "fe80::1", 80));
    assert_false(allowed(&p, "febf:ffff::1", 80));
    assert_true(allowed(&p, "fec0::1", 80));
    assert_true(allowed(&p, "127.0.0.1", 80));
    assert_true(allowed(&p, "::1", 80));
    /* /23: the odd bits of the prefix */
    assert_false(allowed(&p, "10.1.2.9", 80));
    assert_false(allowed(&p, "10.1.3.255", 80));
    assert_true(allowed(&p, "10.1.4.0", 80));
    assert_true(allowed(&p, "10.1.1.255", 80));
    /* an IPv4-mapped address is the IPv4 address: the v4 ranges apply */
    assert_false(allowed(&p, "::ffff:10.1.2.1", 80));
    assert_true(allowed(&p, "::ffff:10.1.4.1", 80));
    assert_int_equal(netpolicy_check(&p, sa("::ffff:169.254.169.254", 80), why, sizeof(why)), -1);
    assert_string_equal(why, "169.254.169.254 is in callback.deny 169.254.0.0/16");
    assert_int_equal(netpolicy_check(&p, sa("fe80::abcd", 80), why, sizeof(why)), -1);
    assert_string_equal(why, "fe80::abcd is in callback.deny fe80::/10");
    netpolicy_free(&p);

    /* a v6 range written in the mapped form catches the plain v4 address */
    assert_int_equal(netpolicy_init(&p, "::ffff:127.0.0.0/104", "", err, sizeof(err)), 0);
    assert_false(allowed(&p, "127.0.0.1", 80));
    assert_false(allowed(&p, "::ffff:127.0.0.1", 80));
    assert_true(allowed(&p, "::1", 80));
    netpolicy_free(&p);

    /* allow: only its ranges, and deny still applies within them */
    assert_int_equal(netpolicy_init(&p, "10.0.0.0/24", "10.0.0.0/8 2001:db8::/32", err,
                                    sizeof(err)), 0);
    assert_true(allowed(&p, "10.9.9.9", 80));
    assert_true(allowed(&p, "::ffff:10.9.9.9", 80));
    assert_true(allowed(&p, "2001:db8::5", 80));
    assert_false(allowed(&p, "10.0.0.5", 80));
    assert_false(allowed(&p, "11.0.0.1", 80));
    assert_false(allowed(&p, "2001:db9::5", 80));
    assert_int_equal(netpolicy_check(&p, sa("11.0.0.1", 80), why, sizeof(why)), -1);
    assert_string_equal(why, "11.0.0.1 is in no range of callback.allow");
    netpolicy_free(&p);

    /* /0 matches everything of its family */
    assert_int_equal(netpolicy_init(&p, "0.0.0.0/0", "", err, sizeof(err)), 0);
    assert_false(allowed(&p, "8.8.8.8", 80));
    assert_false(allowed(&p, "::ffff:8.8.8.8", 80));
    assert_true(allowed(&p, "2001:db8::1", 80));
    netpolicy_free(&p);
}

static void test_self(void **state)
{
    (void)state;
    netpolicy p;
    char err[256], why[200];
    assert_int_equal(netpolicy_init(&p, "", "", err, sizeof(err)), 0);
    netpolicy_set_self(&p, "127.0.0.1", 8080);
    assert_false(allowed(&p, "127.0.0.1", 8080));
    assert_false(allowed(&p, "::ffff:127.0.0.1", 8080));
    assert_false(allowed(&p, "0.0.0.0", 8080));
    assert_true(allowed(&p, "127.0.0.1", 8081));
    assert_true(allowed(&p, "127.0.0.2", 8080)); /* not where the API listens */
    assert_int_equal(netpolicy_check(&p, sa("127.0.0.1", 8080), why, sizeof(why)), -1);
    assert_string_equal(why, "127.0.0.1 port 8080 is tickd's own API");
    /* literal hosts at POST */
    assert_int_equal(netpolicy_check_host(&p, "127.0.0.1", 8080, why, sizeof(why)), -1);
    assert_int_equal(netpolicy_check_host(&p, "[::ffff:127.0.0.1]", 8080, why, sizeof(why)), -1);
    assert_int_equal(netpolicy_check_host(&p, "localhost", 8080, why, sizeof(why)), -1);
    assert_string_equal(why, "localhost port 8080 is tickd's own API");
    assert_int_equal(netpolicy_check_host(&p, "LocalHost.", 8080, why, sizeof(why)), -1);
    assert_int_equal(netpolicy_check_host(&p, "api.localhost", 8080, why, sizeof(why)), -1);
    assert_int_equal(netpolicy_check_host(&p, "notlocalhost", 8080, why, sizeof(why)), 0);
    assert_int_equal(netpolicy_check_host(&p, "localhost", 8081, why, sizeof(why)), 0);
    assert_int_equal(netpolicy_check_host(&p, "example.com", 8080, why, sizeof(why)), 0);
    netpolicy_free(&p);

    /* a wildcard listener: every loopback and local address */
    assert_int_equal(netpolicy_init(&p, "169.254.0.0/16", "", err, sizeof(err)), 0);
    netpolicy_set_self(&p, "0.0.0.0", 9000);
    assert_false(allowed(&p, "127.0.0.1", 9000));
    assert_false(allowed(&p, "127.9.9.9", 9000));
    assert_false(allowed(&p, "::1", 9000));
    assert_true(allowed(&p, "127.0.0.1", 9001));
    assert_int_equal(netpolicy_check_host(&p, "[::1]", 9000, why, sizeof(why)), -1);
    /* literal hosts: deny ranges at POST, zone ids and brackets stripped */
    assert_int_equal(netpolicy_check_host(&p, "169.254.1.1", 80, why, sizeof(why)), -1);
    assert_string_equal(why, "169.254.1.1 is in callback.deny 169.254.0.0/16");
    assert_int_equal(netpolicy_check_host(&p, "[::ffff:a9fe:101]", 80, why, sizeof(why)), -1);
    assert_int_equal(netpolicy_check_host(&p, "[fe80::1%25eth0]", 80, why, sizeof(why)), 0);
    netpolicy_free(&p);

    /* the unspecified address however written is a wildcard listener too */
    const char *wild[] = {"0", "[::0]", "0:0::0", "0.0.0", "0x0"};
    for (size_t i = 0; i < sizeof(wild) / sizeof(*wild); i++) {
        assert_int_equal(netpolicy_init(&p, "", "", err, sizeof(err)), 0);
        netpolicy_set_self(&p, wild[i], 9000);
        assert_true(p.self_any);
        assert_false(allowed(&p, "127.0.0.1", 9000));
        assert_int_equal(netpolicy_check_host(&p, "127.0.0.1", 9000, why, sizeof(why)), -1);
        netpolicy_free(&p);
    }
}

/* The address form destinations take: the one the checks name. */
static void test_address_form(void **state)
{
    (void)state;
    static const char *in[] = {"127.0.0.1", "[::ffff:127.0.0.1]", "::FFFF:7f00:1",
                               "[0:0:0:0:0:0:0:1]", "[fe80::1%eth0]", "[2001:DB8:0:0::1]"};
    static const char *out[] = {"127.0.0.1", "127.0.0.1", "127.0.0.1", "[::1]", "[fe80::1]",
                                "[2001:db8::1]"};
    char a[64];
    for (size_t i = 0; i < sizeof(in) / sizeof(*in); i++) {
        if (netpolicy_address_form(in[i], a, sizeof(a)) != 0) fail_msg("%s refused", in[i]);
        if (strcmp(a, out[i]) != 0) fail_msg("%s: %s, not %s", in[i], a, out[i]);
    }
    /* names, and a form that does not fit */
    assert_int_equal(netpolicy_address_form("localhost", a, sizeof(a)), -1);
    assert_int_equal(netpolicy_address_form("127.1", a, sizeof(a)), -1);
    assert_int_equal(netpolicy_address_form("[::1]", a, 4), -1);
}

/* ---- webhook.c ------------------------------------------------------------ */

static void test_webhook_vector(void **state)
{
    (void)state;
    webhook_keys *k;
    char err[256], sig[WEBHOOK_SIG_MAX];
    /* the specification's example (standard-webhooks, libraries' tests) */
    assert_int_equal(webhook_keys_parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &k, err,
                                        sizeof(err)), 0);
    webhook_ctx *c = webhook_ctx_new();
    const char *body = "{\"test\": 2432232314}";
    size_t n = webhook_sign(k, c, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body,
                            strlen(body), sig);
    assert_string_equal(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    assert_int_equal(n, strlen(sig));
    /* the context is reused: the same again */
    webhook_sign(k, c, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body, strlen(body), sig);
    assert_string_equal(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    webhook_keys_free(k);

    /* two keys: two signatures, in the configured order */
    assert_int_equal(webhook_keys_parse(" whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw  "
                                        "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY ",
                                        &k, err, sizeof(err)), 0);
    assert_int_equal(webhook_keys_count(k), 2);
    webhook_sign(k, c, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body, strlen(body), sig);
    assert_int_equal(strncmp(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,", 51), 0);
    assert_int_equal(strlen(sig), 48 + 47);
    /* an empty body signs "id.ts." */
    webhook_sign(k, c, "x", 1, "", 0, sig);
    assert_int_equal(strlen(sig), 48 + 47);
    webhook_keys_free(k);
    webhook_ctx_free(c);

    assert_int_equal(webhook_keys_parse("  ", &k, err, sizeof(err)), 0);
    assert_null(k);
    assert_int_equal(webhook_keys_count(k), 0);
}

static void test_webhook_bad_secrets(void **state)
{
    (void)state;
    static const struct {
        const char *list, *want;
    } bad[] = {
        {"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "secret 1 does not start with whsec_"},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa-w",
         "secret 2 is not valid base64"},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "secret 1 is not valid base64"},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=", "secret 1 is not valid base64"},
        {"whsec_c2hvcnQ=", "secret 1 decodes to 5 bytes; 24..64 are needed"},
        {"whsec_", "secret 1 decodes to 0 bytes"},
        {"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
         "secret 1 is longer than 64 bytes"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        webhook_keys *k = (webhook_keys *)1;
        char err[256] = "";
        if (webhook_keys_parse(bad[i].list, &k, err, sizeof(err)) != -1)
            fail_msg("\"%s\" parsed", bad[i].list);
        assert_null(k);
        assert_contains(err, "callback.signing_secrets: ");
        assert_contains(err, bad[i].want);
        /* never the secret itself */
        if (strlen(bad[i].list) > 10 && strstr(err, bad[i].list + 6))
            fail_msg("the error shows the secret: %s", err);
    }
    char many[1024] = "";
    for (int i = 0; i < WEBHOOK_KEYS_MAX + 1; i++)
        strcat(many, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ");
    webhook_keys *k;
    char err[256];
    assert_int_equal(webhook_keys_parse(many, &k, err, sizeof(err)), -1);
    assert_contains(err, "more than 8 secrets");
}

static void test_gen_secret(void **state)
{
    (void)state;
    char a[64], b[64], err[256];
    webhook_keys *k;
    assert_int_equal(webhook_gen_secret(a, sizeof(a)), 0);
    assert_int_equal(webhook_gen_secret(b, sizeof(b)), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(strlen(a), 6 + 44);
    assert_int_equal(webhook_keys_parse(a, &k, err, sizeof(err)), 0);
    assert_int_equal(webhook_keys_count(k), 1);
    webhook_keys_free(k);
    assert_int_equal(webhook_gen_secret(a, 20), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_address_form),
        cmocka_unit_test(test_webhook_vector),
        cmocka_unit_test(test_webhook_bad_secrets),
        cmocka_unit_test(test_gen_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
