/* test_jarena.c -- unit tests for a request body's JSON values from a block
 * of the thread's (base/jarena.h): the block is reused once a tree is freed,
 * a second tree parsed while one is alive writes nothing over it, a body
 * larger than the block spills into malloc whole, a parse error leaves the
 * block whole, and values added to a tree later are malloc'd and freed. The
 * sanitized build (make unit-san) checks every free and leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jarena.h"

#include "testutil.h"

static cJSON *parse(const char *text)
{
    const char *end = NULL;
    return jarena_parse(text, strlen(text), &end);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_reused),
        cmocka_unit_test(test_second_tree_while_one_lives),
        cmocka_unit_test(test_body_larger_than_the_block),
        cmocka_unit_test(test_parse_error_leaves_the_block_whole),
        cmocka_unit_test(test_values_added_later_and_printing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
