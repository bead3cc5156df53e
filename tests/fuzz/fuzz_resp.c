/* fuzz_resp.c -- libFuzzer target for the replies of tickd's Redis links,
 * built in blocks of their own (rc_reply_functions, store/rcluster.c),
 * against hiredis's own functions on the same bytes: the first two bytes
 * say where the rest is cut in two, as a read may cut it; both readers are fed
 * the same pieces, and give the same replies (types, integers, strings byte
 * for byte, elements, in order), the same partial state and the same
 * error. Every reply, and a reply left half-read, is freed by its reader's
 * own function (ASan sees a leak or a bad free). */
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/rcluster.h"

static void same(const redisReply *a, const redisReply *b)
{
    if (!a || !b || a->type != b->type) abort();
    /* what a type does not use is zero, as hiredis leaves it */
    if (b->type != REDIS_REPLY_INTEGER && b->integer) abort();
    if (b->type != REDIS_REPLY_ARRAY && (b->element || b->elements)) abort();
    if ((b->type == REDIS_REPLY_ARRAY || b->type == REDIS_REPLY_INTEGER ||
         b->type == REDIS_REPLY_NIL) && (b->str || b->len))
        abort();
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        if (a->integer != b->integer) abort();
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        if (a->len != b->len || memcmp(a->str, b->str, a->len) != 0 || b->str[b->len]) abort();
        break;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements || (!a->element != !b->element)) abort();
        for (size_t i = 0; i < a->elements; i++) same(a->element[i], b->element[i]);
        break;
    case REDIS_REPLY_NIL:
        break;
    default:
        abort();
    }
}

/* 1 if an array header asks for a million elements or more: both readers
 * would allocate for it at once, and the fuzzer's memory limit is not what
 * is looked for here (Redis's own answers are the input). */
static int huge_array(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d[i] != '*') continue;
        size_t k = i + 1;
        while (k < n && d[k] >= '0' && d[k] <= '9') k++;
        if (k - i - 1 >= 7) return 1;
    }
    return 0;
}

/* Feed both readers one piece and take every reply they give. */
static int feed(redisReader *def, redisReader *blk, const char *p, size_t n)
{
    int a = redisReaderFeed(def, p, n), b = redisReaderFeed(blk, p, n);
    if (a != b) abort();
    for (;;) {
        void *ra = NULL, *rb = NULL;
        a = redisReaderGetReply(def, &ra);
        b = redisReaderGetReply(blk, &rb);
        if (a != b || !ra != !rb) abort();
        if (a != REDIS_OK) {
            if (strcmp(def->errstr, blk->errstr) != 0) abort();
            return -1;
        }
        if (!ra) return 0;
        same(ra, rb);
        def->fn->freeObject(ra);
        blk->fn->freeObject(rb);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || huge_array(data + 2, size - 2)) return 0;
    const char *s = (const char *)data + 2;
    size_t n = size - 2, cut = ((size_t)data[0] << 8 | data[1]) % (n + 1);
    redisReader *def = redisReaderCreate();
    redisReader *blk = redisReaderCreateWithFunctions(rc_reply_functions());
    if (!def || !blk) abort();
    if (feed(def, blk, s, cut) == 0) feed(def, blk, s + cut, n - cut);
    if (!def->reply != !blk->reply) abort();
    redisReaderFree(def);
    redisReaderFree(blk);
    return 0;
}
