/* config.c -- see config.h. To add a key: add a field to `config`, one row to
 * the table below, and run `make config-reference` (conf/tickd.ini and
 * doc/configuration.md are generated from the table). */
#include "base/config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/util.h"

enum { CT_INT, CT_STR, CT_BOOL };

typedef struct config_key {
    const char *section, *name;
    int type;
    const char *def;
    int64_t min, max;    /* CT_INT bounds; CT_STR: max length is the field size, and
                          * min the least length of a value given (the default may
                          * be shorter: it is then printed commented out) */
    size_t off, size;
    const char *doc;
} config_key;

#define F(field) offsetof(config, field), sizeof(((config *)0)->field)
#define DAY_MS (86400LL * 1000)

static const config_key keys[] = {
    {"server", "listen", CT_STR, "127.0.0.1:8080", 0, 0, F(listen),
     "host:port the HTTP API listens on (port 0 picks a free port, logged at start)"},
    {"server", "api_token", CT_STR, "", 1, 0, F(api_token),
     "when set, every /v1/ request needs the header Authorization: Bearer <token> (401 otherwise), token being one of these space-separated tokens (rotation: add the new one, move the clients, remove the old one); /healthz and /metrics stay open; unset, the API is open, and an empty value is refused (keep them out of files: TICKD_SERVER_API_TOKEN)"},
    {"server", "read_tokens", CT_STR, "", 1, 0, F(read_tokens),
     "space-separated tokens that may only read: GET (and HEAD) on every /v1/ route, 403 for any other method; needs server.api_token (a token in both is a full one); an empty value is refused (TICKD_SERVER_READ_TOKENS)"},
    {"server", "max_body", CT_INT, "1048576", 1024, 64LL << 20, F(max_body),
     "largest request body accepted, in bytes; larger gets 413"},
    {"server", "idle_timeout_ms", CT_INT, "60000", 100, 3600000, F(idle_timeout_ms),
     "an API connection with no request in flight is closed after this long without a byte"},
    {"server", "header_timeout_ms", CT_INT, "10000", 100, 600000, F(header_timeout_ms),
     "a request head must arrive whole within this long of its first byte (slow clients lose the connection)"},
    {"server", "body_timeout_ms", CT_INT, "30000", 100, 3600000, F(body_timeout_ms),
     "a request body must arrive whole within this long of its head"},
    {"server", "max_connections", CT_INT, "10000", 1, 1000000, F(max_connections),
     "API connections open at once; beyond this new ones wait in the listen backlog (also bounded by the descriptor reserve: doc/security.md)"},
    {"server", "workers", CT_INT, "0", 0, 256, F(workers),
     "dispatch threads making the callbacks through libcurl (https://, proxies, URLs with credentials), each with its own event loop and curl multi handle; plain http:// callbacks are made on the main event loop by the built-in HTTP/1.1 client; 0 = one per CPU"},
    {"server", "max_inflight", CT_INT, "4096", 1, 1000000, F(max_inflight),
     "claimed tasks waiting for their ms or calling back at once, and as many again whose outcome is being written; claiming pauses at this bound; when it is short for the load, claims look only as far ahead as a quarter of it covers at the rate callbacks fire (or, before any has fired, that a claim pass which ran out of room shows), and half is kept for tasks due soon (doc/performance.md)"},
    {"server", "host_connections", CT_INT, "32", 1, 10000, F(host_connections),
     "connections each dispatch thread keeps to one receiving host (the main loop's built-in client, workers x this); more callbacks to it wait their turn on them (kept alive)"},
    {"server", "keepalive_ms", CT_INT, "60000", 100, 3600000, F(keepalive_ms),
     "a kept connection to a receiving host is closed after this long unused"},
    {"server", "hosts_max", CT_INT, "10000", 1, 10000000, F(hosts_max),
     "receiving hosts whose connection state each dispatch worker keeps; past this the longest unused idle one is dropped (its kept connections closed), with a warning"},
    {"server", "shutdown_grace_ms", CT_INT, "10000", 0, 600000, F(shutdown_grace_ms),
     "on SIGTERM/SIGINT, how long callbacks in flight may finish before exit"},
    {"server", "store", CT_STR, "redis", 0, 0, F(store),
     "redis, or memory: tasks on the in-process wheel only, NOT durable (development and tests)"},
    {"server", "log_level", CT_STR, "info", 0, 0, F(log_level),
     "debug, info, warn or error"},
    {"server", "log_format", CT_STR, "text", 0, 0, F(log_format),
     "text, or json: one object per line with ts, level, src, msg (and task_id on lines about a task)"},
    {"server", "access_log", CT_BOOL, "false", 0, 0, F(access_log),
     "log one line per API request: client address, method, target, status, body bytes, ms"},
    {"redis", "nodes", CT_STR, "127.0.0.1:6379", 0, 0, F(nodes),
     "Redis host:port; several comma-separated seed nodes for a Redis Cluster"},
    {"redis", "username", CT_STR, "", 0, 0, F(username),
     "ACL user to AUTH as; empty = the default user"},
    {"redis", "password", CT_STR, "", 0, 0, F(password),
     "password sent with AUTH on every connection, to every node; empty = no AUTH; a refused password stops tickd at start (exit 2, with the server's reason) (keep it out of files: TICKD_REDIS_PASSWORD)"},
    {"redis", "prefix", CT_STR, "tickd", 0, 0, F(prefix),
     "prefix of every key tickd writes"},
    {"redis", "timeout_ms", CT_INT, "2000", 10, 600000, F(timeout_ms),
     "connect timeout, and how long Redis may stay silent before the connection is dropped (the PING watchdog; also the window in which a command is retried)"},
    {"redis", "scripts_dir", CT_STR, "", 0, 0, F(scripts_dir),
     "directory of the Lua scripts; empty = ../lua or ../share/tickd/lua beside the binary"},
    {"redis", "wait_replicas", CT_INT, "0", 0, 16, F(wait_replicas),
     "after each add, WAIT until this many replicas have it (0 = do not wait)"},
    {"redis", "wait_timeout_ms", CT_INT, "1000", 1, 600000, F(wait_timeout_ms),
     "how long an add waits for wait_replicas before answering 503"},
    {"redis", "allow_eviction", CT_BOOL, "false", 0, 0, F(allow_eviction),
     "accept a Redis whose maxmemory-policy may evict keys (anything but noeviction, with "
     "maxmemory set): evicted tasks are lost without a trace; without it tickd refuses to start "
     "on such a Redis, and refuses adds (503) while one is found at run time"},
    {"redis", "watch_ms", CT_INT, "5000", 100, 600000, F(watch_ms),
     "how often each Redis master's maxmemory-policy, memory use and data marker are read "
     "(a marker gone or changed: that node lost tickd's data)"},
    {"scheduler", "tick_ms", CT_INT, "1000", 10, 60000, F(tick_ms),
     "how often each bucket is scanned for due tasks and due schedules (jittered +-25 %, so that replicas interleave)"},
    {"scheduler", "lookahead_ms", CT_INT, "1500", 10, 60000, F(lookahead_ms),
     "tasks due before now + this are claimed and wait on the in-process wheel (>= 1.25 x tick_ms); "
     "a schedule's runs are made lookahead_ms + 2 x tick_ms ahead of their time, and a run found over "
     "2 s later than that is missed (its catch_up decides)"},
    {"scheduler", "batch", CT_INT, "256", 1, 10000, F(batch),
     "most tasks one claim call takes"},
    {"scheduler", "buckets", CT_INT, "16", 1, 1024, F(buckets),
     "slices per minute; fixed for the life of a keyspace (tickd refuses a mismatch)"},
    {"scheduler", "lease_margin_ms", CT_INT, "5000", 100, 600000, F(lease_margin_ms),
     "a claim's lease is the task's due time + its timeout + this; an expired lease is claimed again"},
    {"scheduler", "retention_ms", CT_INT, "86400000", 1000, 365 * DAY_MS, F(retention_ms),
     "how long finished tasks stay readable"},
    {"scheduler", "failed_retention_ms", CT_INT, "604800000", 1000, 365 * DAY_MS,
     F(failed_retention_ms),
     "failed tasks (the dead letters) stay readable, listable and retryable this long; their "
     "slice's other records stay as long"},
    {"scheduler", "slice_grace_ms", CT_INT, "60000", 2000, 600000, F(slice_grace_ms),
     "a drained minute slice is passed by the scan only this long after it ended; a task whose execute_at is up to half this past its minute still goes to that minute (so re-POSTs stay idempotent)"},
    {"scheduler", "flow_holds_max", CT_INT, "10000", 1, 10000000, F(flow_holds_max),
     "destinations held back by a receiver's Retry-After at once (each replica, and the store); past this the oldest hold is forgotten, with a warning"},
    {"callback", "deny", CT_STR, "0.0.0.0/8 169.254.0.0/16 fe80::/10 ::ffff:0.0.0.0/104 ::ffff:169.254.0.0/112", 0, 0, F(deny),
     "space-separated CIDRs no callback may connect to (checked on the address actually connected to); a hardened profile adds 127.0.0.0/8 ::1/128 10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 fc00::/7 and their ::ffff: forms"},
    {"callback", "allow", CT_STR, "", 0, 0, F(allow),
     "when set, space-separated CIDRs that are the only addresses callbacks may connect to (deny still applies)"},
    {"callback", "signing_secrets", CT_STR, "", 0, 0, F(signing_secrets),
     "space-separated Standard Webhooks secrets (whsec_<base64>); each signs every callback (rotation: add the new one, deploy, remove the old); tickd --gen-secret prints one (keep them out of files: TICKD_CALLBACK_SIGNING_SECRETS)"},
    {"callback", "ca_file", CT_STR, "", 0, 0, F(ca_file),
     "PEM file of CA certificates trusted for https:// callbacks (a private PKI), besides the system's unless ca_system = false"},
    {"callback", "ca_path", CT_STR, "", 0, 0, F(ca_path),
     "directory of CA certificates named by subject hash (openssl rehash DIR), trusted as ca_file is"},
    {"callback", "ca_system", CT_BOOL, "true", 0, 0, F(ca_system),
     "trust the system's CA store too; false: only ca_file and ca_path (one of them is then needed)"},
    {"callback", "client_cert", CT_STR, "", 0, 0, F(client_cert),
     "PEM client certificate (then its chain) presented to every https:// receiver (mTLS)"},
    {"callback", "client_key", CT_STR, "", 0, 0, F(client_key),
     "PEM private key of client_cert; empty = in client_cert's file"},
    {"callback", "client_key_password", CT_STR, "", 0, 0, F(client_key_password),
     "passphrase of an encrypted client_key (keep it out of files: TICKD_CALLBACK_CLIENT_KEY_PASSWORD)"},
    {"callback", "tls_min_version", CT_STR, "1.2", 0, 0, F(tls_min_version),
     "lowest TLS version of https:// callbacks: 1.2 or 1.3 (certificates are always verified)"},
    {"callback", "proxy", CT_STR, "", 0, 0, F(proxy),
     "proxy for every callback, http:// and https:// alike: http://, https://, socks5:// or socks5h://host:port (the destination policy then applies to the proxy's address)"},
    {"callback", "no_proxy", CT_STR, "", 0, 0, F(no_proxy),
     "comma-separated hosts, domains (.example.com) or CIDRs called without the proxy; * = none through it"},
    {"callback", "on_failure_url", CT_STR, "", 0, 0, F(on_failure_url),
     "http:// or https:// URL POSTed once (tickd-event: task.failed) for every task that fails for good and names no on_failure of its own"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

#define HF(field) offsetof(config_host, field), sizeof(((config_host *)0)->field)

/* The keys of a [host:NAME] section. Not in the environment: a host name
 * does not fit a variable's name. */
static const config_key host_keys[] = {
    {"host", "ca_file", CT_STR, "", 0, 0, HF(ca_file), ""},
    {"host", "ca_path", CT_STR, "", 0, 0, HF(ca_path), ""},
    {"host", "ca_system", CT_BOOL, "true", 0, 0, HF(ca_system), ""},
    {"host", "client_cert", CT_STR, "", 0, 0, HF(client_cert), ""},
    {"host", "client_key", CT_STR, "", 0, 0, HF(client_key), ""},
    {"host", "client_key_password_env", CT_STR, "", 0, 0, HF(client_key_password_env), ""},
    {"host", "tls_min_version", CT_STR, "1.2", 0, 0, HF(tls_min_version), ""},
    {"host", "insecure_skip_verify", CT_BOOL, "false", 0, 0, HF(insecure_skip_verify), ""},
};
#define NHOSTKEYS (sizeof(host_keys) / sizeof(host_keys[0]))
#define HOST_SECTION "host:"

int config_host_key(const char *name)
{
    for (size_t i = 0; i < NHOSTKEYS; i++)
        if (strcmp(host_keys[i].name, name) == 0) return (int)i;
    return -1;
}

/* TICKD_ variables that are not settings but that tickd's own tools read:
 * the test harness names the binary under test in TICKD_BIN, make run
 * (scripts/run.sh) passes TICKD_ARGS as extra flags, and tickctl, the
 * command-line client, finds the API in TICKD_URL and its token in
 * TICKD_TOKEN; all stay in the environment tickd starts with (a shell that
 * exports them for tickctl still runs tickd). */
static const char *env_not_settings[] = {"TICKD_BIN", "TICKD_ARGS", "TICKD_URL", "TICKD_TOKEN"};

/* Levenshtein distance of a and b, ignoring case; each cut at 127 bytes.
 * Names whose lengths differ by more than `limit` are that far at least:
 * limit + 1 is returned without the quadratic walk. */
static size_t config_distance(const char *a, const char *b, size_t limit)
{
    size_t n = strnlen(a, 127), m = strnlen(b, 127), row[128];
    if ((n > m ? n - m : m - n) > limit) return limit + 1;
    for (size_t j = 0; j <= m; j++) row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[m];
}

static void config_env_name(const config_key *k, char *out, size_t outlen)
{
    snprintf(out, outlen, "TICKD_%s_%s", k->section, k->name);
    for (char *p = out; *p; p++) *p = (char)toupper((unsigned char)*p);
}

/* The known key a misspelt one most likely meant, into out as the user
 * would write it ("section.key", or the variable with env): the fewest edits
 * of the whole name, or of the key name alone plus one for a wrong or
 * missing section. 0, or -1 when nothing is within a quarter of the name
 * (at least 2 edits): no suggestion beats a wrong one. */
static int config_nearest(const char *section, const char *name, int env, char *out,
                          size_t outlen)
{
    size_t best = (size_t)-1, len = strlen(name), limit = len / 4 > 2 ? len / 4 : 2;
    char full[300];
    if (env) snprintf(full, sizeof(full), "%s", name);
    else snprintf(full, sizeof(full), "%s.%s", section, name);
    const char *bare = env ? name + 6 : name;  /* env: after TICKD_ */
    for (size_t i = 0; i < NKEYS; i++) {
        char cand[128];
        if (env) config_env_name(&keys[i], cand, sizeof(cand));
        else snprintf(cand, sizeof(cand), "%s.%s", keys[i].section, keys[i].name);
        size_t d = config_distance(full, cand, limit + 1);
        size_t dk = config_distance(bare, keys[i].name, limit + 1) + 1;
        if (!env && strcmp(section, keys[i].section) == 0) dk--;
        if (dk < d) d = dk;
        if (d < best) {
            best = d;
            util_copy(out, outlen, cand);
        }
    }
    return best <= limit ? 0 : -1;
}

static const config_key *config_find(const char *section, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* Set the field of k in base (a config, or a config_host for host_keys);
 * given: the value came from a file, a variable or a flag, not the defaults. */
static int config_apply(void *base, const config_key *k, const char *value, int given,
                        char *err, size_t errlen)
{
    char *field = (char *)base + k->off;

    if (k->type == CT_STR) {
        if (strlen(value) >= k->size) {
            snprintf(err, errlen, "%s: longer than %zu bytes", k->name, k->size - 1);
            return -1;
        }
        /* api_token, read_tokens: an empty value given (an empty line of
         * the file a variable was filled from, TICKD_SERVER_API_TOKEN= left
         * blank) is a token lost on the way, not a wish for an open API */
        if (given && strlen(value) < (size_t)k->min) {
            if (strcmp(k->name, "api_token") == 0)
                snprintf(err, errlen, "%s: empty, which would leave the API open (leave the "
                         "key out to run without a token)", k->name);
            else
                snprintf(err, errlen, "%s: empty, a token lost on the way (leave the key out "
                         "to give none)", k->name);
            return -1;
        }
        if (strcmp(k->name, "store") == 0 && strcmp(value, "redis") != 0 &&
            strcmp(value, "memory") != 0) {
            snprintf(err, errlen, "store: must be redis or memory, not \"%s\"", value);
            return -1;
        }
        if (strcmp(k->name, "log_level") == 0 && log_level_parse(value) < 0) {
            snprintf(err, errlen, "log_level: must be debug, info, warn or error");
            return -1;
        }
        if (strcmp(k->name, "log_format") == 0 && strcmp(value, "text") != 0 &&
            strcmp(value, "json") != 0) {
            snprintf(err, errlen, "log_format: must be text or json, not \"%s\"", value);
            return -1;
        }
        if (strcmp(k->name, "tls_min_version") == 0 && strcmp(value, "1.2") != 0 &&
            strcmp(value, "1.3") != 0) {
            snprintf(err, errlen, "tls_min_version: must be 1.2 or 1.3, not \"%s\"", value);
            return -1;
        }
        if (strcmp(k->name, "prefix") == 0) {
            for (const char *p = value; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("_-.:", *p)) {
                    snprintf(err, errlen, "prefix: only letters, digits and _-.: allowed");
                    return -1;
                }
        }
        memcpy(field, value, strlen(value) + 1);
        return 0;
    }
    if (k->type == CT_BOOL) {
        static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
        for (size_t i = 0; i < 4; i++)
            if (strcasecmp(value, yes[i]) == 0 || strcasecmp(value, no[i]) == 0) {
                memcpy(field, &(int64_t){strcasecmp(value, yes[i]) == 0}, sizeof(int64_t));
                return 0;
            }
        snprintf(err, errlen, "%s: must be true or false, not \"%s\"", k->name, value);
        return -1;
    }
    errno = 0;
    char *end;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end != '\0') {
        snprintf(err, errlen, "%s: not an integer: \"%s\"", k->name, value);
        return -1;
    }
    if (v < k->min || v > k->max) {
        snprintf(err, errlen, "%s: %lld is out of range %lld..%lld", k->name, v,
                 (long long)k->min, (long long)k->max);
        return -1;
    }
    memcpy(field, &(int64_t){v}, sizeof(int64_t));
    return 0;
}

void config_defaults(config *c)
{
    char err[256];
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < NKEYS; i++)
        if (config_apply(c, &keys[i], keys[i].def, 0, err, sizeof(err)) != 0)
            log_panic("default of %s.%s: %s", keys[i].section, keys[i].name, err);
}

/* A key of a [host:NAME] section: into a copy of the host's entry, kept
 * only when it is good (a refused key leaves c unchanged). */
static int config_set_host(config *c, const char *name, const char *key, const char *value,
                           char *err, size_t errlen)
{
    int ki = config_host_key(key), h = 0;
    if (ki < 0) {
        size_t best = (size_t)-1, bi = 0;
        for (size_t i = 0; i < NHOSTKEYS; i++) {
            size_t d = config_distance(key, host_keys[i].name, 3);
            if (d < best) best = d, bi = i;
        }
        if (best <= 2)
            snprintf(err, errlen, "%s: unknown key in section [" HOST_SECTION "%s] (did you mean %s?)",
                     key, name, host_keys[bi].name);
        else
            snprintf(err, errlen, "%s: unknown key in section [" HOST_SECTION "%s] (keys: ca_file, "
                     "ca_path, ca_system, client_cert, client_key, client_key_password_env, "
                     "tls_min_version, insecure_skip_verify)", key, name);
        return -1;
    }
    if (!*name || strlen(name) >= sizeof(c->hosts[0].name) || strpbrk(name, " \t/@[]")) {
        snprintf(err, errlen, "[" HOST_SECTION "%s]: not a host name", name);
        return -1;
    }
    while (h < c->nhosts && strcasecmp(c->hosts[h].name, name) != 0) h++;
    if (h == CONFIG_HOSTS_MAX) {
        snprintf(err, errlen, "[" HOST_SECTION "%s]: more than %d host sections", name,
                 CONFIG_HOSTS_MAX);
        return -1;
    }
    config_host tmp;
    if (h < c->nhosts) {
        tmp = c->hosts[h];
    } else {
        memset(&tmp, 0, sizeof(tmp));
        util_copy(tmp.name, sizeof(tmp.name), name);
    }
    if (config_apply(&tmp, &host_keys[ki], value, 1, err, errlen) != 0) return -1;
    tmp.set |= 1u << ki;
    c->hosts[h] = tmp;
    if (h == c->nhosts) c->nhosts++;
    return 0;
}

int config_set(config *c, const char *section, const char *key,
               const char *value, char *err, size_t errlen)
{
    if (strncmp(section, HOST_SECTION, strlen(HOST_SECTION)) == 0)
        return config_set_host(c, section + strlen(HOST_SECTION), key, value, err, errlen);
    const config_key *k = config_find(section, key);
    if (!k) {
        char near[128];
        if (config_nearest(section, key, 0, near, sizeof(near)) == 0)
            snprintf(err, errlen, "%s: unknown key in section [%s] (did you mean %s?)", key,
                     section, near);
        else
            snprintf(err, errlen, "%s: unknown key in section [%s]", key, section);
        return -1;
    }
    return config_apply(c, k, value, 1, err, errlen);
}

typedef struct load_ctx {
    config *c;
    const char *path;
    char *err;
    size_t errlen;
    int failed;
    char why[200];
} load_ctx;

/* inih reports the line of the first handler that returns 0 as ini_parse's
 * result; the reason is kept here until then. */
static int config_ini_handler(void *user, const char *section, const char *name,
                              const char *value)
{
    load_ctx *lc = user;
    if (lc->failed) return 1;
    if (config_set(lc->c, section, name, value, lc->why, sizeof(lc->why)) != 0) {
        lc->failed = 1;
        return 0;
    }
    return 1;
}

/* inih (as Debian builds it) splits lines over 199 bytes, joins an indented
 * line to the value above, goes on after a syntax error, and says nothing of
 * an empty unknown section. None of that is what a config file means, so the
 * file is checked line by line first and inih only sees files it reads right. */
#define CONFIG_MAX_LINE 199

static int config_section_known(const char *name, size_t len)
{
    if (len > strlen(HOST_SECTION) && strncmp(name, HOST_SECTION, strlen(HOST_SECTION)) == 0)
        return 1;
    for (size_t i = 0; i < NKEYS; i++)
        if (strlen(keys[i].section) == len && strncmp(keys[i].section, name, len) == 0) return 1;
    return 0;
}

static int config_precheck(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0, rc = 0;
    struct stat sb;

    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: %s", path, f ? "not a regular file" : strerror(errno));
        if (f) fclose(f);
        return -1;
    }
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == ';' || *p == '#') continue;
        if (n > CONFIG_MAX_LINE) {
            snprintf(err, errlen, "%s:%d: line longer than %d bytes (use the environment "
                     "variable for longer values)", path, lineno, CONFIG_MAX_LINE);
            rc = -1;
            break;
        }
        if (p != line) {
            snprintf(err, errlen, "%s:%d: indented line (write each key at the line start)",
                     path, lineno);
            rc = -1;
            break;
        }
        if (*p == '[') {
            const char *e = strchr(p, ']');
            if (!e) {
                snprintf(err, errlen, "%s:%d: syntax error", path, lineno);
                rc = -1;
                break;
            }
            /* inih keeps 50 bytes of a section's name, silently */
            if (e - p - 1 > 50) {
                snprintf(err, errlen, "%s:%d: section name longer than 50 bytes", path, lineno);
                rc = -1;
                break;
            }
            if (!config_section_known(p + 1, (size_t)(e - p - 1))) {
                char name[128];
                const char *near = keys[0].section;
                size_t best = (size_t)-1;
                snprintf(name, sizeof(name), "%.*s", (int)(e - p - 1), p + 1);
                size_t limit = strlen(name) / 4 > 2 ? strlen(name) / 4 : 2;
                for (size_t i = 0; i < NKEYS; i++) {
                    size_t d = config_distance(name, keys[i].section, limit);
                    if (d < best) {
                        best = d;
                        near = keys[i].section;
                    }
                }
                if (best <= limit)
                    snprintf(err, errlen, "%s:%d: [%s]: unknown section (did you mean [%s]?)",
                             path, lineno, name, near);
                else
                    snprintf(err, errlen, "%s:%d: [%s]: unknown section", path, lineno, name);
                rc = -1;
                break;
            }
        } else if (!strchr(p, '=') && !strchr(p, ':')) {
            snprintf(err, errlen, "%s:%d: syntax error (want key = value)", path, lineno);
            rc = -1;
            break;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

int config_load_file(config *c, const char *path, char *err, size_t errlen)
{
    if (config_precheck(path, err, errlen) != 0) return -1;
    load_ctx lc = {c, path, err, errlen, 0, ""};
    int rc = ini_parse(path, config_ini_handler, &lc);
    if (lc.failed) {
        snprintf(err, errlen, "%s:%d: %s", path, rc, lc.why);
        return -1;
    }
    if (rc == -1) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s:%d: syntax error", path, rc);
        return -1;
    }
    return 0;
}

extern char **environ;

/* A TICKD_ variable that is no setting is a typo until shown otherwise: left
 * unread, TICKD_SERVER_API_TOKN would leave the API open. */
static int config_env_unknown(char *err, size_t errlen)
{
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e), i;
        char name[128], near[128];
        if (strncmp(*e, "TICKD_", 6) != 0) continue;
        snprintf(name, sizeof(name), "%.*s", (int)(n < 127 ? n : 127), *e);
        for (i = 0; i < NKEYS; i++) {
            config_env_name(&keys[i], near, sizeof(near));
            if (n == strlen(near) && strncmp(*e, near, n) == 0) break;
        }
        if (i < NKEYS) continue;
        for (i = 0; i < sizeof(env_not_settings) / sizeof(*env_not_settings); i++)
            if (n == strlen(env_not_settings[i]) && strncmp(*e, env_not_settings[i], n) == 0)
                break;
        if (i < sizeof(env_not_settings) / sizeof(*env_not_settings)) continue;
        if (config_nearest(NULL, name, 1, near, sizeof(near)) == 0)
            snprintf(err, errlen, "environment %s: unknown setting (did you mean %s?)", name, near);
        else
            snprintf(err, errlen, "environment %s: unknown setting (settings are "
                     "TICKD_<SECTION>_<KEY>; tickd --print-config lists them)", name);
        return -1;
    }
    return 0;
}

int config_load_env(config *c, char *err, size_t errlen)
{
    if (config_env_unknown(err, errlen) != 0) return -1;
    for (size_t i = 0; i < NKEYS; i++) {
        char var[128], why[200];
        config_env_name(&keys[i], var, sizeof(var));
        const char *v = getenv(var);
        if (!v) continue;
        if (config_apply(c, &keys[i], v, 1, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "environment %s: %s", var, why);
            return -1;
        }
    }
    return 0;
}

/* The [callback] keys that go together. Files are read (and their errors
 * named) when the callback client starts (cbtls.c). */
static int config_validate_callback(const config *c, char *err, size_t errlen)
{
    static const char *schemes[] = {"http://", "https://", "socks5://", "socks5h://"};
    if (!c->ca_system && !c->ca_file[0] && !c->ca_path[0]) {
        snprintf(err, errlen, "callback.ca_system: false needs callback.ca_file or "
                 "callback.ca_path (nothing would be trusted)");
        return -1;
    }
    if ((c->client_key[0] || c->client_key_password[0]) && !c->client_cert[0]) {
        snprintf(err, errlen, "callback.%s: needs callback.client_cert",
                 c->client_key[0] ? "client_key" : "client_key_password");
        return -1;
    }
    if (c->proxy[0]) {
        size_t i = 0;
        while (i < 4 && strncasecmp(c->proxy, schemes[i], strlen(schemes[i])) != 0) i++;
        if (i == 4 || !c->proxy[strlen(schemes[i])] || strpbrk(c->proxy, " \t")) {
            snprintf(err, errlen, "callback.proxy: must be http://, https://, socks5:// or "
                     "socks5h://host:port");
            return -1;
        }
    }
    return 0;
}

/* A list of tokens (server.api_token, server.read_tokens): each token as a
 * header carries it (RFC 6750 token68), no control byte that a header would
 * lose or a copy-paste would add; tokens are separated by spaces, and a
 * value of spaces alone would look like a token while being none. */
static int config_check_tokens(const char *key, const char *v, const char *hint, char *err,
                               size_t errlen)
{
    const char *t = v;
    int ntok = 0;
    while (*t) {
        size_t sp = strspn(t, " ");
        t += sp;
        if (!*t) break;
        size_t tl = strcspn(t, " "), tok = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                "abcdefghijklmnopqrstuvwxyz0123456789-._~+/");
        if (tok == 0 || tok > tl || strspn(t + tok, "=") != tl - tok) {
            snprintf(err, errlen, "%s: token %d: only letters, digits and -._~+/ (then any "
                     "'='), tokens separated by spaces, no tabs or line ends", key, ntok + 1);
            return -1;
        }
        ntok++;
        t += tl;
    }
    if (v[0] && ntok == 0) {
        snprintf(err, errlen, "%s: spaces and no token (%s)", key, hint);
        return -1;
    }
    return 0;
}

int config_validate(const config *c, char *err, size_t errlen)
{
    /* ticks come every tick_ms +-25 %: the lookahead covers the longest gap */
    if (c->lookahead_ms < c->tick_ms * 5 / 4) {
        snprintf(err, errlen, "scheduler.lookahead_ms: must be >= 1.25 x tick_ms (%lld)",
                 (long long)(c->tick_ms * 5 / 4));
        return -1;
    }
    const char *colon = strrchr(c->listen, ':');
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || colon == c->listen || colon[1] == '\0' || *end || port < 0 || port > 65535) {
        snprintf(err, errlen, "server.listen: \"%s\" is not host:port (port 0..65535)", c->listen);
        return -1;
    }
    if (c->nodes[0] == '\0') {
        snprintf(err, errlen, "redis.nodes: empty");
        return -1;
    }
    if (config_check_tokens("server.api_token", c->api_token, "leave it empty for an open API",
                            err, errlen) != 0 ||
        config_check_tokens("server.read_tokens", c->read_tokens, "leave it out to give none",
                            err, errlen) != 0)
        return -1;
    /* read-only tokens on an API with no full token would guard nothing:
     * everyone could still write */
    if (c->read_tokens[0] && !c->api_token[0]) {
        snprintf(err, errlen, "server.read_tokens: needs server.api_token (without it the API "
                 "is open to everyone, writes included)");
        return -1;
    }
    if (c->username[0] && !c->password[0]) {
        snprintf(err, errlen, "redis.username: needs redis.password");
        return -1;
    }
    return config_validate_callback(c, err, errlen);
}

/* Whether field k differs between a and b (a config, or a config_host):
 * strings up to their NUL, what follows it may differ. */
static int config_field_differs(const void *a, const void *b, const config_key *k)
{
    const char *fa = (const char *)a + k->off, *fb = (const char *)b + k->off;
    return k->type == CT_STR ? strcmp(fa, fb) != 0 : memcmp(fa, fb, k->size) != 0;
}

int config_diff(const config *a, const config *b, char *out, size_t outlen)
{
    int n = 0, hosts = a->nhosts != b->nhosts;
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++) {
        if (!config_field_differs(a, b, &keys[i])) continue;
        if (len < outlen)
            len += (size_t)snprintf(out + len, outlen - len, "%s%s.%s", n ? ", " : "",
                                    keys[i].section, keys[i].name);
        n++;
    }
    for (int h = 0; h < a->nhosts && !hosts; h++) {
        hosts = strcmp(a->hosts[h].name, b->hosts[h].name) != 0 ||
                a->hosts[h].set != b->hosts[h].set;
        for (size_t i = 0; i < NHOSTKEYS && !hosts; i++)
            hosts = config_field_differs(&a->hosts[h], &b->hosts[h], &host_keys[i]);
    }
    if (hosts && len < outlen)
        snprintf(out + len, outlen - len, "%s[" HOST_SECTION "NAME] sections", n ? ", " : "");
    return n + hosts;
}

void config_print_defaults(FILE *out)
{
    const char *section = "";
    fprintf(out, "; tickd configuration. Every key is shown with its default.\n"
                 "; Each key can be overridden by the environment variable\n"
                 "; TICKD_<SECTION>_<KEY>, e.g. TICKD_REDIS_NODES=10.0.0.5:6379.\n");
    for (size_t i = 0; i < NKEYS; i++) {
        if (strcmp(section, keys[i].section) != 0) {
            section = keys[i].section;
            fprintf(out, "\n[%s]\n", section);
        }
        /* wrapped at spaces: the reader takes lines of at most CONFIG_MAX_LINE */
        for (const char *d = keys[i].doc; *d;) {
            size_t n = strlen(d);
            if (n > 96) {
                n = 96;
                while (n > 40 && d[n] != ' ') n--;
            }
            fprintf(out, "; %.*s\n", (int)n, d);
            d += n;
            d += strspn(d, " ");
        }
        if (keys[i].type == CT_INT)
            fprintf(out, ";   range %lld..%lld\n", (long long)keys[i].min, (long long)keys[i].max);
        /* a default that may not be given (an empty api_token) stays unset */
        int unset = keys[i].type == CT_STR && strlen(keys[i].def) < (size_t)keys[i].min;
        fprintf(out, "%s%s = %s\n", unset ? "; " : "", keys[i].name, keys[i].def);
    }
    fprintf(out, "\n; Per receiving host (as named in callback URLs), a [host:NAME] section overrides\n"
                 "; these [callback] keys for https:// callbacks to it: ca_file, ca_path, ca_system,\n"
                 "; client_cert, client_key, tls_min_version; client_key_password_env names the\n"
                 "; environment variable holding its key's passphrase; insecure_skip_verify = true\n"
                 "; turns certificate checks off for that host alone (logged at start). At most %d.\n"
                 ";\n"
                 "; [host:billing.internal]\n"
                 "; client_cert = /etc/tickd/billing-client.pem\n"
                 "; client_key = /etc/tickd/billing-client.key\n"
                 "; client_key_password_env = BILLING_KEY_PASSWORD\n",
            CONFIG_HOSTS_MAX);
}

/* Markdown text of a doc string: what a renderer would take for HTML or
 * emphasis (<token>, "* = none") is escaped. */
static void config_md_text(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", out);
        else if (*s == '>') fputs("&gt;", out);
        else if (*s == '*' || *s == '|' || *s == '\\') fprintf(out, "\\%c", *s);
        else fputc(*s, out);
    }
}

void config_print_reference(FILE *out)
{
    const char *section = "";
    char env[128];
    fprintf(out,
        "# Configuration reference\n"
        "\n"
        "<!-- Generated from the config table in src/base/config.c by `make config-reference`\n"
        "     (as conf/tickd.ini is); edit the table, not this file. -->\n"
        "\n"
        "Back to the [README](../README.md); running tickd is in [operations.md](operations.md).\n"
        "\n"
        "tickd reads an ini file given by `-c FILE` (an installed tickd, `make install` or the\n"
        "Debian package, reads `/etc/tickd/tickd.ini` when no `-c` is given and the file\n"
        "exists; a tickd built in the tree reads none). `tickd --print-config` prints the\n"
        "commented default file, which is [conf/tickd.ini](../conf/tickd.ini).\n"
        "\n"
        "Every key below can also be set by its environment variable,\n"
        "`TICKD_<SECTION>_<KEY>`, which wins over the file; the flags `--listen`, `--redis`\n"
        "and `--store` win over both (defaults < file < environment < flags). An unknown\n"
        "section, key or `TICKD_` variable, or a bad value, stops tickd at start with exit\n"
        "code 2 and `FILE:LINE: key: reason`, naming the nearest key; a line is at most\n"
        "199 bytes (longer values go in the environment).\n"
        "\n"
        "On SIGHUP (`systemctl reload tickd`) tickd reads the configuration again as at\n"
        "start (the file, the environment it started with, the flags): `server.api_token`,\n"
        "`server.read_tokens`, `server.log_level` and `server.access_log` take effect at\n"
        "once; any other key that changed is named in the log and waits for a restart. A\n"
        "configuration that does not load, or that drops `server.api_token` when tickd\n"
        "started with one, changes nothing.\n");
    for (size_t i = 0; i < NKEYS; i++) {
        const config_key *k = &keys[i];
        if (strcmp(section, k->section) != 0) {
            section = k->section;
            fprintf(out, "\n## [%s]\n", section);
        }
        config_env_name(k, env, sizeof(env));
        fprintf(out, "\n### `%s.%s`\n\n", k->section, k->name);
        if (k->type == CT_INT)
            fprintf(out, "integer, %lld..%lld", (long long)k->min, (long long)k->max);
        else if (k->type == CT_BOOL)
            fprintf(out, "boolean (true, yes, on, 1 or false, no, off, 0)");
        else if (k->min > 0)
            fprintf(out, "string, %lld..%zu bytes", (long long)k->min, k->size - 1);
        else
            fprintf(out, "string, at most %zu bytes", k->size - 1);
        if (k->type == CT_STR && strlen(k->def) < (size_t)k->min)
            fprintf(out, "; unset by default");
        else if (!k->def[0])
            fprintf(out, "; default empty");
        else
            fprintf(out, "; default `%s`", k->def);
        fprintf(out, "; environment `%s`\n\n", env);
        config_md_text(out, k->doc);
        fprintf(out, "\n");
    }
    fprintf(out,
        "\n## [host:NAME]\n"
        "\n"
        "A section per receiving host, NAME as in its callback URLs (at most %d sections,\n"
        "names up to 45 bytes; not settable from the environment, a host name does not fit\n"
        "a variable's name). For `https://` callbacks to that host, a key with a `[callback]`\n"
        "namesake overrides it:\n"
        "\n"
        "| key | type | default |\n"
        "| --- | --- | --- |\n", CONFIG_HOSTS_MAX);
    for (size_t i = 0; i < NHOSTKEYS; i++) {
        const config_key *k = &host_keys[i];
        fprintf(out, "| `%s` | %s | %s%s%s |\n", k->name,
                k->type == CT_BOOL ? "boolean" : "string",
                k->def[0] ? "`" : "", k->def[0] ? k->def : "empty", k->def[0] ? "`" : "");
    }
    fprintf(out,
        "\n"
        "`client_key_password_env` names the environment variable holding the passphrase of\n"
        "that host's `client_key`; `insecure_skip_verify = true` turns certificate checks off\n"
        "for that host alone (logged at start).\n"
        "\n"
        "```ini\n"
        "[host:billing.internal]\n"
        "client_cert = /etc/tickd/billing-client.pem\n"
        "client_key = /etc/tickd/billing-client.key\n"
        "client_key_password_env = BILLING_KEY_PASSWORD\n"
        "```\n");
}
