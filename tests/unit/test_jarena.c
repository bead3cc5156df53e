/* test_jarena.c -- unit tests for a request body's JSON values from a block
 * of the thread's (base/jarena.h): the block is reused once a tree is freed,
 * a second tree parsed while one is alive writes nothing over it, a body
 * larger than the block spills into malloc whole, a parse error leaves the
 * block whole, and values added to a tree later are malloc'd and freed; the
 * one-pass read gives cJSON's own tree for the bodies it reads (compared
 * node for node with cJSON_ParseWithLengthOpts) and leaves the others to
 * cJSON (fuzz_json compares them on any text). The sanitized build (make
 * unit-san) checks every free and leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/jarena.h"

#include "testutil.h"

static cJSON *parse(const char *text)
{
    const char *end = NULL;
    return jarena_parse(text, strlen(text), &end, NULL);
}

static void test_block_reused(void **state)
{
    (void)state;
    cJSON *a = parse("{\"callback_url\":\"http://h/x\",\"delay_ms\":5}");
    assert_non_null(a);
    assert_true(jarena_used() > 0);
    assert_string_equal(cJSON_GetObjectItem(a, "callback_url")->valuestring, "http://h/x");
    void *first = a;
    cJSON_Delete(a);
    assert_int_equal(jarena_used(), 0);
    cJSON *b = parse("{\"k\":\"v\"}");
    assert_ptr_equal(b, first); /* the same block, from its start */
    cJSON_Delete(b);
    assert_int_equal(jarena_used(), 0);
}

static void test_second_tree_while_one_lives(void **state)
{
    (void)state;
    cJSON *a = parse("{\"name\":\"first\",\"list\":[1,2,3]}");
    size_t used = jarena_used();
    cJSON *b = parse("{\"name\":\"second\",\"list\":[4,5,6]}");
    assert_int_equal(jarena_used(), used); /* b is malloc'd */
    assert_string_equal(cJSON_GetObjectItem(a, "name")->valuestring, "first");
    assert_string_equal(cJSON_GetObjectItem(b, "name")->valuestring, "second");
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "list"), 2)->valueint, 3);
    cJSON_Delete(a);
    assert_int_equal(jarena_used(), 0);
    assert_string_equal(cJSON_GetObjectItem(b, "name")->valuestring, "second");
    cJSON_Delete(b);
}

static void test_body_larger_than_the_block(void **state)
{
    (void)state;
    size_t n = 4000, cap = n * 24 + 16, len = 0;
    char *text = malloc(cap);
    text[len++] = '[';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"value %05zu\"", i ? "," : "", i);
    text[len++] = ']';
    text[len] = '\0';
    cJSON *a = parse(text);
    assert_non_null(a);
    assert_int_equal(cJSON_GetArraySize(a), (int)n);
    assert_string_equal(cJSON_GetArrayItem(a, 0)->valuestring, "value 00000");
    assert_string_equal(cJSON_GetArrayItem(a, (int)n - 1)->valuestring, "value 03999");
    cJSON_Delete(a);
    assert_int_equal(jarena_used(), 0);
    free(text);
}

static void test_parse_error_leaves_the_block_whole(void **state)
{
    (void)state;
    assert_null(parse("{\"a\":[1,2,{\"b\":\"c\""));
    assert_int_equal(jarena_used(), 0);
    cJSON *a = parse("{\"a\":1}");
    assert_non_null(a);
    cJSON_Delete(a);
    assert_int_equal(jarena_used(), 0);
}

static void test_values_added_later_and_printing(void **state)
{
    (void)state;
    cJSON *a = parse("{\"a\":\"x\"}");
    cJSON_AddStringToObject(a, "added", "later");          /* malloc'd */
    cJSON_ReplaceItemInObject(a, "a", cJSON_CreateString("y")); /* frees one of the block's */
    char *out = cJSON_PrintUnformatted(a);
    assert_string_equal(out, "{\"a\":\"y\",\"added\":\"later\"}");
    free(out);
    cJSON_Delete(a);
    assert_int_equal(jarena_used(), 0);
    /* outside a parse, cJSON allocates as before */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", 1);
    assert_int_equal(jarena_used(), 0);
    cJSON_Delete(o);
}

/* a and b the same tree: types, names, strings, numbers to the bit, the
 * links of every list (its first's prev is its last) */
static void tree_same(const cJSON *a, const cJSON *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->valueint, b->valueint);
    assert_memory_equal(&a->valuedouble, &b->valuedouble, sizeof(double));
    assert_true(!a->string == !b->string);
    if (a->string) assert_string_equal(a->string, b->string);
    assert_true(!a->valuestring == !b->valuestring);
    if (a->valuestring) assert_string_equal(a->valuestring, b->valuestring);
    const cJSON *x = a->child, *y = b->child, *lx = NULL, *ly = NULL;
    for (; x && y; lx = x, ly = y, x = x->next, y = y->next) {
        if (lx) assert_ptr_equal(x->prev, lx);
        if (ly) assert_ptr_equal(y->prev, ly);
        tree_same(x, y);
    }
    assert_null(x);
    assert_null(y);
    if (a->child) {
        assert_ptr_equal(a->child->prev, lx);
        assert_ptr_equal(b->child->prev, ly);
    }
}

/* The bodies the API gets, read in one pass into cJSON's own tree */
static void test_quick_reads_cjsons_tree(void **state)
{
    (void)state;
    static const char *texts[] = {
        "{\"callback_url\":\"http://127.0.0.1:8080/cb\",\"method\":\"POST\",\"delay_ms\":3600000}",
        "{\"key\":\"order-1\",\"callback_url\":\"https://h.test/a?b=\\\"c\\\"&d=%0A\","
        "\"header\":{\"X-A\":\"1\",\"X-A\":\"2\"},\"req\":{\"a\":[1,-2,0,007,-0,[],{}],"
        "\"b\":null,\"t\":true,\"f\":false,\"s\":\"x\\ny\\t\\/\\\\\\b\\f\\r\"},"
        "\"retry\":{\"max_attempts\":9,\"backoff_ms\":77},\"timeout_ms\":300000}",
        "{\"tasks\":[{\"callback_url\":\"http://h/\"},{\"callback_url\":\"http://h/\",\"delay_ms\":1}]}",
        /* cJSON's whitespace is any byte up to 32; bytes past 127 as they are */
        " \x01\t{ \"a\" :\r\n 1 ,\x1f\"\xc3\xa9\xff\" : [ ] }",
        "\"a string\"", "123456789012345", "-999999999999999", "2147483648", "-2147483649",
        "true", "null", "[]", "{}",
        "{\"a\":1}trailing",     /* its end is the caller's to judge */
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++) {
        const char *qend = NULL, *cend = NULL;
        size_t n = strlen(texts[i]);
        cJSON *q = jarena_parse_quick(texts[i], n, &qend);
        cJSON *c = cJSON_ParseWithLengthOpts(texts[i], n, &cend, 0);
        if (!q) fail_msg("left to cJSON: %s", texts[i]);
        assert_non_null(c);
        assert_ptr_equal(qend, cend);
        tree_same(q, c);
        cJSON_Delete(q);
        cJSON_Delete(c);
        /* and jarena_parse gives it from the block */
        cJSON *j = parse(texts[i]);
        assert_true(jarena_used() > 0);
        cJSON_Delete(j);
        assert_int_equal(jarena_used(), 0);
    }
}

/* What the one-pass read leaves to cJSON (which then reads it, or says
 * where it is not JSON) */
static void test_quick_leaves_the_rest(void **state)
{
    (void)state;
    static const char *texts[] = {
        "1.5", "1e3", "1E3", "-", "1234567890123456", "12+", "{\"a\":1.0}",
        "\"\\u00e9\"", "\"\\x\"", "\"\\", "\"abc", "\xef\xbb\xbf{}", "nul", "nulx",
        "{\"a\" 1}", "{\"a\":1,}", "[1,]", "[1 2]", "{a:1}", "{\"a\":1", "", "   ", "+1", ".5",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++) {
        const char *end = NULL;
        cJSON *q = jarena_parse_quick(texts[i], strlen(texts[i]), &end);
        if (q) fail_msg("read quick: %s", texts[i]);
    }
    /* a NUL inside a string, and nesting past 64 */
    assert_null(jarena_parse_quick("\"a\0b\"", 5, NULL));
    char deep[200];
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    deep[130] = '\0';
    assert_null(jarena_parse_quick(deep, 130, NULL));
    cJSON *ok = jarena_parse_quick(deep + 1, 128, NULL);   /* 64 deep */
    assert_non_null(ok);
    cJSON_Delete(ok);
    /* left to cJSON, read by it all the same */
    cJSON *c = parse("{\"a\":1.5,\"b\":\"\\u00e9\"}");
    assert_non_null(c);
    assert_true(cJSON_GetObjectItem(c, "a")->valuedouble == 1.5);
    assert_string_equal(cJSON_GetObjectItem(c, "b")->valuestring, "\xc3\xa9");
    cJSON_Delete(c);
    assert_int_equal(jarena_used(), 0);
}

/* A string of escapes read in time linear in its length: 4 MB of them in
 * well under a second (a read that looked for the closing quote again after
 * each escape, to the end of the text, took most of a minute) */
/* plain: read in the one pass, and ASCII; not for a text cJSON read, nor
 * for one with a byte past ASCII in a name or a string */
static void test_plain(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int plain;
    } cases[] = {
        {"{\"callback_url\":\"http://h/x\",\"delay_ms\":5}", 1},
        {" {\"a\":[1,-2,{\"b\":\"c\\n\\\"\"}],\"t\":true,\"n\":null} ", 1},
        {"{\"a\":\"caf\xc3\xa9\"}", 0},            /* UTF-8 in a string */
        {"{\"caf\xc3\xa9\":1}", 0},                  /* in a name */
        {"{\"a\":\"\\u0041\"}", 0},                  /* \u: cJSON's */
        {"{\"a\":1.5}", 0},                             /* a fraction: cJSON's */
        {"{\"a\":1e3}", 0},
        {"{\"a\":1234567890123456}", 0},                /* 16 digits: cJSON's */
        {"{\"a\":\"x\"} \xff", 1},                   /* past the value: the caller's */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *end = NULL;
        int plain = -1;
        cJSON *j = jarena_parse(cases[i].text, strlen(cases[i].text), &end, &plain);
        assert_non_null(j);
        if (plain != cases[i].plain) fail_msg("case %zu: plain %d", i, plain);
        cJSON_Delete(j);
    }
    int plain = -1;
    assert_null(jarena_parse("{\"a\":", 5, NULL, &plain));
    assert_int_equal(plain, 0);
}

static void test_quick_escapes_linear(void **state)
{
    (void)state;
    size_t n = 4u << 20;
    char *text = malloc(n + 8);
    text[0] = '"';
    for (size_t i = 1; i + 1 < n; i += 2) memcpy(text + i, "\\n", 2);
    text[n - 1] = '"';
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *end = NULL;
    cJSON *q = jarena_parse_quick(text, n, &end);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(q);
    assert_ptr_equal(end, text + n);
    assert_int_equal(strlen(q->valuestring), (n - 2) / 2);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (s > 5.0) fail_msg("4 MB of escapes read in %.1f s", s);
    cJSON_Delete(q);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_reused),
        cmocka_unit_test(test_second_tree_while_one_lives),
        cmocka_unit_test(test_body_larger_than_the_block),
        cmocka_unit_test(test_parse_error_leaves_the_block_whole),
        cmocka_unit_test(test_values_added_later_and_printing),
        cmocka_unit_test(test_quick_reads_cjsons_tree),
        cmocka_unit_test(test_quick_leaves_the_rest),
        cmocka_unit_test(test_quick_escapes_linear),
        cmocka_unit_test(test_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
