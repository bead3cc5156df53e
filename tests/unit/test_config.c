/* test_config.c -- unit tests for config.c: defaults, config_set, ini files,
 * environment overrides, validation and the printed default file. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"

extern char **environ;

/* ---- helpers ----------------------------------------------------------- */

#define assert_prefix_str(s, prefix)                                           \
    do {                                                                       \
        if (strncmp((s), (prefix), strlen(prefix)) != 0)                       \
            fail_msg("\"%s\" does not begin with \"%s\"", (s), (prefix));      \
    } while (0)

#define assert_contains(s, sub)                                                \
    do {                                                                       \
        if (!strstr((s), (sub)))                                               \
            fail_msg("\"%s\" does not contain \"%s\"", (s), (sub));            \
    } while (0)

/* Every key, with a valid value different from its default. */
static const struct {
    const char *section, *key, *value;
} all_keys[] = {
    {"server", "listen", "0.0.0.0:9090"},
    {"server", "max_body", "2048"},
    {"server", "workers", "8"},
    {"server", "max_inflight", "77"},
    {"server", "shutdown_grace_ms", "123"},
    {"server", "store", "memory"},
    {"server", "log_level", "debug"},
    {"redis", "nodes", "10.0.0.1:7000,10.0.0.2:7001"},
    {"redis", "prefix", "tk:v2"},
    {"redis", "timeout_ms", "50"},
    {"redis", "scripts_dir", "/opt/tickd/lua"},
    {"redis", "wait_replicas", "2"},
    {"redis", "wait_timeout_ms", "20"},
    {"scheduler", "tick_ms", "200"},
    {"scheduler", "lookahead_ms", "400"},
    {"scheduler", "batch", "9"},
    {"scheduler", "buckets", "64"},
    {"scheduler", "lease_margin_ms", "700"},
    {"scheduler", "retention_ms", "5000"},
    {"scheduler", "slice_grace_ms", "3000"},
};
#define NALL (sizeof(all_keys) / sizeof(all_keys[0]))

/* A config with every key away from its default. */
static void config_nondefault(config *c)
{
    char err[256];
    config_defaults(c);
    for (size_t i = 0; i < NALL; i++)
        if (config_set(c, all_keys[i].section, all_keys[i].key, all_keys[i].value, err,
                       sizeof(err)) != 0)
            fail_msg("config_set %s.%s: %s", all_keys[i].section, all_keys[i].key, err);
}

/* Field by field: bytes after a string's NUL may differ and do not matter. */
static void assert_config_equal(const config *a, const config *b)
{
#define S(f) assert_string_equal(a->f, b->f)
#define I(f) assert_int_equal(a->f, b->f)
    S(listen); I(max_body); I(workers); I(max_inflight); I(shutdown_grace_ms);
    S(store); S(log_level);
    S(nodes); S(prefix); I(timeout_ms); S(scripts_dir); I(wait_replicas);
    I(wait_timeout_ms);
    I(tick_ms); I(lookahead_ms); I(batch); I(buckets); I(lease_margin_ms);
    I(retention_ms); I(slice_grace_ms);
#undef S
#undef I
}

/* A temp file holding `text`; its path in path (>= 64 bytes). */
static void write_temp(char *path, const char *text)
{
    strcpy(path, "/tmp/tickd-test-config-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) fail_msg("mkstemp: %s", strerror(errno));
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Load `text` as an ini file over c. Returns config_load_file's result; the
 * error has the temp path replaced by "PATH". */
static int load_text(config *c, const char *text, char *err, size_t errlen)
{
    char path[64], raw[512];
    write_temp(path, text);
    raw[0] = '\0';
    int rc = config_load_file(c, path, raw, sizeof(raw));
    unlink(path);
    if (rc == 0) {
        snprintf(err, errlen, "%s", "");
        return 0;
    }
    size_t n = strlen(path);
    if (strncmp(raw, path, n) != 0) fail_msg("error \"%s\" does not begin with the path", raw);
    snprintf(err, errlen, "PATH%s", raw + n);
    return rc;
}

/* Remove every TICKD_* variable, so the environment tests start clean. */
static void clear_tickd_env(void)
{
    for (;;) {
        char name[256];
        int found = 0;
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, "TICKD_", 6) == 0) {
                const char *eq = strchr(*e, '=');
                size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
                if (n >= sizeof(name)) n = sizeof(name) - 1;
                memcpy(name, *e, n);
                name[n] = '\0';
                found = 1;
                break;
            }
        }
        if (!found) return;
        assert_int_equal(unsetenv(name), 0);
    }
}

/* ---- defaults ---------------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    config c;
    char err[256];
    memset(&c, 0x5a, sizeof(c));
    config_defaults(&c);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_int_equal(c.max_body, 1048576);
    assert_int_equal(c.workers, 0);
    assert_int_equal(c.max_inflight, 4096);
    assert_int_equal(c.shutdown_grace_ms, 10000);
    assert_string_equal(c.store, "redis");
    assert_string_equal(c.log_level, "info");
    assert_string_equal(c.nodes, "127.0.0.1:6379");
    assert_string_equal(c.prefix, "tickd");
    assert_int_equal(c.timeout_ms, 2000);
    assert_string_equal(c.scripts_dir, "");
    assert_int_equal(c.wait_replicas, 0);
    assert_int_equal(c.wait_timeout_ms, 1000);
    assert_int_equal(c.tick_ms, 1000);
    assert_int_equal(c.lookahead_ms, 1500);
    assert_int_equal(c.batch, 256);
    assert_int_equal(c.buckets, 16);
    assert_int_equal(c.lease_margin_ms, 5000);
    assert_int_equal(c.retention_ms, 86400000);
    assert_int_equal(c.slice_grace_ms, 60000);
    /* the defaults are a valid configuration */
    if (config_validate(&c, err, sizeof(err)) != 0) fail_msg("defaults invalid: %s", err);

    /* deterministic: two calls give the same bytes */
    config d;
    memset(&d, 0xa5, sizeof(d));
    config_defaults(&d);
    assert_memory_equal(&c, &d, sizeof(c));
}

/* ---- config_set -------------------------------------------------------- */

static void test_set_every_key(void **state)
{
    (void)state;
    config c;
    config_nondefault(&c);
    assert_string_equal(c.listen, "0.0.0.0:9090");
    assert_int_equal(c.max_body, 2048);
    assert_int_equal(c.workers, 8);
    assert_int_equal(c.max_inflight, 77);
    assert_int_equal(c.shutdown_grace_ms, 123);
    assert_string_equal(c.store, "memory");
    assert_string_equal(c.log_level, "debug");
    assert_string_equal(c.nodes, "10.0.0.1:7000,10.0.0.2:7001");
    assert_string_equal(c.prefix, "tk:v2");
    assert_int_equal(c.timeout_ms, 50);
    assert_string_equal(c.scripts_dir, "/opt/tickd/lua");
    assert_int_equal(c.wait_replicas, 2);
    assert_int_equal(c.wait_timeout_ms, 20);
    assert_int_equal(c.tick_ms, 200);
    assert_int_equal(c.lookahead_ms, 400);
    assert_int_equal(c.batch, 9);
    assert_int_equal(c.buckets, 64);
    assert_int_equal(c.lease_margin_ms, 700);
    assert_int_equal(c.retention_ms, 5000);
    assert_int_equal(c.slice_grace_ms, 3000);
}

static void set_ok(config *c, const char *section, const char *key, const char *value)
{
    char err[256] = "";
    if (config_set(c, section, key, value, err, sizeof(err)) != 0)
        fail_msg("%s.%s = \"%s\" rejected: %s", section, key, value, err);
}

/* Expect config_set to fail with exactly `want`, leaving c unchanged. */
static void set_bad(config *c, const char *section, const char *key, const char *value,
                    const char *want)
{
    char err[256] = "";
    config before = *c;
    if (config_set(c, section, key, value, err, sizeof(err)) != -1)
        fail_msg("%s.%s = \"%s\" accepted", section, key, value);
    if (strcmp(err, want) != 0)
        fail_msg("%s.%s = \"%s\": error \"%s\", want \"%s\"", section, key, value, err, want);
    assert_memory_equal(&before, c, sizeof(before));
}

static void test_set_int_bounds(void **state)
{
    (void)state;
    config c;
    config_defaults(&c);

    set_ok(&c, "scheduler", "tick_ms", "10");
    assert_int_equal(c.tick_ms, 10);
    set_ok(&c, "scheduler", "tick_ms", "60000");
    assert_int_equal(c.tick_ms, 60000);
    set_bad(&c, "scheduler", "tick_ms", "9", "tick_ms: 9 is out of range 10..60000");
    set_bad(&c, "scheduler", "tick_ms", "60001", "tick_ms: 60001 is out of range 10..60000");
    set_bad(&c, "scheduler", "tick_ms", "-1", "tick_ms: -1 is out of range 10..60000");
    set_bad(&c, "scheduler", "tick_ms", "0", "tick_ms: 0 is out of range 10..60000");

    set_ok(&c, "server", "max_body", "1024");
    set_ok(&c, "server", "max_body", "67108864");
    assert_int_equal(c.max_body, 64 << 20);
    set_bad(&c, "server", "max_body", "1023", "max_body: 1023 is out of range 1024..67108864");
    set_bad(&c, "server", "max_body", "67108865", "max_body: 67108865 is out of range 1024..67108864");

    set_ok(&c, "server", "workers", "0");
    set_ok(&c, "server", "workers", "256");
    set_bad(&c, "server", "workers", "257", "workers: 257 is out of range 0..256");
    set_bad(&c, "server", "workers", "-1", "workers: -1 is out of range 0..256");

    set_ok(&c, "scheduler", "buckets", "1");
    set_ok(&c, "scheduler", "buckets", "1024");
    set_bad(&c, "scheduler", "buckets", "0", "buckets: 0 is out of range 1..1024");
    set_bad(&c, "scheduler", "buckets", "1025", "buckets: 1025 is out of range 1..1024");

    set_ok(&c, "scheduler", "retention_ms", "31536000000");
    assert_int_equal(c.retention_ms, INT64_C(31536000000));
    set_bad(&c, "scheduler", "retention_ms", "31536000001",
            "retention_ms: 31536000001 is out of range 1000..31536000000");

    set_ok(&c, "redis", "wait_replicas", "16");
    set_bad(&c, "redis", "wait_replicas", "17", "wait_replicas: 17 is out of range 0..16");
    set_ok(&c, "redis", "timeout_ms", "10");
    set_bad(&c, "redis", "timeout_ms", "9", "timeout_ms: 9 is out of range 10..600000");
}

static void test_set_int_malformed(void **state)
{
    (void)state;
    config c;
    config_defaults(&c);
    set_bad(&c, "scheduler", "batch", "", "batch: not an integer: \"\"");
    set_bad(&c, "scheduler", "batch", "abc", "batch: not an integer: \"abc\"");
    set_bad(&c, "scheduler", "batch", "10x", "batch: not an integer: \"10x\"");
    set_bad(&c, "scheduler", "batch", "1.5", "batch: not an integer: \"1.5\"");
    set_bad(&c, "scheduler", "batch", "1e3", "batch: not an integer: \"1e3\"");
    set_bad(&c, "scheduler", "batch", "0x10", "batch: not an integer: \"0x10\"");
    set_bad(&c, "scheduler", "batch", "12 ", "batch: not an integer: \"12 \"");
    set_bad(&c, "scheduler", "batch", "1 2", "batch: not an integer: \"1 2\"");
    set_bad(&c, "scheduler", "batch", "-", "batch: not an integer: \"-\"");
    set_bad(&c, "scheduler", "batch", "99999999999999999999",
            "batch: not an integer: \"99999999999999999999\"");
    set_bad(&c, "scheduler", "batch", "-99999999999999999999",
            "batch: not an integer: \"-99999999999999999999\"");
    set_bad(&c, "scheduler", "batch", "9223372036854775807",
            "batch: 9223372036854775807 is out of range 1..10000");
    assert_int_equal(c.batch, 256);
    /* leading zeros are still decimal */
    set_ok(&c, "scheduler", "batch", "010");
    assert_int_equal(c.batch, 10);
}

static void test_set_strings(void **state)
{
    (void)state;
    config c;
    char buf[2048];
    config_defaults(&c);

    set_ok(&c, "server", "store", "memory");
    assert_string_equal(c.store, "memory");
    set_ok(&c, "server", "store", "redis");
    set_bad(&c, "server", "store", "disk", "store: must be redis or memory, not \"disk\"");
    set_bad(&c, "server", "store", "", "store: must be redis or memory, not \"\"");
    set_bad(&c, "server", "store", "Redis", "store: must be redis or memory, not \"Redis\"");
    set_bad(&c, "server", "store", "memoryyyyyyyyyyyyyy", "store: longer than 15 bytes");

    const char *levels[] = {"debug", "info", "warn", "error"};
    for (size_t i = 0; i < 4; i++) {
        set_ok(&c, "server", "log_level", levels[i]);
        assert_string_equal(c.log_level, levels[i]);
    }
    set_bad(&c, "server", "log_level", "verbose", "log_level: must be debug, info, warn or error");
    set_bad(&c, "server", "log_level", "INFO", "log_level: must be debug, info, warn or error");
    set_bad(&c, "server", "log_level", "", "log_level: must be debug, info, warn or error");

    set_ok(&c, "redis", "prefix", "a-b_c.d:e09");
    assert_string_equal(c.prefix, "a-b_c.d:e09");
    set_ok(&c, "redis", "prefix", "");
    set_bad(&c, "redis", "prefix", "a b", "prefix: only letters, digits and _-.: allowed");
    set_bad(&c, "redis", "prefix", "a/b", "prefix: only letters, digits and _-.: allowed");
    set_bad(&c, "redis", "prefix", "{tag}", "prefix: only letters, digits and _-.: allowed");
    set_bad(&c, "redis", "prefix", "a*", "prefix: only letters, digits and _-.: allowed");

    /* lengths: the field size less the NUL */
    memset(buf, 'l', 255);
    buf[255] = '\0';
    set_ok(&c, "server", "listen", buf);
    assert_string_equal(c.listen, buf);
    buf[255] = 'l';
    buf[256] = '\0';
    set_bad(&c, "server", "listen", buf, "listen: longer than 255 bytes");

    memset(buf, 'n', 1023);
    buf[1023] = '\0';
    set_ok(&c, "redis", "nodes", buf);
    assert_string_equal(c.nodes, buf);
    buf[1023] = 'n';
    buf[1024] = '\0';
    set_bad(&c, "redis", "nodes", buf, "nodes: longer than 1023 bytes");

    memset(buf, 'p', 63);
    buf[63] = '\0';
    set_ok(&c, "redis", "prefix", buf);
    buf[63] = 'p';
    buf[64] = '\0';
    set_bad(&c, "redis", "prefix", buf, "prefix: longer than 63 bytes");

    set_ok(&c, "redis", "scripts_dir", "");
    assert_string_equal(c.scripts_dir, "");
    /* a shorter value after a longer one is a clean string */
    set_ok(&c, "redis", "nodes", "h:1");
    assert_string_equal(c.nodes, "h:1");
}

static void test_set_unknown(void **state)
{
    (void)state;
    config c;
    config_defaults(&c);
    set_bad(&c, "server", "nope", "1", "nope: unknown key in section [server]");
    /* a key exists only in its own section */
    set_bad(&c, "server", "tick_ms", "100",
            "tick_ms: unknown key in section [server] (did you mean scheduler.tick_ms?)");
    set_bad(&c, "redis", "listen", "x",
            "listen: unknown key in section [redis] (did you mean server.listen?)");
    set_bad(&c, "foo", "bar", "1", "bar: unknown key in section [foo]");
    set_bad(&c, "", "tick_ms", "100",
            "tick_ms: unknown key in section [] (did you mean scheduler.tick_ms?)");
    /* names are case-sensitive */
    set_bad(&c, "Scheduler", "tick_ms", "100",
            "tick_ms: unknown key in section [Scheduler] (did you mean scheduler.tick_ms?)");
    set_bad(&c, "scheduler", "TICK_MS", "100",
            "TICK_MS: unknown key in section [scheduler] (did you mean scheduler.tick_ms?)");
    /* a near miss is named; a far one is not guessed at */
    set_bad(&c, "server", "api_tokn", "t",
            "api_tokn: unknown key in section [server] (did you mean server.api_token?)");
    set_bad(&c, "redis", "pasword", "t",
            "pasword: unknown key in section [redis] (did you mean redis.password?)");
    set_bad(&c, "callback", "signing_secret", "t", "signing_secret: unknown key in section "
            "[callback] (did you mean callback.signing_secrets?)");
}

/* ---- config_load_file -------------------------------------------------- */

static void test_load_good_file(void **state)
{
    (void)state;
    config c, want;
    char err[512];
    config_defaults(&c);
    int rc = load_text(&c,
                       "; a comment\n"
                       "# another comment\n"
                       "\n"
                       "[server]\n"
                       "listen = 0.0.0.0:9999\n"
                       "store=memory\n"
                       "workers   =   4   \n"
                       "\n"
                       "[scheduler]\n"
                       "tick_ms = 250 ; inline comment\n"
                       "lookahead_ms = 500\n"
                       "\n"
                       "[redis]\n"
                       "nodes = a:1,b:2\n"
                       "scripts_dir =\n"
                       "prefix = px\n"
                       "[scheduler]\n"
                       "batch = 100\n"
                       "batch = 101\n",
                       err, sizeof(err));
    if (rc != 0) fail_msg("load failed: %s", err);
    config_defaults(&want);
    strcpy(want.listen, "0.0.0.0:9999");
    strcpy(want.store, "memory");
    want.workers = 4;
    want.tick_ms = 250;
    want.lookahead_ms = 500;
    strcpy(want.nodes, "a:1,b:2");
    strcpy(want.prefix, "px");
    want.batch = 101; /* the last of a repeated key wins */
    assert_string_equal(c.listen, want.listen);
    assert_string_equal(c.store, want.store);
    assert_int_equal(c.workers, 4);
    assert_int_equal(c.tick_ms, 250);
    assert_int_equal(c.lookahead_ms, 500);
    assert_string_equal(c.nodes, "a:1,b:2");
    assert_string_equal(c.scripts_dir, "");
    assert_string_equal(c.prefix, "px");
    assert_int_equal(c.batch, 101);
    assert_config_equal(&c, &want);

    /* a file applies over what is there: keys it does not name are kept */
    config_nondefault(&c);
    want = c;
    rc = load_text(&c, "[scheduler]\nbuckets = 32\n", err, sizeof(err));
    if (rc != 0) fail_msg("load failed: %s", err);
    want.buckets = 32;
    assert_config_equal(&c, &want);

    /* an empty file, and one of comments only */
    config_defaults(&c);
    assert_int_equal(load_text(&c, "", err, sizeof(err)), 0);
    assert_int_equal(load_text(&c, "; nothing\n\n# here\n", err, sizeof(err)), 0);
    config_defaults(&want);
    assert_config_equal(&c, &want);
}

static void test_load_long_values(void **state)
{
    (void)state;
    config c;
    char err[512], text[2048], nodes[1024];
    size_t n = 0;

    /* a value that fits inih's line buffer */
    memset(nodes, 'h', 150);
    strcpy(nodes + 150, ":6379");
    snprintf(text, sizeof(text), "[redis]\nnodes = %s\n", nodes);
    config_defaults(&c);
    if (load_text(&c, text, err, sizeof(err)) != 0) fail_msg("rejected: %s", err);
    assert_string_equal(c.nodes, nodes);

    /* inih (as Debian builds it) cuts lines at 199 bytes; a longer line is
     * refused with its line number rather than misread (the environment
     * variable takes longer values) */
    for (int i = 0; n + 20 < 600; i++)
        n += (size_t)snprintf(nodes + n, sizeof(nodes) - n, "%s10.0.%d.%d:7000",
                              i ? "," : "", i / 250, i % 250);
    snprintf(text, sizeof(text), "[redis]\nnodes = %s\n", nodes);
    config_defaults(&c);
    assert_int_equal(load_text(&c, text, err, sizeof(err)), -1);
    assert_contains(err, ":2: line longer than 199 bytes");
}

static void test_load_errors(void **state)
{
    (void)state;
    config c;
    char err[512];

    config_defaults(&c);
    assert_int_equal(load_text(&c,
                               "[server]\n"
                               "listen = 0.0.0.0:1\n"
                               "\n"
                               "; comment\n"
                               "bogus = 1\n"
                               "workers = 3\n",
                               err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:5: bogus: unknown key in section [server]");

    config_defaults(&c);
    assert_int_equal(load_text(&c,
                               "[scheduler]\n"
                               "batch = 10\n"
                               "tick_ms = 5\n",
                               err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:3: tick_ms: 5 is out of range 10..60000");

    config_defaults(&c);
    assert_int_equal(load_text(&c, "[scheduler]\ntick_ms = fast\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:2: tick_ms: not an integer: \"fast\"");

    config_defaults(&c);
    assert_int_equal(load_text(&c, "[server]\nstore = disk\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:2: store: must be redis or memory, not \"disk\"");

    /* a key in the wrong section */
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[server]\n\n\ntick_ms = 100\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:4: tick_ms: unknown key in section [server] (did you mean "
                             "scheduler.tick_ms?)");
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[server]\napi_tokn = secret\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:2: api_tokn: unknown key in section [server] (did you mean "
                             "server.api_token?)");

    /* unknown section */
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[server]\nworkers = 2\n[sheduler]\ntick_ms = 100\n", err,
                               sizeof(err)), -1);
    assert_string_equal(err, "PATH:3: [sheduler]: unknown section (did you mean [scheduler]?)");
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[listener]\nport = 1\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:1: [listener]: unknown section");

    /* a key before any section */
    config_defaults(&c);
    assert_int_equal(load_text(&c, "tick_ms = 100\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:1: tick_ms: unknown key in section [] (did you mean "
                             "scheduler.tick_ms?)");

    /* the first error is reported, not a later one */
    config_defaults(&c);
    assert_int_equal(load_text(&c,
                               "[scheduler]\n"
                               "batch = 0\n"
                               "tick_ms = 1\n"
                               "nope = 1\n",
                               err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:2: batch: 0 is out of range 1..10000");

    /* syntax errors */
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[scheduler]\ntick_ms 100\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:2: syntax error (want key = value)");
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[server]\nworkers = 1\n[scheduler\n", err, sizeof(err)), -1);
    assert_string_equal(err, "PATH:3: syntax error");
}

static void test_load_missing_file(void **state)
{
    (void)state;
    config c;
    char err[512];
    config_defaults(&c);
    config before = c;
    const char *path = "/nonexistent-tickd-dir/tickd.ini";
    assert_int_equal(config_load_file(&c, path, err, sizeof(err)), -1);
    assert_contains(err, path);
    assert_int_equal(strncmp(err, path, strlen(path)), 0);
    assert_contains(err, "No such file");
    assert_config_equal(&before, &c);

    /* a directory is not a config file */
    assert_int_equal(config_load_file(&c, "/", err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "/:", 2), 0);
}

/* ---- config_load_env --------------------------------------------------- */

static void test_env(void **state)
{
    (void)state;
    config c, want;
    char err[512];
    clear_tickd_env();

    /* none set: nothing changes */
    config_defaults(&c);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), 0);
    config_defaults(&want);
    assert_config_equal(&c, &want);

    assert_int_equal(setenv("TICKD_SCHEDULER_TICK_MS", "250", 1), 0);
    assert_int_equal(setenv("TICKD_SCHEDULER_LOOKAHEAD_MS", "400", 1), 0);
    assert_int_equal(setenv("TICKD_REDIS_NODES", "10.0.0.5:6379,10.0.0.6:6379", 1), 0);
    assert_int_equal(setenv("TICKD_SERVER_STORE", "memory", 1), 0);
    assert_int_equal(setenv("TICKD_REDIS_SCRIPTS_DIR", "", 1), 0);
    assert_int_equal(setenv("tickd_scheduler_batch", "7", 1), 0); /* not the name */
    config_defaults(&c);
    if (config_load_env(&c, err, sizeof(err)) != 0) fail_msg("load_env: %s", err);
    assert_int_equal(c.tick_ms, 250);
    assert_int_equal(c.lookahead_ms, 400);
    assert_string_equal(c.nodes, "10.0.0.5:6379,10.0.0.6:6379");
    assert_string_equal(c.store, "memory");
    assert_int_equal(c.batch, 256);
    want.tick_ms = 250;
    want.lookahead_ms = 400;
    strcpy(want.nodes, "10.0.0.5:6379,10.0.0.6:6379");
    strcpy(want.store, "memory");
    assert_config_equal(&c, &want);
    unsetenv("tickd_scheduler_batch");

    /* a bad value names the variable and the reason */
    assert_int_equal(setenv("TICKD_SCHEDULER_BATCH", "0", 1), 0);
    config_defaults(&c);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "environment TICKD_SCHEDULER_BATCH: batch: 0 is out of range 1..10000");
    assert_int_equal(setenv("TICKD_SCHEDULER_BATCH", "lots", 1), 0);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "environment TICKD_SCHEDULER_BATCH: batch: not an integer: \"lots\"");
    unsetenv("TICKD_SCHEDULER_BATCH");

    assert_int_equal(setenv("TICKD_SERVER_LOG_LEVEL", "loud", 1), 0);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), -1);
    assert_contains(err, "TICKD_SERVER_LOG_LEVEL");
    assert_contains(err, "log_level: ");
    unsetenv("TICKD_SERVER_LOG_LEVEL");

    /* the environment overrides the file */
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[scheduler]\ntick_ms = 500\nbatch = 5\n", err, sizeof(err)), 0);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), 0);
    assert_int_equal(c.tick_ms, 250);
    assert_int_equal(c.batch, 5);

    /* every key has its variable */
    clear_tickd_env();
    for (size_t i = 0; i < NALL; i++) {
        char var[128];
        snprintf(var, sizeof(var), "TICKD_%s_%s", all_keys[i].section, all_keys[i].key);
        for (char *p = var; *p; p++)
            if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
        assert_int_equal(setenv(var, all_keys[i].value, 1), 0);
    }
    config_defaults(&c);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), 0);
    config_nondefault(&want);
    assert_config_equal(&c, &want);
    clear_tickd_env();
}

/* ---- config_validate --------------------------------------------------- */

static void test_validate(void **state)
{
    (void)state;
    config c;
    char err[256];

    config_defaults(&c);
    assert_int_equal(config_validate(&c, err, sizeof(err)), 0);

    /* lookahead shorter than a tick */
    c.tick_ms = 1000;
    c.lookahead_ms = 500;
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "scheduler.lookahead_ms: ", 24), 0);
    c.lookahead_ms = 999;
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    /* ticks come every tick_ms +-25 %: the lookahead must cover 1.25 ticks */
    c.lookahead_ms = 1000;
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    c.lookahead_ms = 1249;
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    assert_contains(err, "lookahead_ms");
    assert_contains(err, "1250");
    c.lookahead_ms = 1250;
    assert_int_equal(config_validate(&c, err, sizeof(err)), 0);
    c.lookahead_ms = 60000;
    assert_int_equal(config_validate(&c, err, sizeof(err)), 0);

    /* set through config_set the same way */
    config_defaults(&c);
    set_ok(&c, "scheduler", "tick_ms", "2000");
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    set_ok(&c, "scheduler", "lookahead_ms", "2500");
    assert_int_equal(config_validate(&c, err, sizeof(err)), 0);

    /* no Redis nodes */
    config_defaults(&c);
    set_ok(&c, "redis", "nodes", "");
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    assert_contains(err, "redis.nodes");
}

/* [callback] TLS and proxy keys: values read, and keys that need each other */
static void test_callback_tls_keys(void **state)
{
    (void)state;
    config c;
    char err[256];

    config_defaults(&c);
    assert_int_equal(c.ca_system, 1);
    assert_string_equal(c.tls_min_version, "1.2");
    for (const char *const *v = (const char *const[]){"false", "no", "OFF", "0", NULL}; *v; v++) {
        c.ca_system = 1;
        set_ok(&c, "callback", "ca_system", *v);
        assert_int_equal(c.ca_system, 0);
    }
    set_ok(&c, "callback", "ca_system", "True");
    assert_int_equal(c.ca_system, 1);
    set_bad(&c, "callback", "ca_system", "maybe", "ca_system: must be true or false, not \"maybe\"");
    set_ok(&c, "callback", "tls_min_version", "1.3");
    set_bad(&c, "callback", "tls_min_version", "1.1", "tls_min_version: must be 1.2 or 1.3, not \"1.1\"");

    config_defaults(&c);
    set_ok(&c, "callback", "ca_system", "false");
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    assert_contains(err, "callback.ca_system: false needs callback.ca_file or callback.ca_path");
    set_ok(&c, "callback", "ca_file", "/etc/ssl/private-ca.pem");
    assert_int_equal(config_validate(&c, err, sizeof(err)), 0);

    config_defaults(&c);
    set_ok(&c, "callback", "client_key_password", "pw");
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    assert_contains(err, "callback.client_key_password: needs callback.client_cert");

    config_defaults(&c);
    const char *good[] = {"http://p:3128", "https://p:443", "socks5://p:1080", "SOCKS5H://p:1"};
    for (size_t i = 0; i < 4; i++) {
        set_ok(&c, "callback", "proxy", good[i]);
        assert_int_equal(config_validate(&c, err, sizeof(err)), 0);
    }
    const char *bad[] = {"p:3128", "ftp://p", "http://", "http://p :1"};
    for (size_t i = 0; i < 4; i++) {
        set_ok(&c, "callback", "proxy", bad[i]);
        assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
        assert_contains(err, "callback.proxy: ");
    }
}

/* [host:NAME]: keys set per host (which ones remembered), refusals leave
 * the config unchanged, at most CONFIG_HOSTS_MAX hosts */
static void test_host_sections(void **state)
{
    (void)state;
    config c;
    char name[32];
    config_defaults(&c);
    set_ok(&c, "host:a.example", "client_cert", "/a.pem");
    set_ok(&c, "host:A.example", "insecure_skip_verify", "yes");
    set_ok(&c, "host:b.example", "tls_min_version", "1.3");
    assert_int_equal(c.nhosts, 2);
    assert_string_equal(c.hosts[0].name, "a.example");
    assert_string_equal(c.hosts[0].client_cert, "/a.pem");
    assert_int_equal(c.hosts[0].insecure_skip_verify, 1);
    assert_int_equal(c.hosts[0].set, (1u << config_host_key("client_cert")) |
                                     (1u << config_host_key("insecure_skip_verify")));
    assert_string_equal(c.hosts[1].tls_min_version, "1.3");
    set_bad(&c, "host:c.example", "client_crt", "/x",
            "client_crt: unknown key in section [host:c.example] (did you mean client_cert?)");
    set_bad(&c, "host:c.example", "tls_min_version", "1.0",
            "tls_min_version: must be 1.2 or 1.3, not \"1.0\"");
    set_bad(&c, "host:", "ca_file", "/x", "[host:]: not a host name");
    set_bad(&c, "host:a b", "ca_file", "/x", "[host:a b]: not a host name");
    for (int i = 2; i < CONFIG_HOSTS_MAX; i++) {
        snprintf(name, sizeof(name), "host:h%d", i);
        set_ok(&c, name, "ca_path", "/etc/ssl/certs");
    }
    set_bad(&c, "host:one-more", "ca_path", "/x", "[host:one-more]: more than 16 host sections");
    set_ok(&c, "host:h2", "ca_file", "/y");  /* an existing one still takes keys */
}

static void env_bad(const char *var, const char *value, const char *want)
{
    config c;
    char err[512] = "";
    clear_tickd_env();
    assert_int_equal(setenv(var, value, 1), 0);
    config_defaults(&c);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), -1);
    assert_string_equal(err, want);
    clear_tickd_env();
}

static void test_env_unknown(void **state)
{
    (void)state;
    /* a misspelt setting stops the start: left unread, the API would run open */
    env_bad("TICKD_SERVER_API_TOKN", "s3cret", "environment TICKD_SERVER_API_TOKN: unknown "
            "setting (did you mean TICKD_SERVER_API_TOKEN?)");
    env_bad("TICKD_REDIS_PASWORD", "pw", "environment TICKD_REDIS_PASWORD: unknown setting "
            "(did you mean TICKD_REDIS_PASSWORD?)");
    env_bad("TICKD_SERVR_LISTEN", "x:1", "environment TICKD_SERVR_LISTEN: unknown setting "
            "(did you mean TICKD_SERVER_LISTEN?)");
    env_bad("TICKD_LISTEN", "x:1", "environment TICKD_LISTEN: unknown setting "
            "(did you mean TICKD_SERVER_LISTEN?)");
    env_bad("TICKD_CALLBACK_SIGNING_SECRET", "whsec_x", "environment "
            "TICKD_CALLBACK_SIGNING_SECRET: unknown setting (did you mean "
            "TICKD_CALLBACK_SIGNING_SECRETS?)");
    env_bad("TICKD_server_listen", "x:1", "environment TICKD_server_listen: unknown setting "
            "(did you mean TICKD_SERVER_LISTEN?)");
    env_bad("TICKD_COLOUR", "1", "environment TICKD_COLOUR: unknown setting (settings are "
            "TICKD_<SECTION>_<KEY>; tickd --print-config lists them)");
    env_bad("TICKD_", "", "environment TICKD_: unknown setting (settings are "
            "TICKD_<SECTION>_<KEY>; tickd --print-config lists them)");
    /* even with an empty value, and after a valid one */
    clear_tickd_env();
    config c;
    char err[512];
    assert_int_equal(setenv("TICKD_SERVER_WORKERS", "2", 1), 0);
    assert_int_equal(setenv("TICKD_SERVER_WORKRS", "", 1), 0);
    config_defaults(&c);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), -1);
    assert_contains(err, "TICKD_SERVER_WORKRS: unknown setting (did you mean TICKD_SERVER_WORKERS?)");
    clear_tickd_env();
    /* names tickd's own tools set are not settings, and not errors;
     * nor is any other prefix */
    assert_int_equal(setenv("TICKD_BIN", "/usr/local/bin/tickd", 1), 0);
    assert_int_equal(setenv("TICKD_ARGS", "--store memory", 1), 0);
    assert_int_equal(setenv("TICKD_URL", "http://127.0.0.1:8080", 1), 0);
    assert_int_equal(setenv("TICKD_TOKEN", "tok-9f2c", 1), 0);
    assert_int_equal(setenv("TICKDX_SERVER_LISTEN", "x", 1), 0);
    assert_int_equal(setenv("MY_TICKD_SERVER_LISTEN", "x", 1), 0);
    config_defaults(&c);
    if (config_load_env(&c, err, sizeof(err)) != 0) fail_msg("load_env: %s", err);
    unsetenv("TICKDX_SERVER_LISTEN");
    unsetenv("MY_TICKD_SERVER_LISTEN");
    clear_tickd_env();
}

static void test_validate_tokens(void **state)
{
    (void)state;
    config c;
    char err[256], want[128];
    /* read_tokens is checked as api_token is (with an api_token beside it) */
    const char *keys[] = {"api_token", "read_tokens"};
    const char *good[] = {"tok-9f2c", "a b", "tokA  tokB   tokC", " lead", "trail ",
                          "abc== d_e.f~g+h/", "x="};
    const struct { const char *v, *want; } bad[] = {
        {"tok\tx", "token 1: "},
        {"a b\nc", "token 2: "},
        {"a b c,d", "token 3: "},
        {"a =b", "token 2: "},
        {"a=b", "token 1: "},
        {"ok \xc3\xa9", "token 2: "},
        {" ", "spaces and no token"},
        {"    ", "spaces and no token"},
    };
    for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++) {
        for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
            config_defaults(&c);
            set_ok(&c, "server", "api_token", "adm");
            set_ok(&c, "server", keys[k], good[i]);
            if (config_validate(&c, err, sizeof(err)) != 0)
                fail_msg("%s \"%s\": %s", keys[k], good[i], err);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
            config_defaults(&c);
            set_ok(&c, "server", "api_token", "adm");
            set_ok(&c, "server", keys[k], bad[i].v);
            assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
            snprintf(want, sizeof(want), "server.%s: %s", keys[k], bad[i].want);
            assert_prefix_str(err, want);
        }
    }
    /* unset, the API is open; given empty (by the file, a flag or the
     * environment), it is refused and the config left as it was */
    config_defaults(&c);
    set_ok(&c, "server", "api_token", "tok-1");
    assert_int_equal(config_set(&c, "server", "api_token", "", err, sizeof(err)), -1);
    assert_string_equal(err, "api_token: empty, which would leave the API open (leave the key "
                        "out to run without a token)");
    assert_string_equal(c.api_token, "tok-1");
    setenv("TICKD_SERVER_API_TOKEN", "", 1);
    assert_int_equal(config_load_env(&c, err, sizeof(err)), -1);
    assert_prefix_str(err, "environment TICKD_SERVER_API_TOKEN: api_token: empty, which would "
                      "leave the API open");
    unsetenv("TICKD_SERVER_API_TOKEN");
    set_ok(&c, "server", "read_tokens", "ro-1");
    assert_int_equal(config_set(&c, "server", "read_tokens", "", err, sizeof(err)), -1);
    assert_string_equal(err, "read_tokens: empty, a token lost on the way (leave the key out "
                        "to give none)");
    assert_string_equal(c.read_tokens, "ro-1");
    /* read-only tokens with no full token would leave writes open */
    config_defaults(&c);
    set_ok(&c, "server", "read_tokens", "ro-1");
    assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
    assert_string_equal(err, "server.read_tokens: needs server.api_token (without it the API "
                        "is open to everyone, writes included)");
}

/* ---- config_diff -------------------------------------------------------- */

static void test_diff_names_changed_keys(void **state)
{
    (void)state;
    config a, b;
    char out[256], err[256];
    config_defaults(&a);
    config_defaults(&b);
    assert_int_equal(config_diff(&a, &b, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    /* a string's bytes after its NUL are no change */
    set_ok(&a, "redis", "prefix", "longer-prefix");
    set_ok(&a, "redis", "prefix", "tickd");
    assert_int_equal(config_diff(&a, &b, out, sizeof(out)), 0);
    set_ok(&b, "server", "api_token", "tok");
    set_ok(&b, "scheduler", "batch", "7");
    assert_int_equal(config_diff(&a, &b, out, sizeof(out)), 2);
    assert_string_equal(out, "server.api_token, scheduler.batch");
    assert_int_equal(config_set(&b, "host:h.example", "ca_file", "/x.pem", err, sizeof(err)), 0);
    assert_int_equal(config_diff(&a, &b, out, sizeof(out)), 3);
    assert_string_equal(out, "server.api_token, scheduler.batch, [host:NAME] sections");
    /* cut at outlen, still a string */
    assert_int_equal(config_diff(&a, &b, out, 10), 3);
    assert_string_equal(out, "server.ap");
}

/* ---- config_print_defaults --------------------------------------------- */

static void test_print_defaults_round_trip(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    config_print_defaults(m);
    assert_int_equal(fclose(m), 0);
    assert_non_null(text);
    assert_true(len > 0);

    assert_contains(text, "[server]\n");
    assert_contains(text, "[redis]\n");
    assert_contains(text, "[scheduler]\n");
    assert_contains(text, "\ntick_ms = 1000\n");
    assert_contains(text, ";   range 10..60000\n");
    assert_contains(text, "TICKD_<SECTION>_<KEY>");
    /* a key that may not be given empty is shown unset: the file loads */
    assert_contains(text, "\n; api_token = \n");
    /* every key appears once as "key = " at the start of a line */
    for (size_t i = 0; i < NALL; i++) {
        char pat[64];
        snprintf(pat, sizeof(pat), "\n%s = ", all_keys[i].key);
        const char *p = strstr(text, pat);
        if (!p) fail_msg("key %s missing from the default file", all_keys[i].key);
        if (strstr(p + 1, pat)) fail_msg("key %s twice in the default file", all_keys[i].key);
    }

    /* loading it over a config with every key changed gives the defaults */
    config c, want;
    char err[512];
    config_nondefault(&c);
    int rc = load_text(&c, text, err, sizeof(err));
    if (rc != 0) fail_msg("the default file does not load: %s", err);
    config_defaults(&want);
    assert_config_equal(&c, &want);

    /* and through a real FILE from tmpfile, as `tickd -p > f` would */
    FILE *f = tmpfile();
    assert_non_null(f);
    config_print_defaults(f);
    assert_int_equal(fflush(f), 0);
    rewind(f);
    char *again = calloc(1, len + 2);
    assert_non_null(again);
    assert_int_equal(fread(again, 1, len + 1, f), len);
    assert_string_equal(again, text);
    free(again);
    fclose(f);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_diff_names_changed_keys),
        cmocka_unit_test(test_set_every_key),
        cmocka_unit_test(test_set_int_bounds),
        cmocka_unit_test(test_set_int_malformed),
        cmocka_unit_test(test_set_strings),
        cmocka_unit_test(test_set_unknown),
        cmocka_unit_test(test_load_good_file),
        cmocka_unit_test(test_load_long_values),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_callback_tls_keys),
        cmocka_unit_test(test_host_sections),
        cmocka_unit_test(test_env_unknown),
        cmocka_unit_test(test_validate_tokens),
        cmocka_unit_test(test_print_defaults_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
