/* tickctl -- the command-line client of tickd's HTTP API, and a local
 * receiver to watch callbacks arrive (tickctl listen).
 *
 * main reads the command line (one static table of options, each command
 * naming the ones it takes), builds the request, and hands it to client.c;
 * show.c prints the answer for people, --json prints the API's own JSON
 * for scripts. The exit code says what went wrong (client.h). */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "client.h"
#include "listen.h"
#include "show.h"
#include "model/task.h"
#include "base/util.h"
#include "delivery/webhook.h"

#define TICKCTL_VERSION "1.0.0"
#define CTL_URL_DEFAULT "http://127.0.0.1:8080"
#define CTL_BODY_MAX (64u << 20)   /* bytes read for --body; tickd refuses past max_body */
#define CTL_HEADERS_MAX 64
#define CTL_ARGS_MAX 4
#define CTL_CURSOR_MAX 1024        /* a listing's cursor (tickd's are ~300 bytes) */
#define CTL_CURSOR_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:~+-/="
#define CTL_ALL_PAGES 10000        /* pages one --all follows */
#define CTL_ALL_BYTES CTL_ANSWER_MAX /* answers ls --all holds to print */

/* ---- options ------------------------------------------------------------ */

enum {
    O_HELP, O_URL, O_TOKEN, O_JSON, O_IN, O_AT, O_METHOD, O_HEADER, O_BODY, O_KEY,
    O_MAX_ATTEMPTS, O_BACKOFF, O_TIMEOUT, O_STATUS, O_LIMIT, O_CURSOR, O_ALL, O_KEY_PREFIX,
    O_PORT, O_BIND, O_SECRET, O_COUNT, O_VERSION, O_QUEUE, O_TTL, O_TRACEPARENT, NOPTS
};

static const struct {
    const char *name;
    int arg;                /* takes a value */
} opts[NOPTS] = {
    [O_HELP] = {"help", 0}, [O_URL] = {"url", 1}, [O_TOKEN] = {"token", 1},
    [O_JSON] = {"json", 0}, [O_IN] = {"in", 1}, [O_AT] = {"at", 1},
    [O_METHOD] = {"method", 1}, [O_HEADER] = {"header", 1}, [O_BODY] = {"body", 1},
    [O_KEY] = {"key", 1}, [O_MAX_ATTEMPTS] = {"max-attempts", 1}, [O_BACKOFF] = {"backoff", 1},
    [O_TIMEOUT] = {"timeout", 1}, [O_STATUS] = {"status", 1}, [O_LIMIT] = {"limit", 1},
    [O_CURSOR] = {"cursor", 1}, [O_ALL] = {"all", 0}, [O_KEY_PREFIX] = {"key-prefix", 1},
    [O_PORT] = {"port", 1}, [O_BIND] = {"bind", 1}, [O_SECRET] = {"secret", 1},
    [O_COUNT] = {"count", 1}, [O_VERSION] = {"version", 0}, [O_QUEUE] = {"queue", 1},
    [O_TTL] = {"ttl", 1}, [O_TRACEPARENT] = {"traceparent", 1},
};

#define BIT(o) (1u << (o))
#define COMMON (BIT(O_HELP) | BIT(O_URL) | BIT(O_TOKEN) | BIT(O_JSON))

typedef struct cmd cmd;

typedef struct ctl {
    const cmd *cmd;
    ctl_api api;
    const char *val[NOPTS];          /* each option's value (the last given) */
    int given[NOPTS];
    const char *headers[CTL_HEADERS_MAX];
    int nheaders;
    const char *args[CTL_ARGS_MAX];  /* the command's operands */
    int nargs;
} ctl;

struct cmd {
    const char *name;
    int (*run)(ctl *c);
    unsigned opts;                   /* the options it takes, besides COMMON */
    int min_args, max_args;
    const char *help;
};

static const cmd *cmd_find(const char *name);

/* A usage error: said with the way to the help, exit code 2. */
static int usage_error(const ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const ctl *c, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tickctl: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (c && c->cmd) fprintf(stderr, " (tickctl %s --help)\n", c->cmd->name);
    else fprintf(stderr, " (tickctl --help)\n");
    return CTL_USAGE;
}

/* Read argv[*i..] into c: options the mask allows, operands into c->args.
 * With stop set, stops at the first operand (the command). 0 or CTL_USAGE. */
static int parse_args(ctl *c, int argc, char **argv, int *i, unsigned allowed, int stop)
{
    int only_operands = 0;
    for (; *i < argc; (*i)++) {
        const char *a = argv[*i];
        if (only_operands || a[0] != '-' || a[1] == '\0') {
            if (stop) return 0;
            if (c->nargs == CTL_ARGS_MAX) return usage_error(c, "too many operands");
            c->args[c->nargs++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_operands = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0) a = "--help";
        if (a[1] != '-') return usage_error(c, "unknown option %s", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        int o;
        for (o = 0; o < NOPTS; o++)
            if (strlen(opts[o].name) == n && strncmp(opts[o].name, name, n) == 0) break;
        if (o < NOPTS && !(allowed & BIT(o)) && c->cmd)
            return usage_error(c, "%s takes no --%s", c->cmd->name, opts[o].name);
        if (o == NOPTS || !(allowed & BIT(o)))
            return usage_error(c, "unknown option --%.*s", (int)(n > 60 ? 60 : n), name);
        const char *v = NULL;
        if (opts[o].arg) {
            if (eq) v = eq + 1;
            else if (*i + 1 < argc) v = argv[++(*i)];
            else return usage_error(c, "--%s needs a value", opts[o].name);
        } else if (eq) {
            return usage_error(c, "--%s takes no value", opts[o].name);
        }
        if (o == O_HEADER) {
            if (c->nheaders == CTL_HEADERS_MAX)
                return usage_error(c, "more than %d --header", CTL_HEADERS_MAX);
            c->headers[c->nheaders++] = v;
        }
        c->val[o] = v;
        c->given[o] = 1;
    }
    return 0;
}

/* ---- values of the options ------------------------------------------------ */

/* "1h30m", "5m", "1500ms", "2d": a sum of integers each with its unit
 * (ms, s, m, h, d), into ms. 0, or -1 with the reason in why. */
static int parse_duration(const char *s, int64_t *ms, char *why, size_t whylen)
{
    static const struct { const char *unit; int64_t ms; } units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    int64_t total = 0;
    const char *p = s;
    if (!*p) {
        snprintf(why, whylen, "empty (want a number and a unit: 500ms, 5s, 5m, 2h, 1d, 1h30m)");
        return -1;
    }
    while (*p) {
        size_t nd = strspn(p, "0123456789"), nu = strspn(p + nd, "abcdefghijklmnopqrstuvwxyz");
        size_t u;
        if (nd == 0 || nd > 12) goto bad;
        for (u = 0; u < sizeof(units) / sizeof(*units); u++)
            if (strlen(units[u].unit) == nu && strncmp(p + nd, units[u].unit, nu) == 0) break;
        if (u == sizeof(units) / sizeof(*units)) goto bad;
        total += strtoll(p, NULL, 10) * units[u].ms;
        if (total > TASK_MAX_AHEAD_MS) {
            snprintf(why, whylen, "%.40s is more than ten years", s);
            return -1;
        }
        p += nd + nu;
    }
    *ms = total;
    return 0;
bad:
    snprintf(why, whylen, "%.40s is not a duration (want a number and a unit: 500ms, 5s, 5m, "
             "2h, 1d, 1h30m)", s);
    return -1;
}

/* An integer from lo to hi: 0, or -1. */
static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi || s[0] == '+' || s[0] == ' ') return -1;
    *out = v;
    return 0;
}

/* A duration option as ms into obj[name]: 0, or CTL_USAGE. */
static int add_duration(ctl *c, int o, cJSON *obj, const char *name)
{
    char why[160];
    int64_t ms;
    if (!c->given[o]) return 0;
    if (parse_duration(c->val[o], &ms, why, sizeof(why)) != 0)
        return usage_error(c, "--%s: %s", opts[o].name, why);
    cJSON_AddNumberToObject(obj, name, (double)ms);
    return 0;
}

/* --at or --in as "execute_at" (--in: from now on this machine's clock, or as
 * delay_ms when delay_name is given). 0, or CTL_USAGE. */
static int add_when(ctl *c, cJSON *obj, const char *delay_name)
{
    char why[160];
    int64_t ms;
    if (c->given[O_AT] && c->given[O_IN]) return usage_error(c, "give --in or --at, not both");
    if (c->given[O_IN]) {
        if (parse_duration(c->val[O_IN], &ms, why, sizeof(why)) != 0)
            return usage_error(c, "--in: %s", why);
        if (delay_name) cJSON_AddNumberToObject(obj, delay_name, (double)ms);
        else cJSON_AddNumberToObject(obj, "execute_at", (double)(util_realtime_ms() + ms));
    } else if (c->given[O_AT]) {
        const char *v = c->val[O_AT];
        long long n;
        if (strspn(v, "0123456789") == strlen(v)) {
            if (parse_int(v, 0, INT64_C(1) << 52, &n) != 0)
                return usage_error(c, "--at: %.40s is too large for Unix milliseconds", v);
            cJSON_AddNumberToObject(obj, "execute_at", (double)n);
        } else if (task_parse_rfc3339(v, &ms, why, sizeof(why)) != 0) {
            return usage_error(c, "--at: %s, or Unix milliseconds", why);
        } else {
            cJSON_AddStringToObject(obj, "execute_at", v);
        }
    }
    return 0;
}

/* The whole of a file ("-": standard input) into a malloc'd, NUL-terminated
 * buffer. NULL with the reason said on stderr. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (!f) {
        fprintf(stderr, "tickctl: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            buf = xrealloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > CTL_BODY_MAX) {
            fprintf(stderr, "tickctl: %s: over %u MiB\n", path, CTL_BODY_MAX >> 20);
            goto fail;
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        fprintf(stderr, "tickctl: %s: %s\n", path, strerror(errno));
        goto fail;
    }
    if (f != stdin) fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
fail:
    if (f != stdin) fclose(f);
    free(buf);
    return NULL;
}

/* ---- answers ------------------------------------------------------------- */

/* JSON text for scripts, with no control a terminal would act on. */
static void print_json(const char *text, size_t len)
{
    char *s = show_json_clean(text, len);
    size_t n = strlen(s);
    fwrite(s, 1, n, stdout);
    if (n && s[n - 1] != '\n') putchar('\n');
    free(s);
}

/* The API's JSON as it came, its controls escaped (print_json). */
static void print_raw(const ctl_answer *a)
{
    print_json(a->body, a->len);
}

/* One line of text from the API, made printable. */
static void print_clean(const char *text)
{
    char *s = show_clean(text, strlen(text), 1);
    printf("%s\n", s);
    free(s);
}

/* A 2xx answer that should be JSON and is not: tickd's answers always are. */
static int not_json(const ctl_answer *a, const char *what)
{
    fprintf(stderr, "tickctl: %s: the answer (%ld) is not the JSON expected\n", what, a->status);
    return CTL_API;
}

/* one task as a one-row table, or its JSON */
static int print_task_row(const ctl *c, const ctl_answer *a)
{
    if (c->given[O_JSON]) {
        print_raw(a);
        return CTL_OK;
    }
    if (!cJSON_IsObject(a->json)) return not_json(a, c->cmd->name);
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemReferenceToArray(arr, a->json);
    show_tasks(stdout, arr);
    cJSON_Delete(arr);
    return CTL_OK;
}

typedef int print_fn(const ctl *c, const ctl_answer *a);

/* Run one request and print the answer with `print`. */
static int call(ctl *c, const char *method, const char *path, const cJSON *body, print_fn *print)
{
    ctl_answer a;
    int rc = ctl_call(&c->api, method, path, body, &a);
    if (rc == CTL_OK) rc = print(c, &a);
    ctl_answer_free(&a);
    return rc;
}

/* The same on the task the command names: "/v1/tasks/<id><suffix>", the id
 * escaped. */
static int call_task(ctl *c, const char *method, const char *suffix, const cJSON *body,
                     print_fn *print)
{
    char *e = ctl_escape(c->args[0]), *p = xmalloc(strlen(e) + strlen(suffix) + 16);
    sprintf(p, "/v1/tasks/%s%s", e, suffix);
    int rc = call(c, method, p, body, print);
    free(e);
    free(p);
    return rc;
}

/* ---- commands --------------------------------------------------------------- */

static int print_added(const ctl *c, const ctl_answer *a)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(a->json, "id");
    if (c->given[O_JSON]) print_raw(a);
    else if (cJSON_IsString(id)) print_clean(id->valuestring);
    else return not_json(a, "add");
    return CTL_OK;
}

static int cmd_add(ctl *c)
{
    cJSON *t = cJSON_CreateObject(), *hdr = NULL;
    char *body = NULL;
    int rc, has_ctype = 0;
    long long n;
    cJSON_AddStringToObject(t, "callback_url", c->args[0]);
    if (c->given[O_KEY]) cJSON_AddStringToObject(t, "key", c->val[O_KEY]);
    if (c->given[O_QUEUE]) cJSON_AddStringToObject(t, "queue", c->val[O_QUEUE]);
    if (c->given[O_METHOD]) cJSON_AddStringToObject(t, "method", c->val[O_METHOD]);
    if ((rc = add_when(c, t, "delay_ms")) != 0) goto done;
    for (int i = 0; i < c->nheaders; i++) {
        const char *h = c->headers[i], *colon = strchr(h, ':');
        char name[256];
        if (!colon || colon == h || (size_t)(colon - h) >= sizeof(name)) {
            rc = usage_error(c, "--header %.60s: want NAME:VALUE", h);
            goto done;
        }
        snprintf(name, sizeof(name), "%.*s", (int)(colon - h), h);
        if (!hdr) hdr = cJSON_AddObjectToObject(t, "header");
        if (cJSON_GetObjectItem(hdr, name)) {
            rc = usage_error(c, "--header %.60s: given twice", name);
            goto done;
        }
        has_ctype |= strcasecmp(name, "Content-Type") == 0;
        cJSON_AddStringToObject(hdr, name, colon + 1 + strspn(colon + 1, " \t"));
    }
    if (c->given[O_BODY]) {
        const char *v = c->val[O_BODY];
        size_t len;
        if (v[0] == '@' || strcmp(v, "-") == 0) {
            if (!(body = read_all(v[0] == '@' ? v + 1 : "-", &len))) {
                rc = CTL_API;
                goto done;
            }
        } else {
            body = xstrdup(v);
            len = strlen(v);
        }
        if (memchr(body, '\0', len)) {
            rc = usage_error(c, "--body: a NUL byte at byte %zu (a body is text)",
                             (size_t)((char *)memchr(body, '\0', len) - body));
            goto done;
        }
        /* sent as a string, byte for byte; a JSON object or array is said so */
        cJSON *j = cJSON_ParseWithLength(body, len);
        if (!has_ctype && (cJSON_IsObject(j) || cJSON_IsArray(j))) {
            if (!hdr) hdr = cJSON_AddObjectToObject(t, "header");
            cJSON_AddStringToObject(hdr, "Content-Type", "application/json");
        }
        cJSON_Delete(j);
        cJSON_AddStringToObject(t, "req", body);
    }
    if (c->given[O_MAX_ATTEMPTS] || c->given[O_BACKOFF]) {
        cJSON *r = cJSON_AddObjectToObject(t, "retry");
        if (c->given[O_MAX_ATTEMPTS]) {
            if (parse_int(c->val[O_MAX_ATTEMPTS], 1, 100, &n) != 0) {
                rc = usage_error(c, "--max-attempts: want an integer from 1 to 100");
                goto done;
            }
            cJSON_AddNumberToObject(r, "max_attempts", (double)n);
        }
        if ((rc = add_duration(c, O_BACKOFF, r, "backoff_ms")) != 0) goto done;
    }
    if ((rc = add_duration(c, O_TIMEOUT, t, "timeout_ms")) != 0) goto done;
    if ((rc = add_duration(c, O_TTL, t, "ttl_ms")) != 0) goto done;
    if (c->given[O_TRACEPARENT]) cJSON_AddStringToObject(t, "traceparent", c->val[O_TRACEPARENT]);
    rc = call(c, "POST", "/v1/tasks", t, print_added);
done:
    free(body);
    cJSON_Delete(t);
    return rc;
}

static int print_task(const ctl *c, const ctl_answer *a)
{
    if (c->given[O_JSON]) print_raw(a);
    else if (cJSON_IsObject(a->json)) show_task(stdout, a->json, util_realtime_ms());
    else return not_json(a, "get");
    return CTL_OK;
}

static int cmd_get(ctl *c)
{
    return call_task(c, "GET", "", NULL, print_task);
}

static const char *const task_statuses[] = {"scheduled", "running", "succeeded", "failed",
                                            "cancelled", "expired"};

static int status_ok(const char *s, int retry)
{
    /* retried: failed and cancelled, not expired (never called after its expiry) */
    size_t n = retry ? 5 : sizeof(task_statuses) / sizeof(*task_statuses);
    for (size_t i = retry ? 3 : 0; i < n; i++)
        if (strcmp(s, task_statuses[i]) == 0) return 1;
    return 0;
}

/* Append "&name=value" (escaped) to the query q. */
static void query_add(char *q, size_t qlen, const char *name, const char *value)
{
    char *e = ctl_escape(value);
    size_t n = strlen(q);
    snprintf(q + n, qlen - n, "%s%s=%s", n ? "&" : "?", name, e);
    free(e);
}

/* Following next_cursor (--all) trusts no server to end the walk: it stops
 * with an error after CTL_ALL_PAGES pages, and at a cursor given before (a
 * server answering one cursor, or a cycle of them, for ever). */
typedef struct walk {
    int pages;
    uint64_t seen[CTL_ALL_PAGES];   /* FNV-1a of each cursor followed */
} walk;

/* The answer's next_cursor into cursor ("" after the last page): CTL_OK, or
 * CTL_API said on stderr when it is no cursor tickctl may print and send
 * back (tickd's are of CTL_CURSOR_CHARS, shorter than CTL_CURSOR_MAX) or,
 * with all, when the walk would not end. */
static int walk_next(walk *w, const cJSON *answer, int all, char *cursor, const char *what)
{
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(answer, "next_cursor");
    const char *v = cJSON_IsString(next) ? next->valuestring : "";
    size_t n = strlen(v);
    uint64_t h = 14695981039346656037u;
    *cursor = '\0';
    if (!next || cJSON_IsNull(next)) return CTL_OK;
    if (!n || n >= CTL_CURSOR_MAX || strspn(v, CTL_CURSOR_CHARS) != n) {
        fprintf(stderr, "tickctl: %s: the answer's next_cursor is no cursor tickd gives\n", what);
        return CTL_API;
    }
    memcpy(cursor, v, n + 1);
    if (!all) return CTL_OK;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)v[i]) * 1099511628211u;
    for (int i = 0; i < w->pages; i++)
        if (w->seen[i] == h) {
            fprintf(stderr, "tickctl: %s --all: page %d gave a cursor given before: stopping "
                    "(the walk would not end)\n", what, w->pages + 1);
            return CTL_API;
        }
    if (w->pages == CTL_ALL_PAGES) {
        fprintf(stderr, "tickctl: %s --all: stopping after %d pages (go on with --cursor '%s')\n",
                what, CTL_ALL_PAGES, cursor);
        return CTL_API;
    }
    w->seen[w->pages++] = h;
    return CTL_OK;
}

/* --cursor and --key-prefix within what tickd takes: 0, or CTL_USAGE */
static int filter_check(const ctl *c)
{
    if (c->given[O_CURSOR] && strlen(c->val[O_CURSOR]) >= CTL_CURSOR_MAX)
        return usage_error(c, "--cursor: longer than any cursor tickd gives");
    if (c->given[O_KEY_PREFIX] && strlen(c->val[O_KEY_PREFIX]) > TASK_KEY_MAX)
        return usage_error(c, "--key-prefix: longer than a key (%d characters)", TASK_KEY_MAX);
    return 0;
}

/* GET path + query + limit and cursor, page after page while --all and a
 * next_cursor (walk_next: a bounded walk, at most CTL_ALL_BYTES of answers):
 * the array `field` of each page joined into all; cursor ends as the last
 * next_cursor ("": none). With --json and no --all the first page is printed
 * as it came (*printed = 1). */
static int get_pages(ctl *c, const char *path, const char *query, const char *field,
                     long long limit, char cursor[CTL_CURSOR_MAX], cJSON *all, int *printed)
{
    const char *what = c->cmd->name;
    char q[4 * CTL_CURSOR_MAX];
    walk *w = xcalloc(1, sizeof(*w));
    size_t held = 0;
    int rc;
    *printed = 0;
    for (;;) {
        ctl_answer a;
        char lim[24];
        snprintf(q, sizeof(q), "%s", query);
        snprintf(lim, sizeof(lim), "%lld", limit);
        query_add(q, sizeof(q), "limit", lim);
        if (*cursor) query_add(q, sizeof(q), "cursor", cursor);
        char *p = xmalloc(strlen(path) + strlen(q) + 1);
        sprintf(p, "%s%s", path, q);
        rc = ctl_call(&c->api, "GET", p, NULL, &a);
        free(p);
        if (rc != CTL_OK) break;
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(a.json, field), *t;
        if (!cJSON_IsArray(items)) {
            rc = not_json(&a, what);
            ctl_answer_free(&a);
            break;
        }
        if (c->given[O_JSON] && !c->given[O_ALL]) {
            print_raw(&a);
            ctl_answer_free(&a);
            *printed = 1;
            break;
        }
        cJSON_ArrayForEach(t, items) cJSON_AddItemToArray(all, cJSON_Duplicate(t, 1));
        held += a.len;
        rc = walk_next(w, a.json, c->given[O_ALL], cursor, what);
        ctl_answer_free(&a);
        if (rc != CTL_OK) break;
        if (*cursor && c->given[O_ALL] && held > CTL_ALL_BYTES) {
            fprintf(stderr, "tickctl: %s --all: stopping at over %u MiB of %s (go on with "
                    "--cursor '%s')\n", what, CTL_ALL_BYTES >> 20, field, cursor);
            rc = CTL_API;
            break;
        }
        if (!c->given[O_ALL] || !*cursor) break;
    }
    free(w);
    return rc;
}

/* every page's items as one answer, {field: [...], next_cursor: null} */
static void print_pages_json(const char *field, cJSON *all)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemReferenceToObject(o, field, all);
    cJSON_AddNullToObject(o, "next_cursor");
    char *s = cJSON_PrintUnformatted(o);
    print_json(s, strlen(s));
    free(s);
    cJSON_Delete(o);
}

static int cmd_ls(ctl *c)
{
    const char *status = c->given[O_STATUS] ? c->val[O_STATUS] : "scheduled";
    char q[4 * CTL_CURSOR_MAX] = "", cursor[CTL_CURSOR_MAX] = "";
    long long limit = 100;
    int rc = CTL_OK, printed;
    if (!status_ok(status, 0))
        return usage_error(c, "--status: %.40s is not one of scheduled, running, succeeded, "
                           "failed, cancelled, expired", status);
    if (c->given[O_LIMIT] && parse_int(c->val[O_LIMIT], 1, 1000, &limit) != 0)
        return usage_error(c, "--limit: want an integer from 1 to 1000");
    if ((rc = filter_check(c)) != 0) return rc;
    if (c->given[O_CURSOR]) snprintf(cursor, sizeof(cursor), "%s", c->val[O_CURSOR]);
    query_add(q, sizeof(q), "status", status);
    if (c->given[O_KEY_PREFIX]) query_add(q, sizeof(q), "key_prefix", c->val[O_KEY_PREFIX]);
    cJSON *all = cJSON_CreateArray();
    rc = get_pages(c, "/v1/tasks", q, "tasks", limit, cursor, all, &printed);
    if (rc == CTL_OK && !printed) {
        if (c->given[O_JSON]) {
            print_pages_json("tasks", all);
        } else {
            show_tasks(stdout, all);
            if (*cursor)
                fprintf(stderr, "more: tickctl ls --status %s --cursor '%s' (or --all)\n", status,
                        cursor);
        }
    }
    cJSON_Delete(all);
    return rc;
}

static int print_cancelled(const ctl *c, const ctl_answer *a)
{
    (void)a;
    if (!c->given[O_JSON]) printf("cancelled %s\n", c->args[0]);
    return CTL_OK;
}

static int cmd_cancel(ctl *c)
{
    return call_task(c, "DELETE", "", NULL, print_cancelled);
}

/* POST /v1/tasks/retry, page after page with --all */
static int retry_bulk(ctl *c)
{
    long long limit = 0, total = 0;
    const char *status = c->val[O_STATUS];
    char cursor[CTL_CURSOR_MAX] = "";
    int rc;
    if (!status_ok(status, 1))
        return usage_error(c, "--status: only failed or cancelled tasks are retried");
    if (c->given[O_LIMIT] && parse_int(c->val[O_LIMIT], 1, 10000, &limit) != 0)
        return usage_error(c, "--limit: want an integer from 1 to 10000");
    if ((rc = filter_check(c)) != 0) return rc;
    if (c->given[O_CURSOR]) snprintf(cursor, sizeof(cursor), "%s", c->val[O_CURSOR]);
    walk *w = xcalloc(1, sizeof(*w));
    for (;;) {
        ctl_answer a;
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "status", status);
        if (limit) cJSON_AddNumberToObject(f, "limit", (double)limit);
        if (c->given[O_KEY_PREFIX]) cJSON_AddStringToObject(f, "key_prefix", c->val[O_KEY_PREFIX]);
        if (*cursor) cJSON_AddStringToObject(f, "cursor", cursor);
        rc = ctl_call(&c->api, "POST", "/v1/tasks/retry", f, &a);
        cJSON_Delete(f);
        if (rc != CTL_OK) {
            if (total) fprintf(stderr, "tickctl: %lld tasks were retried before\n", total);
            break;
        }
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(a.json, "retried");
        if (!cJSON_IsNumber(n)) {
            rc = not_json(&a, "retry");
            ctl_answer_free(&a);
            break;
        }
        total += (long long)n->valuedouble;
        if ((rc = walk_next(w, a.json, c->given[O_ALL], cursor, "retry")) != CTL_OK) {
            fprintf(stderr, "tickctl: %lld tasks were retried\n", total);
            ctl_answer_free(&a);
            break;
        }
        if (c->given[O_ALL] && *cursor) {
            ctl_answer_free(&a);
            continue;
        }
        if (c->given[O_JSON] && !c->given[O_ALL]) print_raw(&a);
        else if (c->given[O_JSON]) printf("{\"retried\":%lld,\"next_cursor\":null}\n", total);
        else printf("retried %lld task%s\n", total, total == 1 ? "" : "s");
        if (*cursor && !c->given[O_JSON])
            fprintf(stderr, "more: tickctl retry --status %s --cursor '%s' (or --all)\n",
                    status, cursor);
        ctl_answer_free(&a);
        break;
    }
    free(w);
    return rc;
}

static int cmd_retry(ctl *c)
{
    if (c->nargs && c->given[O_STATUS])
        return usage_error(c, "give a task id or --status, not both");
    if (!c->nargs && !c->given[O_STATUS])
        return usage_error(c, "give a task id, or --status failed for every failed task");
    if (!c->nargs) {
        if (c->given[O_AT] || c->given[O_IN])
            return usage_error(c, "--at and --in go with a task id");
        return retry_bulk(c);
    }
    if (c->given[O_LIMIT] || c->given[O_CURSOR] || c->given[O_ALL] || c->given[O_KEY_PREFIX])
        return usage_error(c, "--limit, --cursor, --all and --key-prefix go with --status");
    cJSON *b = NULL;
    int rc;
    if (c->given[O_AT] || c->given[O_IN]) {
        b = cJSON_CreateObject();
        if ((rc = add_when(c, b, NULL)) != 0) {
            cJSON_Delete(b);
            return rc;
        }
    }
    rc = call_task(c, "POST", "/retry", b, print_task_row);
    cJSON_Delete(b);
    return rc;
}

static int cmd_run(ctl *c)
{
    return call_task(c, "POST", "/run", NULL, print_task_row);
}

static int print_stats(const ctl *c, const ctl_answer *a)
{
    if (c->given[O_JSON]) print_raw(a);
    else if (cJSON_IsObject(a->json)) show_object(stdout, a->json);
    else return not_json(a, "stats");
    return CTL_OK;
}

static int cmd_stats(ctl *c)
{
    return call(c, "GET", "/v1/stats", NULL, print_stats);
}

/* ---- queues ---- */

static void print_queue_row(const cJSON *q)
{
    const char *names[] = {"rate", "max_concurrency", "scheduled", "waiting", "in_flight",
                           "failed_last_hour"};
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(q, "name");
    char *n = show_clean(cJSON_IsString(name) ? name->valuestring : "?",
                         cJSON_IsString(name) ? strlen(name->valuestring) : 1, 1);
    printf("%-24s", n);
    free(n);
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(q, names[i]);
        if (cJSON_IsNumber(v)) printf(" %10.15g", v->valuedouble);
        else printf(" %10s", "-");
    }
    printf(" %s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "paused")) ? "paused" : "");
}

static void print_queue_head(void)
{
    printf("%-24s %10s %10s %10s %10s %10s %10s %s\n", "QUEUE", "RATE/S", "MAX_CONC",
           "SCHEDULED", "WAITING", "IN_FLIGHT", "FAILED_1H", "STATE");
}

static int print_queue(const ctl *c, const ctl_answer *a)
{
    if (c->given[O_JSON]) {
        print_raw(a);
        return CTL_OK;
    }
    if (!cJSON_IsObject(a->json)) return not_json(a, c->cmd->name);
    print_queue_head();
    print_queue_row(a->json);
    return CTL_OK;
}

/* GET /v1/queues, a page, or page after page with --all */
static int cmd_queues(ctl *c)
{
    char cursor[CTL_CURSOR_MAX] = "";
    long long limit = 100;
    int rc = CTL_OK, printed;
    if (c->given[O_LIMIT] && parse_int(c->val[O_LIMIT], 1, 200, &limit) != 0)
        return usage_error(c, "--limit: want an integer from 1 to 200");
    if ((rc = filter_check(c)) != 0) return rc;
    if (c->given[O_CURSOR]) snprintf(cursor, sizeof(cursor), "%s", c->val[O_CURSOR]);
    cJSON *all = cJSON_CreateArray(), *x;
    rc = get_pages(c, "/v1/queues", "", "queues", limit, cursor, all, &printed);
    if (rc == CTL_OK && !printed) {
        if (c->given[O_JSON]) {
            print_pages_json("queues", all);
        } else {
            print_queue_head();
            cJSON_ArrayForEach(x, all) print_queue_row(x);
            if (*cursor) fprintf(stderr, "more: tickctl queues --cursor '%s' (or --all)\n", cursor);
        }
    }
    cJSON_Delete(all);
    return rc;
}

/* pause / resume QUEUE */
static int cmd_queue_flag(ctl *c)
{
    if (!task_queue_valid(c->args[0]))
        return usage_error(c, "%.60s: a queue name is 1-64 of A-Z a-z 0-9 . _ -", c->args[0]);
    char p[TASK_QUEUE_MAX + 32];
    snprintf(p, sizeof(p), "/v1/queues/%s/%s", c->args[0], c->cmd->name);
    return call(c, "POST", p, NULL, print_queue);
}

/* ui: the web console's URL; opened with xdg-open when a person at a
 * graphical session runs it (stdout a terminal, DISPLAY or WAYLAND_DISPLAY
 * set), never from a script. The token is not put in the URL: the console
 * asks for it. */
static int cmd_ui(ctl *c)
{
    printf("%s/ui/\n", c->api.url);
    fflush(stdout);
    const char *x = getenv("DISPLAY"), *w = getenv("WAYLAND_DISPLAY");
    if (!isatty(STDOUT_FILENO) || !((x && *x) || (w && *w))) return CTL_OK;
    char url[2100];
    snprintf(url, sizeof(url), "%s/ui/", c->api.url);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        execlp("xdg-open", "xdg-open", url, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "tickctl: no browser opened (xdg-open): open the URL above\n");
    return CTL_OK;
}

static int cmd_listen(ctl *c)
{
    long long port = 9000, status = 200, count = 0;
    listen_opts o = {.bind = c->given[O_BIND] ? c->val[O_BIND] : "127.0.0.1",
                     .json = c->given[O_JSON]};
    webhook_keys *keys = NULL;
    char err[256];
    if (c->given[O_PORT] && parse_int(c->val[O_PORT], 0, 65535, &port) != 0)
        return usage_error(c, "--port: want a port number from 0 to 65535");
    if (c->given[O_STATUS] && parse_int(c->val[O_STATUS], 200, 599, &status) != 0)
        return usage_error(c, "--status: want an HTTP status from 200 to 599");
    if (c->given[O_COUNT] && parse_int(c->val[O_COUNT], 1, 1000000000, &count) != 0)
        return usage_error(c, "--count: want a positive integer");
    if (c->given[O_SECRET]) {
        const char *v = c->val[O_SECRET];
        char *secret = NULL;
        size_t len;
        /* @FILE keeps the secret out of the process list */
        if (v[0] == '@') {
            if (!(secret = read_all(v + 1, &len))) return CTL_API;
            for (char *p = secret; *p; p++)
                if (*p == '\n' || *p == '\r') *p = ' ';
        }
        int bad = webhook_keys_parse_as("--secret", secret ? secret : v, &keys, err, sizeof(err));
        free(secret);
        if (bad) return usage_error(c, "%s", err);
        if (!keys) return usage_error(c, "--secret: no secret given");
    }
    o.keys = keys;
    o.port = (int)port;
    o.status = (int)status;
    o.count = (long)count;
    int rc = listen_run(&o);
    webhook_keys_free(keys);
    return rc;
}

static int cmd_help(ctl *c);

/* ---- help ------------------------------------------------------------------- */

#define HELP_COMMON \
    "  --url URL       tickd's API (default $TICKD_URL, else " CTL_URL_DEFAULT ")\n" \
    "  --token TOKEN   API token, sent as Authorization: Bearer (default $TICKD_TOKEN)\n" \
    "  --json          print the API's JSON instead of a table\n" \
    "  -h, --help      this text\n"

static const char help_main[] =
    "usage: tickctl [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]\n"
    "\n"
    "tickctl talks to tickd's HTTP API: it schedules, finds, cancels and retries\n"
    "callbacks, and listens for them on a local port.\n"
    "\n"
    "commands:\n"
    "  add URL --in 5m | --at TIME   schedule a callback; prints its id\n"
    "  get ID                        one task in detail\n"
    "  ls [--status S] [--all]       tasks of one status (default scheduled)\n"
    "  cancel ID                     cancel a task that has not fired\n"
    "  retry ID | retry --status failed   run failed (or cancelled) tasks again\n"
    "  run ID                        make a scheduled task due now\n"
    "  stats                         this tickd's counters\n"
    "  queues                        queues: limits, waiting, in flight, failed\n"
    "  pause QUEUE, resume QUEUE     stop a queue's callbacks, let them go again\n"
    "  listen [--port P] [--secret whsec_...]   print callbacks as they arrive\n"
    "  ui                            the web console's URL, opened in a browser\n"
    "  help [COMMAND]                a command's options\n"
    "\n"
    "options of every command:\n"
    HELP_COMMON
    "\n"
    "environment: TICKD_URL, TICKD_TOKEN (tickd itself ignores both)\n"
    "\n"
    "exit codes:\n"
    "  0  done\n"
    "  1  the API answered an error (its status, code and message are printed),\n"
    "     or a local failure (a file that cannot be read, a port in use)\n"
    "  2  usage: a bad command line\n"
    "  3  tickd cannot be reached: connection refused, timed out or closed\n"
    "  4  listen: a request with an invalid signature came (with --secret)\n"
    "\n"
    "tickctl COMMAND --help, or man tickctl, says more.\n";

static const cmd cmds[] = {
    {"add", cmd_add,
     BIT(O_IN) | BIT(O_AT) | BIT(O_METHOD) | BIT(O_HEADER) | BIT(O_BODY) | BIT(O_KEY) |
         BIT(O_MAX_ATTEMPTS) | BIT(O_BACKOFF) | BIT(O_TIMEOUT) | BIT(O_QUEUE) | BIT(O_TTL) |
         BIT(O_TRACEPARENT), 1, 1,
     "usage: tickctl add URL [--in DURATION | --at TIME] [options]\n"
     "\n"
     "Schedule a callback to URL (POST /v1/tasks) and print its id. With neither\n"
     "--in nor --at it is due now.\n"
     "\n"
     "  --in DURATION        due this long from now: 500ms, 5s, 5m, 2h, 1d, 1h30m\n"
     "  --at TIME            due at an RFC 3339 time (2026-12-01T09:00:00Z) or Unix ms\n"
     "  --method M           GET, POST (default), PUT, PATCH or DELETE\n"
     "  --header NAME:VALUE  a request header (again for more)\n"
     "  --body TEXT | @FILE | -   the body: the text, a file's bytes, or standard\n"
     "                       input; sent as given, with Content-Type:\n"
     "                       application/json when it is a JSON object or array\n"
     "                       and no --header sets one\n"
     "  --key KEY            the task's key (the same key and --at again stores\n"
     "                       nothing new and gives the same id)\n"
     "  --max-attempts N     attempts before the task fails (1-100, default 5)\n"
     "  --backoff DURATION   wait before the second attempt, doubling (default 1s)\n"
     "  --timeout DURATION   each attempt's timeout (default 10s)\n"
     "  --queue Q            the task's queue (default: default)\n"
     "  --ttl DURATION       expires this long after it is due: no attempt begins\n"
     "                       after that, it ends expired\n"
     "  --traceparent TP     the W3C trace context its attempts continue\n"
     HELP_COMMON},
    {"get", cmd_get, 0, 1, 1,
     "usage: tickctl get ID\n"
     "\n"
     "One task in detail (GET /v1/tasks/ID): status, due time, attempts, the last\n"
     "error and the attempt history.\n"
     "\n" HELP_COMMON},
    {"ls", cmd_ls, BIT(O_STATUS) | BIT(O_LIMIT) | BIT(O_CURSOR) | BIT(O_ALL) | BIT(O_KEY_PREFIX),
     0, 0,
     "usage: tickctl ls [--status S] [--limit N] [--cursor C] [--all] [--key-prefix P]\n"
     "\n"
     "Tasks of one status (GET /v1/tasks), oldest first: id, status, due time,\n"
     "attempts (made/allowed) and URL. When there are more, the cursor of the next\n"
     "page is said on stderr.\n"
     "\n"
     "  --status S        scheduled (default), running, succeeded, failed, cancelled, expired\n"
     "  --limit N         tasks a page (1-1000, default 100)\n"
     "  --cursor C        the page after this cursor (as printed)\n"
     "  --all             every page\n"
     "  --key-prefix P    only tasks whose key starts with P\n"
     HELP_COMMON},
    {"cancel", cmd_cancel, 0, 1, 1,
     "usage: tickctl cancel ID\n"
     "\n"
     "Cancel a task (DELETE /v1/tasks/ID): it never fires. A task that already\n"
     "succeeded or failed, or is running, cannot be (409, exit code 1).\n"
     "\n" HELP_COMMON},
    {"retry", cmd_retry,
     BIT(O_STATUS) | BIT(O_LIMIT) | BIT(O_CURSOR) | BIT(O_ALL) | BIT(O_KEY_PREFIX) | BIT(O_AT) |
         BIT(O_IN), 0, 1,
     "usage: tickctl retry ID [--in DURATION | --at TIME]\n"
     "       tickctl retry --status failed|cancelled [--limit N] [--key-prefix P] [--all]\n"
     "\n"
     "Schedule a failed or cancelled task again, its attempts reset (POST\n"
     "/v1/tasks/ID/retry), now or at the time given; prints the task. With\n"
     "--status, every task of that status (POST /v1/tasks/retry), up to --limit\n"
     "(1-10000, default 1000), or all of them with --all; prints how many.\n"
     "\n"
     "  --in DURATION, --at TIME   when (default now)\n"
     "  --status S                 failed or cancelled\n"
     "  --limit N, --cursor C, --all, --key-prefix P   which of them\n"
     HELP_COMMON},
    {"run", cmd_run, 0, 1, 1,
     "usage: tickctl run ID\n"
     "\n"
     "Make a scheduled task due now (POST /v1/tasks/ID/run); prints the task.\n"
     "\n" HELP_COMMON},
    {"stats", cmd_stats, 0, 0, 0,
     "usage: tickctl stats\n"
     "\n"
     "This tickd replica's counters (GET /v1/stats), a name and value a line.\n"
     "\n" HELP_COMMON},
    {"queues", cmd_queues, BIT(O_LIMIT) | BIT(O_CURSOR) | BIT(O_ALL), 0, 0,
     "usage: tickctl queues [--limit N] [--cursor C] [--all]\n"
     "\n"
     "The queues with settings, tasks or waiting tasks, and the default one (GET\n"
     "/v1/queues), by name, a page of --limit (1-200, default 100) at a time:\n"
     "rate, max concurrency, tasks not yet ended, tasks due and held back by a\n"
     "limit, callbacks in flight, tasks failed in the last hour, paused or not.\n"
     "  --cursor C        the page after the one that printed it\n"
     "  --all             every page\n"
     "\n" HELP_COMMON},
    {"pause", cmd_queue_flag, 0, 1, 1,
     "usage: tickctl pause QUEUE\n"
     "\n"
     "Pause a queue (POST /v1/queues/QUEUE/pause): its due tasks wait, charged no\n"
     "attempt, until it is resumed.\n"
     "\n" HELP_COMMON},
    {"resume", cmd_queue_flag, 0, 1, 1,
     "usage: tickctl resume QUEUE\n"
     "\n"
     "Resume a queue (POST /v1/queues/QUEUE/resume): the tasks that waited go,\n"
     "oldest first, within its limits.\n"
     "\n" HELP_COMMON},
    {"ui", cmd_ui, 0, 0, 0,
     "usage: tickctl ui\n"
     "\n"
     "Print the web console's URL (--url or TICKD_URL, then /ui/) and, when run\n"
     "at a terminal of a graphical session (DISPLAY or WAYLAND_DISPLAY set),\n"
     "open it with xdg-open. The console asks for the token itself when the API\n"
     "wants one; tickctl never puts it in the URL.\n"
     "\n" HELP_COMMON},
    {"listen", cmd_listen, BIT(O_PORT) | BIT(O_BIND) | BIT(O_STATUS) | BIT(O_SECRET) | BIT(O_COUNT),
     0, 0,
     "usage: tickctl listen [--port P] [--status CODE] [--secret whsec_...] [--count N]\n"
     "\n"
     "A local HTTP receiver: prints each request as it arrives (method, path,\n"
     "headers, body, and its lateness: arrival time minus the due time tickd sends\n"
     "in tickd-scheduled-at) and answers it. Point tasks at\n"
     "http://127.0.0.1:PORT/any/path. The address is said on stderr.\n"
     "\n"
     "  --port P          port (default 9000; 0: a free one)\n"
     "  --bind ADDR       address (default 127.0.0.1)\n"
     "  --status CODE     the answer (200-599, default 200): 500 makes tickd retry\n"
     "  --secret S        verify Standard Webhooks signatures with tickd's\n"
     "                    callback.signing_secrets (whsec_..., several space-separated,\n"
     "                    or @FILE): prints \"signature: valid\" or \"signature: INVALID\n"
     "                    (reason)\" and answers 401 to an invalid one\n"
     "  --count N         exit after N requests\n"
     "  --json            a JSON object a request, a line each\n"
     "  -h, --help        this text\n"
     "\n"
     "It stops on Ctrl-C (or SIGTERM) or after --count requests, with exit code 4\n"
     "when any request's signature was invalid, else 0.\n"},
    {"help", cmd_help, 0, 0, 1,
     "usage: tickctl help [COMMAND]\n"
     "\n"
     "What tickctl does, or what a command takes.\n"},
};

static const cmd *cmd_find(const char *name)
{
    for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++)
        if (strcmp(cmds[i].name, name) == 0) return &cmds[i];
    return NULL;
}

static int cmd_help(ctl *c)
{
    if (!c->nargs) {
        fputs(help_main, stdout);
        return CTL_OK;
    }
    const cmd *k = cmd_find(c->args[0]);
    if (!k) return usage_error(NULL, "unknown command %.60s", c->args[0]);
    fputs(k->help, stdout);
    return CTL_OK;
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static ctl c;
    int i = 1, rc;
    if ((rc = parse_args(&c, argc, argv, &i, COMMON | BIT(O_VERSION), 1)) != 0) return rc;
    if (c.given[O_VERSION]) {
        printf("tickctl %s\n", TICKCTL_VERSION);
        return CTL_OK;
    }
    if (i == argc) {
        if (c.given[O_HELP]) {
            fputs(help_main, stdout);
            return CTL_OK;
        }
        fputs(help_main, stderr);
        return CTL_USAGE;
    }
    if (!(c.cmd = cmd_find(argv[i]))) return usage_error(NULL, "unknown command %.60s", argv[i]);
    i++;
    if ((rc = parse_args(&c, argc, argv, &i, COMMON | c.cmd->opts, 0)) != 0) return rc;
    if (c.given[O_HELP]) {
        fputs(c.cmd->help, stdout);
        return CTL_OK;
    }
    if (c.nargs < c.cmd->min_args)
        return usage_error(&c, "%s needs %s", c.cmd->name,
                           strcmp(c.cmd->name, "add") == 0 ? "a URL"
                           : c.cmd->run == cmd_queue_flag ? "a queue" : "a task id");
    if (c.nargs > c.cmd->max_args)
        return usage_error(&c, "unexpected operand %.60s", c.args[c.cmd->max_args]);
    if (c.cmd->run == cmd_help || c.cmd->run == cmd_listen) return c.cmd->run(&c);

    const char *url = c.given[O_URL] ? c.val[O_URL] : getenv("TICKD_URL");
    char base[2048];
    snprintf(base, sizeof(base), "%s", url && *url ? url : CTL_URL_DEFAULT);
    for (size_t n = strlen(base); n > 0 && base[n - 1] == '/'; n--) base[n - 1] = '\0';
    c.api.url = base;
    c.api.token = c.given[O_TOKEN] ? c.val[O_TOKEN] : getenv("TICKD_TOKEN");
    char why[256];
    if (ctl_api_check(&c.api, why, sizeof(why)) != 0) return usage_error(&c, "%s", why);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "tickctl: libcurl could not start\n");
        return CTL_API;
    }
    rc = c.cmd->run(&c);
    curl_global_cleanup();
    return rc;
}
