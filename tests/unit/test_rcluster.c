/* test_rcluster.c -- the parts of the cluster client that need no server:
 * key slots, CLUSTER SLOTS parsing, redirect parsing, replies built in
 * blocks. Its live behaviour
 * (connections, MOVED and ASK under resharding, failover) is exercised by
 * tests/integration/test_cluster.py on a real local cluster. */
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/rcluster.h"

#include "testutil.h"

/* Parse RESP text into a reply with hiredis' own reader. */
static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
    assert_non_null(r);
    redisReaderFree(rd);
    return r;
}

static unsigned slot(const char *key)
{
    return rc_key_slot(key, strlen(key));
}

static void test_key_slots(void **state)
{
    (void)state;
    /* values from CLUSTER KEYSLOT on Redis 7 */
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("bar"), 5061);
    assert_int_equal(slot("hello"), 866);
    assert_int_equal(slot("123456789"), 12739); /* CRC16/XMODEM check value 0x31C3 */
    assert_int_equal(slot(""), 0);
    /* hash tags: only the first {...} with something inside counts */
    assert_int_equal(slot("{user1000}.following"), slot("{user1000}.followers"));
    assert_int_equal(slot("{user1000}.following"), slot("user1000"));
    assert_int_equal(slot("foo{}{bar}"), 8363);          /* empty tag: the whole key */
    assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
    assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
    assert_int_equal(slot("foo{bar"), slot("foo{bar"));  /* unclosed: the whole key */
    /* every key of a slice shares its slot */
    unsigned s = slot("tickd:{202611220500.3}:due");
    assert_int_equal(slot("tickd:{202611220500.3}:task"), s);
    assert_int_equal(slot("tickd:{202611220500.3}:run"), s);
    assert_int_equal(slot("{202611220500.3}"), s);
    /* always in range */
    char key[32];
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_true(slot(key) < 16384);
    }
}

static void test_slot_map(void **state)
{
    (void)state;
    rcluster *c = rc_create_offline();
    assert_non_null(c);
    /* three masters with one replica each; the second announces no address */
    redisReply *r = resp(
        "*3\r\n"
        "*4\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
        "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nid\r\n"
        "*3\r\n:5461\r\n:10922\r\n*3\r\n$0\r\n\r\n:7001\r\n$2\r\nid\r\n"
        "*3\r\n:10923\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7002\r\n$2\r\nid\r\n");
    assert_int_equal(rc_apply_slots(c, r, "10.1.1.1"), 3);
    freeReplyObject(r);
    assert_int_equal(rc_node_count(c), 3);
    assert_string_equal(rc_node_name(c, rc_slot_node(c, 0)), "127.0.0.1:7000");
    assert_string_equal(rc_node_name(c, rc_slot_node(c, 5460)), "127.0.0.1:7000");
    assert_string_equal(rc_node_name(c, rc_slot_node(c, 5461)), "10.1.1.1:7001");
    assert_string_equal(rc_node_name(c, rc_slot_node(c, 10922)), "10.1.1.1:7001");
    assert_string_equal(rc_node_name(c, rc_slot_node(c, 16383)), "127.0.0.1:7002");
    for (int n = 0; n < 3; n++) assert_true(rc_node_serves(c, n));

    /* a failover: 7003 takes over 0-5460; the old node stays known but idle */
    r = resp("*1\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nid\r\n");
    assert_int_equal(rc_apply_slots(c, r, "x"), 1);
    freeReplyObject(r);
    assert_int_equal(rc_node_count(c), 4);
    assert_string_equal(rc_node_name(c, rc_slot_node(c, 100)), "127.0.0.1:7003");
    assert_false(rc_node_serves(c, 0));

    /* not a slot map */
    r = resp("-ERR This instance has cluster support disabled\r\n");
    assert_int_equal(rc_apply_slots(c, r, "x"), -1);
    freeReplyObject(r);
    r = resp("*1\r\n*2\r\n:0\r\n:1\r\n");
    assert_int_equal(rc_apply_slots(c, r, "x"), -1);
    freeReplyObject(r);
    r = resp("*1\r\n*3\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n");
    assert_int_equal(rc_apply_slots(c, r, "x"), -1);
    freeReplyObject(r);
    assert_int_equal(rc_apply_slots(c, NULL, "x"), -1);
    rc_free(c);
}

static void test_redirects(void **state)
{
    (void)state;
    char host[64];
    int ask, port;
    unsigned s;
    assert_int_equal(rc_parse_redirect("MOVED 3999 127.0.0.1:6381", &ask, &s, host,
                                       sizeof(host), &port), 0);
    assert_int_equal(ask, 0);
    assert_int_equal(s, 3999);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6381);
    assert_int_equal(rc_parse_redirect("ASK 16383 redis-2.internal:7000", &ask, &s, host,
                                       sizeof(host), &port), 0);
    assert_int_equal(ask, 1);
    assert_int_equal(s, 16383);
    assert_string_equal(host, "redis-2.internal");
    assert_int_equal(port, 7000);
    /* IPv6: the port follows the last colon */
    assert_int_equal(rc_parse_redirect("MOVED 1 ::1:7000", &ask, &s, host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7000);

    const char *bad[] = {"MOVED", "MOVED 3999", "MOVED x 127.0.0.1:1", "MOVED 16384 h:1",
                         "MOVED 1 h", "MOVED 1 h:", "MOVED 1 h:0", "MOVED 1 h:65536",
                         "MOVED 1 h:12x", "ERR MOVED 1 h:1", "ASKING 1 h:1", "moved 1 h:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        if (rc_parse_redirect(bad[i], &ask, &s, host, sizeof(host), &port) == 0)
            fail_msg("accepted \"%s\"", bad[i]);
    /* a host longer than the buffer is refused, not cut */
    assert_int_equal(rc_parse_redirect("MOVED 1 averyveryverylonghostname:1", &ask, &s, host, 8,
                                       &port), -1);
}

/* Replies built in blocks (rc_reply_functions): a reply of every type,
 * nested, with a string larger than the largest block and more elements
 * than the first block holds, fed a byte at a time as reads may cut it
 * (the long string in larger pieces); read as hiredis's own functions read
 * it, freed whole by the reader's function. */
static void test_replies_in_blocks(void **state)
{
    (void)state;
    enum { N = 3000, BIG = 1500000 };
    size_t cap = 64 + (size_t)N * 32 + BIG, n = 0;
    char *text = malloc(cap), *big = malloc(BIG);
    assert_non_null(text);
    assert_non_null(big);
    for (size_t i = 0; i < BIG; i++) big[i] = (char)('a' + i % 26);
    big[7] = '\0';   /* a NUL inside a bulk string is kept */
    n += (size_t)sprintf(text + n, "*6\r\n:-9\r\n$-1\r\n+OK\r\n-ERR no\r\n$%d\r\n", BIG);
    size_t big_at = n;
    memcpy(text + n, big, BIG);
    n += BIG;
    n += (size_t)sprintf(text + n, "\r\n*%d\r\n", N + 1);
    for (int i = 0; i < N; i++) n += (size_t)sprintf(text + n, "$%d\r\n%d\r\n", i < 10 ? 1 : i < 100 ? 2 : i < 1000 ? 3 : 4, i);
    n += (size_t)sprintf(text + n, "*0\r\n");
    n += (size_t)sprintf(text + n, ":7\r\n");   /* a second reply after it */
    redisReader *rd = redisReaderCreateWithFunctions(rc_reply_functions());
    assert_non_null(rd);
    void *got = NULL;
    size_t at = 0;
    while (at < n && !got) {
        size_t k = at > big_at + 9 && at + 4093 < big_at + BIG - 9 ? 4093 : 1;
        assert_int_equal(redisReaderFeed(rd, text + at, k), REDIS_OK);
        assert_int_equal(redisReaderGetReply(rd, &got), REDIS_OK);
        at += k;
    }
    assert_non_null(got);
    redisReply *r = got;
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 6);
    assert_int_equal(r->element[0]->type, REDIS_REPLY_INTEGER);
    assert_true(r->element[0]->integer == -9);
    assert_null(r->element[0]->str);
    assert_null(r->element[0]->element);
    assert_int_equal(r->element[1]->type, REDIS_REPLY_NIL);
    assert_null(r->element[1]->str);
    assert_int_equal(r->element[2]->type, REDIS_REPLY_STATUS);
    assert_string_equal(r->element[2]->str, "OK");
    assert_int_equal(r->element[2]->len, 2);
    assert_int_equal(r->element[3]->type, REDIS_REPLY_ERROR);
    assert_string_equal(r->element[3]->str, "ERR no");
    assert_int_equal(r->element[3]->len, 6);
    assert_int_equal(r->element[4]->type, REDIS_REPLY_STRING);
    assert_int_equal(r->element[4]->len, BIG);
    assert_memory_equal(r->element[4]->str, big, BIG);
    assert_int_equal(r->element[4]->str[BIG], '\0');
    redisReply *a = r->element[5];
    assert_int_equal(a->type, REDIS_REPLY_ARRAY);
    assert_int_equal(a->elements, N + 1);
    for (int i = 0; i < N; i++) {
        char want[16];
        snprintf(want, sizeof(want), "%d", i);
        assert_int_equal(a->element[i]->type, REDIS_REPLY_STRING);
        assert_string_equal(a->element[i]->str, want);
        assert_int_equal(a->element[i]->len, strlen(want));
    }
    assert_int_equal(a->element[N]->type, REDIS_REPLY_ARRAY);
    assert_int_equal(a->element[N]->elements, 0);
    assert_null(a->element[N]->element);
    rd->fn->freeObject(r);
    /* the reply after it, whole, then a reply cut off: freed with the reader */
    assert_int_equal(redisReaderFeed(rd, text + at, n - at), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &got), REDIS_OK);
    assert_non_null(got);
    assert_int_equal(((redisReply *)got)->type, REDIS_REPLY_INTEGER);
    assert_true(((redisReply *)got)->integer == 7);
    rd->fn->freeObject(got);
    assert_int_equal(redisReaderFeed(rd, "*3\r\n:1\r\n$4\r\nab", 15), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &got), REDIS_OK);
    assert_null(got);
    redisReaderFree(rd);
    free(text);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_slots),
        cmocka_unit_test(test_slot_map),
        cmocka_unit_test(test_redirects),
        cmocka_unit_test(test_replies_in_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
