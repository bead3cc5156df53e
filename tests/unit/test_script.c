/* test_script.c -- unit tests for script_link: the definitions of lib.lua a
 * script uses, and only those, before it; and for every script of lua/,
 * Lua's own compiler (luac5.1, Redis's Lua) on the linked text: it compiles,
 * and reads no global but the ones Redis gives a script. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/script.h"

#include "testutil.h"

/* script_link, which must take lib */
static char *linked(const char *lib, const char *body)
{
    char err[300] = "";
    char *out = script_link(lib, body, err, sizeof(err));
    if (!out) fail_msg("refused: %s", err);
    return out;
}

/* a lib of five definitions (the parts named for the answers below) */
#define LIB_FIND "local s_find, s_sub = string.find, string.sub\n\n"
#define LIB_A                                                                  \
    "-- a's comment\n"                                                         \
    "-- goes with it\n"                                                        \
    "local function a(x)\n"                                                    \
    "  return s_find(x, 'y')\n"                                                \
    "end\n\n"
#define LIB_B                                                                  \
    "local function b(x)\n"                                                    \
    "  -- nested\n"                                                            \
    "  local k = a(x)\n"                                                       \
    "  return k\n"                                                             \
    "end\n"
static const char LIB[] = "-- lib: a header, dropped\n"
                          "\n" LIB_FIND LIB_A LIB_B
                          "local C = 'c'\n"
                          "local function unused()\n"
                          "  return C\n"
                          "end\n"
                          "local function d() return B_CONST end\n"
                          "local B_CONST = 1\n";

static void test_only_what_is_named(void **state)
{
    (void)state;
    char *out = linked(LIB, "return b(ARGV[1])\n");
    /* b, a (named by b), s_find's line (named by a) in lib's order, each
     * with its comment, then the body */
    assert_string_equal(out, LIB_FIND LIB_A LIB_B "\nreturn b(ARGV[1])\n");
    free(out);
}

static void test_nothing_named(void **state)
{
    (void)state;
    char *out = linked(LIB, "return 1\n");
    assert_string_equal(out, "\nreturn 1\n");
    free(out);
    /* a word inside another (Cx, 1C) names nothing; a word alone in a
     * comment, a string or a field (t.C) does (kept, not needed: harmless) */
    out = linked(LIB, "local Cx = 1 -- see unused\nreturn Cx\n");
    assert_non_null(strstr(out, "local function unused()"));
    assert_non_null(strstr(out, "local C = 'c'"));
    assert_null(strstr(out, "local function a("));
    free(out);
    out = linked(LIB, "return xC, C_, 1C\n");
    assert_null(strstr(out, "local C ="));
    free(out);
    out = linked(LIB, "return t.C\n");
    assert_non_null(strstr(out, "local C ="));
    free(out);
}

static void test_second_name_of_a_line(void **state)
{
    (void)state;
    char *out = linked(LIB, "return s_sub('ab', 1, 1)\n");
    assert_string_equal(out, LIB_FIND "\nreturn s_sub('ab', 1, 1)\n");
    free(out);
}

static void test_order_is_lib_order(void **state)
{
    (void)state;
    /* d names B_CONST, defined after it (as lib.lua never does: it would
     * read a global); kept in lib's order all the same */
    char *out = linked(LIB, "return d()\n");
    const char *d = strstr(out, "local function d()"), *bc = strstr(out, "local B_CONST");
    assert_non_null(d);
    assert_non_null(bc);
    assert_true(d < bc);
    free(out);
}

/* A lib that leaves the form script_link reads is refused, naming why */
static void test_refused_lib(void **state)
{
    (void)state;
    static const struct {
        const char *lib, *why;
    } bad[] = {
        {"local function a() end\nfunction g() end\n", "line 2: not a definition"},
        {"local function a() end\nX = 1\n", "line 2: not a definition"},
        {"local\tx = 1\n", "line 1: not a definition"},
        {"local function  f() end\n", "line 1: a definition is"},
        {"local x\n", "line 1: a definition is"},
        {"local a, b, c, d, e, f, g, h, i = 1\n", "line 1: a definition is"},
        {"local function a() end\nlocal a = 1\n", "line 2: a defined twice"},
        {"local s = [[\nlocal b = 1\n]]\n", "a long bracket"},
        {"-- [=[ a long comment ]=]\nlocal b = 1\n", "a long bracket"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char err[300] = "";
        char *out = script_link(bad[i].lib, "return 1\n", err, sizeof(err));
        if (out) fail_msg("taken: %s", bad[i].lib);
        assert_contains(err, bad[i].why);
    }
    /* what reaches column 0 inside a definition: its end, a table's close */
    char *out = linked("local function a()\n  return 1\nend\nlocal T = {\n  x = 1,\n}\n", "return T\n");
    assert_string_equal(out, "local T = {\n  x = 1,\n}\n\nreturn T\n");
    free(out);
}

/* lua/NAME.lua, as tickd reads it */
static char *read_script(const char *name)
{
    char err[1400];
    char *text = script_read("lua", name, err, sizeof(err));
    if (!text) fail_msg("%s", err);
    return text;
}

/* The globals Redis gives a script (Redis 7.0's scripting environment,
 * the Lua libraries it loads) */
static int global_ok(const char *name)
{
    static const char *ok[] = {"redis", "cjson", "cmsgpack", "struct", "bit", "KEYS", "ARGV",
                               "string", "table", "math", "tonumber", "tostring", "type",
                               "unpack", "ipairs", "pairs", "pcall", "error", "select",
                               "next", "assert", "rawget", "rawset", "rawequal",
                               "setmetatable", "getmetatable", "xpcall"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++)
        if (strcmp(ok[i], name) == 0) return 1;
    return 0;
}

/* Each script of lua/ linked as tickd loads it: luac5.1 compiles it, and
 * every global it reads or writes is one Redis gives (a definition the link
 * left out would be read as a global). The link keeps less than all of
 * lib.lua for most scripts. */
static void test_every_script_links(void **state)
{
    (void)state;
    static const char *scripts[] = {"add", "cancel", "claim", "fetch", "flow", "get",
                                    "list", "move", "ptr", "sched", "settle", "wm"};
    char *lib = read_script("lib");
    for (size_t i = 0; i < sizeof(scripts) / sizeof(*scripts); i++) {
        char tmp[] = "/tmp/tickd-script-XXXXXX", cmd[128], line[512];
        char *body = read_script(scripts[i]), *out = linked(lib, body);
        int fd = mkstemp(tmp);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, out, strlen(out)), (ssize_t)strlen(out));
        close(fd);
        snprintf(cmd, sizeof(cmd), "luac5.1 -p -l %s 2>&1", tmp);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        int listed = 0;
        while (fgets(line, sizeof(line), p)) {
            listed++;
            if (!strstr(line, "GETGLOBAL") && !strstr(line, "SETGLOBAL")) continue;
            char *name = strstr(line, "; ");
            assert_non_null(name);
            name += 2;
            name[strcspn(name, "\r\n")] = '\0';
            if (!global_ok(name)) fail_msg("%s.lua linked reads the global %s", scripts[i], name);
        }
        int rc = pclose(p);
        if (rc != 0) fail_msg("luac5.1 refused %s.lua linked (%d): is lua5.1 installed?", scripts[i], rc);
        assert_true(listed > 0);
        unlink(tmp);
        free(out);
        free(body);
    }
    /* get.lua: the fresh lookup it names, not the slice's close it does not */
    char *body = read_script("get"), *out = linked(lib, body);
    assert_non_null(strstr(out, "\nlocal function fresh_find("));
    assert_null(strstr(out, "local function close_slice("));
    assert_null(strstr(out, "local function bulk_write("));
    free(out);
    free(body);
    free(lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_what_is_named),
        cmocka_unit_test(test_nothing_named),
        cmocka_unit_test(test_second_name_of_a_line),
        cmocka_unit_test(test_order_is_lib_order),
        cmocka_unit_test(test_refused_lib),
        cmocka_unit_test(test_every_script_links),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
