/* split.h -- for the tests of what is fed bytes as they arrive (the request
 * parser, the HTTP server): the same result whatever the split. Include
 * after cmocka.h. */
#ifndef TICKD_TEST_SPLIT_H
#define TICKD_TEST_SPLIT_H

#include <stdlib.h>

/* What in[0..len) gives fed in pieces: step 0 = whole, 1 = byte by byte,
 * otherwise random pieces of 1..step bytes from `seed`; as text, malloc'd. */
typedef char *split_run(const char *in, size_t len, size_t step, unsigned seed);

/* The result of `run`, checked to be the same whole, byte by byte and in
 * random pieces of up to 7 and up to 300 bytes for seeds 1..seeds. */
static char *split_same(split_run *run, const char *in, size_t len, unsigned seeds)
{
    char *whole = run(in, len, 0, 0);
    char *bytes = run(in, len, 1, 0);
    assert_string_equal(whole, bytes);
    free(bytes);
    for (unsigned seed = 1; seed <= seeds; seed++) {
        char *pieces = run(in, len, seed % 2 ? 7 : 300, seed);
        assert_string_equal(whole, pieces);
        free(pieces);
    }
    return whole;
}

#endif
