/* jarena.h -- a request body's JSON tree, its values taken from a block of
 * the parsing thread's rather than one malloc a value.
 *
 * A body is parsed, read and freed within one turn of the loop, and every
 * value of its tree (a node, its name, its string) lives exactly as long as
 * the tree. jarena_parse takes the values from this thread's block, one
 * pointer bump each; cJSON_Delete of the tree then frees nothing, and the
 * block is whole again once every value taken from it is freed. A parse
 * while an earlier tree is still alive, and what does not fit in the block,
 * get malloc'd values, as cJSON_Parse would: nothing is ever written over a
 * live value.
 *
 * Rule: a tree from jarena_parse is freed with cJSON_Delete on the thread
 * that parsed it. Values added to it afterwards are malloc'd as usual.
 * jarena_init installs cJSON's hooks (allocation outside a parse is malloc
 * and free, unchanged): main calls it before any thread starts, and
 * jarena_parse makes sure of it. */
#ifndef TICKD_JARENA_H
#define TICKD_JARENA_H

#include <stddef.h>

#include <cjson/cJSON.h>

void jarena_init(void);
/* cJSON_ParseWithLengthOpts(data, len, end, 0), into the arena: the common
 * body read in one pass (jarena_parse_quick), any other by cJSON. *plain
 * (when plain is not NULL) is 1 when the one pass read the value and none
 * of its strings holds a byte of 0x80 or more: the value, data up to *end,
 * is then ASCII, and holds no \u escape (so no NUL in a string) and no
 * number a double does not hold exactly (only integers of at most 15
 * digits are read in that pass). What a caller would check of such a
 * text, it need not. */
cJSON *jarena_parse(const char *data, size_t len, const char **end, int *plain);
/* The one-pass read alone: the tree cJSON_ParseWithLengthOpts(data, len,
 * end, 0) would give, or NULL for a text it leaves to cJSON (jarena.c says
 * which). For tests; its values are malloc'd outside jarena_parse. */
cJSON *jarena_parse_quick(const char *data, size_t len, const char **end);
/* The bytes of this thread's block in use (0 when every value is freed):
 * for tests. */
size_t jarena_used(void);

#endif
