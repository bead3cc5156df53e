/* test_show.c -- tickctl's cleaner of server text (cmd/tickctl/show.c):
 * nothing a terminal would act on gets through, everything else does. */
#include <stdlib.h>
#include <string.h>

#include "../../cmd/tickctl/show.c"

#include "testutil.h"

static void clean_is(const char *in, size_t len, int one_line, const char *want)
{
    char *got = show_clean(in, len, one_line);
    if (strcmp(got, want) != 0) fail_msg("\"%s\": got \"%s\", want \"%s\"", in, got, want);
    free(got);
}

#define CLEAN(in, one_line, want) clean_is(in, sizeof(in) - 1, one_line, want)

static void test_controls_become_marks(void **state)
{
    (void)state;
    /* C0 and DEL: an escape sequence loses its ESC */
    CLEAN("a\x1b[31mb\x1b]0;t\x07" "c\x7f", 1, "a?[31mb?]0;t?c?");
    CLEAN("a\0b", 1, "a?b");
    /* C1, among them CSI (U+009B) and NEL (U+0085); NBSP (U+00A0) is text */
    CLEAN("x\xc2\x9b" "31my\xc2\x85z\xc2\xa0", 1, "x?31my?z\xc2\xa0");
    /* every bidi control, one mark each; the letters around them stay */
    CLEAN("a\xd8\x9c" "b\xe2\x80\x8e" "c\xe2\x80\x8f" "d\xe2\x80\xaa" "e\xe2\x80\xae"
          "f\xe2\x81\xa6" "g\xe2\x81\xa9" "h", 1, "a?b?c?d?e?f?g?h");
    /* what is near them is text: U+2010, U+202F, U+2065, U+206A */
    CLEAN("\xe2\x80\x90\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa", 1,
          "\xe2\x80\x90\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa");
    /* UTF-8 of 2, 3 and 4 bytes stays */
    CLEAN("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 1, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

static void test_invalid_utf8_becomes_marks(void **state)
{
    (void)state;
    CLEAN("a\x80" "b", 1, "a?b");                     /* a lone continuation byte */
    CLEAN("a\xf8\x88\x80" "b", 1, "a???b");           /* past U+10FFFF's lead bytes */
    CLEAN("a\xff" "b", 1, "a?b");
    CLEAN("a\xc0\xaf" "b", 1, "a??b");                /* an overlong '/' */
    CLEAN("a\xed\xa0\x80" "b", 1, "a???b");           /* a surrogate */
    CLEAN("a\xe2\x80", 1, "a??");                     /* cut at the end */
    CLEAN("a\xe2\x80\xae", 1, "a?");                  /* U+202E as the last character */
}

static void test_line_ends(void **state)
{
    (void)state;
    CLEAN("a\tb\nc\r\nd", 1, "a b c  d");
    CLEAN("a\tb\nc\r\nd", 0, "a\tb\nc\r\nd");
    CLEAN("a\rb", 0, "a?b");                          /* a CR alone moves the cursor */
    CLEAN("a\r", 0, "a?");
}

static void test_json_keeps_its_values(void **state)
{
    (void)state;
    static const char in[] = "{\"a\":\"x\xc2\x9by\xe2\x80\xaez\x7f\xc3\xa9\",\"b\":\"\\u001b\"}\n";
    char *got = show_json_clean(in, sizeof(in) - 1);
    assert_string_equal(got, "{\"a\":\"x\\u009by\\u202ez\\u007f\xc3\xa9\",\"b\":\"\\u001b\"}\n");
    free(got);
    /* a raw control is no JSON: marked, as in text */
    got = show_json_clean("\"a\x1b" "b\"", 5);
    assert_string_equal(got, "\"a?b\"");
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_controls_become_marks),
        cmocka_unit_test(test_invalid_utf8_becomes_marks),
        cmocka_unit_test(test_line_ends),
        cmocka_unit_test(test_json_keeps_its_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
