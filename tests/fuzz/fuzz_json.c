/* fuzz_json.c -- libFuzzer target for the one-pass read of a request body
 * (jarena_parse_quick, base/jarena.c), against cJSON itself: for any text,
 * the quick read either leaves it to cJSON (NULL) or gives exactly the tree
 * cJSON_ParseWithLengthOpts gives, node for node (types, names and strings
 * byte for byte, valueint, valuedouble to the bit, the prev links cJSON's
 * lists keep: the first's prev is the last) and the same end. And a text it
 * reads, cJSON reads. Then the tree jarena_parse gives, from the block, is
 * the same again, and it says the text plain exactly when the quick read
 * took it and every byte of the value is ASCII. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jarena.h"

static void same(const cJSON *a, const cJSON *b, int depth)
{
    if (depth > 200) abort();
    if ((a->type & 0xFF) != (b->type & 0xFF) || a->valueint != b->valueint ||
        memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) != 0)
        abort();
    if (!a->string != !b->string || (a->string && strcmp(a->string, b->string) != 0)) abort();
    if (!a->valuestring != !b->valuestring ||
        (a->valuestring && strcmp(a->valuestring, b->valuestring) != 0))
        abort();
    const cJSON *x = a->child, *y = b->child, *lx = NULL, *ly = NULL;
    for (; x && y; lx = x, ly = y, x = x->next, y = y->next) {
        if (x != a->child && x->prev != lx) abort();
        if (y != b->child && y->prev != ly) abort();
        same(x, y, depth + 1);
    }
    if (x || y) abort();
    if (a->child && (a->child->prev != lx || b->child->prev != ly)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *qend = NULL, *cend = NULL, *jend = NULL;
    cJSON *q = jarena_parse_quick(s, size, &qend);
    cJSON *c = cJSON_ParseWithLengthOpts(s, size, &cend, 0);
    if (q) {
        if (!c) {
            fprintf(stderr, "read quick, refused by cJSON\n");
            abort();
        }
        if (qend != cend) abort();
        same(q, c, 0);
    }
    int plain = -1;
    cJSON *j = jarena_parse(s, size, &jend, &plain);
    if (!j != !c || (j && jend != cend)) abort();
    if (j) same(j, c, 0);
    int ascii = 1;
    for (const char *b = s; q && b < qend; b++) ascii &= (unsigned char)*b < 0x80;
    if (plain != (q && ascii)) {
        fprintf(stderr, "plain %d, quick %d, ascii %d\n", plain, q != NULL, ascii);
        abort();
    }
    cJSON_Delete(j);
    cJSON_Delete(q);
    cJSON_Delete(c);
    return 0;
}
