/* fuzz_h1_answer.c -- libFuzzer target for the callback answer parser
 * (h1_answer.c). The first byte picks the split points of the rest and
 * whether the request was a HEAD; the answer is parsed whole and in those
 * pieces, and both must agree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "delivery/h1_answer.h"

typedef struct verdict {
    int rc;
    long status;
    int close;
    int64_t body;
    size_t used;
    size_t kept;
    char keep[H1_KEEP_MAX];
} verdict;

static verdict run(const uint8_t *data, size_t len, unsigned seed, int head_req)
{
    h1_answer a;
    memset(&a, 0, sizeof(a));
    a.head_req = head_req;
    a.keep_on = 1;
    char *pend = malloc(len ? len : 1);
    size_t plen = 0, at = 0;
    verdict v;
    memset(&v, 0, sizeof(v));
    while (at < len || plen) {
        size_t step = seed ? 1 + (seed * 2654435761u + at) % (seed % 61 + 1) : len;
        if (step > len - at) step = len - at;
        memcpy(pend + plen, data + at, step);
        plen += step;
        at += step;
        size_t used = 0;
        v.rc = h1_answer_parse(&a, pend, plen, &used);
        if (used > plen) abort();
        v.used += used;
        memmove(pend, pend + used, plen - used);
        plen -= used;
        if (v.rc != 0 || (at == len && used == 0)) break;
    }
    free(pend);
    v.status = a.status;
    v.close = a.close;
    v.body = a.body;
    if (a.kept > H1_KEEP_MAX || (a.kept && !a.keep)) abort();
    v.kept = a.kept;
    if (a.kept) memcpy(v.keep, a.keep, a.kept);
    free(a.keep);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned seed = data[0] >> 1;
    int head_req = data[0] & 1;
    verdict whole = run(data + 1, size - 1, 0, head_req);
    verdict split = run(data + 1, size - 1, seed, head_req);
    if (whole.rc != split.rc || whole.status != split.status || whole.close != split.close ||
        whole.body != split.body || whole.used != split.used || whole.kept != split.kept ||
        memcmp(whole.keep, split.keep, whole.kept) != 0)
        abort();
    if (whole.rc == 1 && whole.status < 200) abort(); /* complete only with a final answer */
    return 0;
}
