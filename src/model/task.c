/* task.c -- see task.h. */
#include "model/task.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "base/log.h"
#include "base/trace.h"
#include "base/tz.h"
#include "base/util.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* ASCII, as every name here is (and as isdigit and isalnum read it in the C
 * locale tickd runs in), without their call for the locale's table per
 * character: ids are checked on every claim and settle. */
static inline int task_isdigit(int c)
{
    return c >= '0' && c <= '9';
}

static inline int task_isalnum(int c)
{
    return task_isdigit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static int task_keychar(int c)
{
    return task_isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
}

int task_queue_valid(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= TASK_QUEUE_MAX - 1 || s[n] == ':' || !task_keychar((unsigned char)s[n]))
            return 0;
    return n > 0;
}

int task_key_valid(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!task_keychar((unsigned char)s[n]) || n >= TASK_KEY_MAX) return 0;
    return n > 0;
}

/* Every name tickd makes itself, and why no name a user chooses can be one:
 * - a task id, "<slice>.<execute_at ms>.<key>" (task.h): the slice and time
 *   are tickd's, the key the user's, or task_key_random's 22 base62
 *   characters when none is given. A key given that equals a random one
 *   names the same id, so the same task (lua/add.lua, form "c"): that is the
 *   id's owner re-POSTing, not another kind.
 * - a schedule's run: a task keyed "s:<schedule key>:<version>"
 *   (schedule_run_task); the prefix below keeps it for runs alone. Runs of
 *   two schedules differ too: the version, after the last ':', is digits
 *   alone, and so is what a listing by schedule_id takes after
 *   "s:<key>:" (store_list_query.runs): s:ab:1:2 is a run of ab:1, not of ab.
 * - a schedule id, "sch.<key>": a space of its own (its own URLs, its own
 *   hashes, lua/sched.lua), never a task's.
 * - a retry, a run now: the same task, its id unchanged (lua/move.lua).
 * - the webhook-id of an event about a task, "<task id>~<event>"
 *   (TASK_EVENT_SEP): '~' is in no id, so no task's webhook-id is an event's.
 * - fields of the store's hashes: "s:<id>" (a state) and "#open" beside
 *   ids that start with a digit (a slice) or with "sch.": none is an id.
 * - queue and destination keys of lua/flow.lua: a kind letter and ':' before
 *   the name (q:, d:, h:q:, h:d:, w:, f:), never a prefix of another kind's.
 * A key a user gives must not start with a prefix below: the check is in
 * task_input_parse; what tickd makes goes through task_input_parse_made. */
static const struct {
    const char *prefix, *what;
} task_reserved[] = {
    {TASK_RUN_PREFIX, "schedule runs"},
};

const char *task_key_reserved(const char *key, const char **what)
{
    for (size_t i = 0; i < sizeof(task_reserved) / sizeof(*task_reserved); i++)
        if (strncmp(key, task_reserved[i].prefix, strlen(task_reserved[i].prefix)) == 0) {
            if (what) *what = task_reserved[i].what;
            return task_reserved[i].prefix;
        }
    return NULL;
}

int task_key_looks_random(const char *key)
{
    size_t n = 0;
    while (isalnum((unsigned char)key[n])) n++;
    return n == TASK_KEY_RANDOM_LEN && !key[n];
}

void task_key_random(char *out)
{
    static const char abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    /* the kernel's random bytes, fetched a few thousand at a time: one
     * getrandom() for about 180 keys rather than one each */
    static _Thread_local unsigned char pool[4096];
    static _Thread_local size_t left;
    const size_t need = TASK_KEY_RANDOM_LEN;
    if (left < need) {
        size_t got = 0;
        while (got < sizeof(pool)) {
            ssize_t n = getrandom(pool + got, sizeof(pool) - got, 0);
            if (n > 0) got += (size_t)n;
            else if (errno != EINTR) log_panic("getrandom: %s", strerror(errno)); /* unusable */
        }
        left = sizeof(pool);
    }
    const unsigned char *r = pool + sizeof(pool) - left;
    for (size_t i = 0; i < need; i++) out[i] = abc[r[i] % 62];
    memset(pool + sizeof(pool) - left, 0, need);
    left -= need;
    out[need] = '\0';
}

int task_bucket(const char *key, int buckets)
{
    return (int)(util_fnv1a(key, strlen(key)) % (uint32_t)buckets);
}

int task_slice_bucket(const char *slice)
{
    /* the digits after the first dot (of a slice, "YYYYMMDDHHMM.bbbb", or of
     * an id), read here: atoi's strtol, with its locale, sign and base, was
     * a POST's 130 instructions; a bucket has at most four digits, and a
     * longer run stops before it could overflow */
    const char *p = strchr(slice, '.');
    int v = 0;
    if (p)
        for (p++; *p >= '0' && *p <= '9' && v < 100000000; p++) v = v * 10 + (*p - '0');
    return v;
}

/* Writes v as exactly n decimal digits at p (v < 10^n). */
static void task_put_digits(char *p, int n, int v)
{
    while (n--) {
        p[n] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* Slice names are made and read for every task claimed and settled: plain
 * arithmetic on the calendar (tz.h), not gmtime/strftime and timegm, which
 * cost thousands of instructions each. */
void task_slice_name(int64_t ms, int bucket, char *out)
{
    /* the last minute's digits, kept: the names made in a row (a turn's
     * adds, a scan's claims) are mostly of one minute */
    static _Thread_local int64_t kept_minute = INT64_MIN;
    static _Thread_local char kept[12];
    int64_t sec = ms / 1000; /* as time_t truncates; minutes and days floor */
    int64_t minute = sec >= 0 ? sec / 60 : -((-sec + 59) / 60);
    if (minute != kept_minute) {
        int64_t day = minute >= 0 ? minute / 1440 : -((-minute + 1439) / 1440);
        int of_day = (int)(minute - day * 1440), y, mo, d;
        tz_civil_from_days(day, &y, &mo, &d);
        if (y < 0 || y > 9999) { /* past any time a task may name (TASK_TIME_MAX_MS) */
            char wide[64];
            snprintf(wide, sizeof(wide), "%04d%02d%02d%02d%02d.%d", y, mo, d, of_day / 60,
                     of_day % 60, bucket & 0xffff);
            memcpy(out, wide, TASK_SLICE_MAX - 1);
            out[TASK_SLICE_MAX - 1] = '\0';
            return;
        }
        task_put_digits(kept, 4, y);
        task_put_digits(kept + 4, 2, mo);
        task_put_digits(kept + 6, 2, d);
        task_put_digits(kept + 8, 2, of_day / 60);
        task_put_digits(kept + 10, 2, of_day % 60);
        kept_minute = minute;
    }
    memcpy(out, kept, 12);
    out[12] = '.';
    int b = bucket & 0xffff, n = b >= 10000 ? 5 : b >= 1000 ? 4 : b >= 100 ? 3 : b >= 10 ? 2 : 1;
    task_put_digits(out + 13, n, b);
    out[13 + n] = '\0';
}

int64_t task_slice_minute(const char *slice)
{
    int v[5];
    static const int width[5] = {4, 2, 2, 2, 2};
    const char *p = slice;
    for (int i = 0; i < 5; i++) {
        v[i] = 0;
        for (int k = 0; k < width[i]; k++, p++) {
            if (!task_isdigit((unsigned char)*p)) return -1;
            v[i] = v[i] * 10 + (*p - '0');
        }
    }
    if (*p != '.') return -1;
    int y = v[0], mo = v[1], d = v[2], h = v[3], mi = v[4];
    /* only a name of a real minute, from 1970 on: no 13th month, 31st of
     * April or 99th minute */
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59) return -1;
    int64_t first = tz_days_from_civil(y, mo, 1);
    int64_t next = mo == 12 ? tz_days_from_civil(y + 1, 1, 1) : tz_days_from_civil(y, mo + 1, 1);
    if (d > next - first) return -1;
    return ((first + d - 1) * 24 + h) * 60 + mi;
}

void task_id_make(const char *slice, int64_t execute_at_ms, const char *key,
                  char *out, size_t outlen)
{
    util_buf b = {out, 0, outlen};
    util_buf_str(&b, slice);
    util_buf_add(&b, ".", 1);
    util_buf_int(&b, execute_at_ms);
    util_buf_add(&b, ".", 1);
    util_buf_str(&b, key);
}

int task_id_parse(const char *id, char *slice, int64_t *execute_at_ms, char *key)
{
    const char *p = id + 13, *q;
    if (strlen(id) < 13 || task_slice_minute(id) < 0) return -1;
    /* bucket digits */
    for (q = p; task_isdigit((unsigned char)*q); q++) {}
    if (q == p || q - p > 4 || *q != '.') return -1;
    size_t slen = (size_t)(q - id);
    memcpy(slice, id, slen);
    slice[slen] = '\0';
    p = q + 1;
    for (q = p; task_isdigit((unsigned char)*q); q++) {}
    if (q == p || q - p > 15 || *q != '.') return -1;
    *execute_at_ms = strtoll(p, NULL, 10);
    if (!task_key_valid(q + 1)) return -1;
    strcpy(key, q + 1);
    return 0;
}

int64_t task_id_at(const char *id)
{
    const char *p = strchr(id, '.');
    p = p ? strchr(p + 1, '.') : NULL;
    if (!p || !task_isdigit((unsigned char)p[1])) return -1;
    int64_t v = 0;
    for (p++; task_isdigit((unsigned char)*p); p++) v = v * 10 + (*p - '0');
    return v;
}

int task_cursor_valid(const char *s)
{
    const char *a = strchr(s, '~'), *b = a ? strchr(a + 1, '~') : NULL;
    char slice[TASK_SLICE_MAX], key[TASK_KEY_MAX + 1];
    int64_t at;
    if (!a || !b || (size_t)(a - s) >= TASK_SLICE_MAX) return 0;
    snprintf(slice, sizeof(slice), "%.*s", (int)(a - s), s);
    if (task_slice_minute(slice) < 0) return 0;
    size_t bucket = strspn(slice + 13, "0123456789");
    size_t score = strspn(a + 1, "0123456789");
    return bucket >= 1 && bucket <= 4 && !slice[13 + bucket] && score >= 1 && score <= 16 &&
           a + 1 + score == b && task_id_parse(b + 1, slice, &at, key) == 0;
}

static int task_digits(const char *s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

int task_parse_rfc3339(const char *s, int64_t *ms, char *err, size_t errlen)
{
    int Y, M, D, h, m, sec, frac_ms = 0, off_min = 0;
    const char *p;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    if (strlen(s) < 20 || task_digits(s, 4, &Y) || s[4] != '-' ||
        task_digits(s + 5, 2, &M) || s[7] != '-' || task_digits(s + 8, 2, &D) ||
        (s[10] != 'T' && s[10] != 't') || task_digits(s + 11, 2, &h) ||
        s[13] != ':' || task_digits(s + 14, 2, &m) || s[16] != ':' ||
        task_digits(s + 17, 2, &sec))
        FAIL("not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z)");
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 || sec > 60)
        FAIL("not a valid date and time");
    if (M == 2 && D == 29 && !((Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0))
        FAIL("not a valid date and time");
    p = s + 19;
    if (*p == '.') {
        int n = 0, scale = 100;
        for (p++; isdigit((unsigned char)*p); p++, n++) {
            frac_ms += (*p - '0') * scale;
            scale /= 10;
        }
        if (n == 0) FAIL("not an RFC 3339 timestamp (empty fraction)");
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (task_digits(p + 1, 2, &oh) || p[3] != ':' || task_digits(p + 4, 2, &om) ||
            oh > 23 || om > 59)
            FAIL("not an RFC 3339 timestamp (bad offset)");
        off_min = (oh * 60 + om) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        FAIL("not an RFC 3339 timestamp (missing Z or offset)");
    }
    if (*p) FAIL("not an RFC 3339 timestamp (trailing characters)");
    if (sec == 60) sec = 59; /* a leap second is held on :59 */
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D,
                    .tm_hour = h, .tm_min = m, .tm_sec = sec};
    int64_t t = ((int64_t)timegm(&tm) - (int64_t)off_min * 60) * 1000 + frac_ms;
    /* an offset can carry a time of year 0000 or 9999 out of the bounds */
    if (t < 0) FAIL("before 1970");
    if (t > TASK_TIME_MAX_MS) FAIL("after " TASK_TIME_MAX_TEXT);
    *ms = t;
    return 0;
fail:
    return -1;
}

int task_json_time(const cJSON *v, const char *name, int64_t *ms, char *err, size_t errlen)
{
    char why[160];
    if (cJSON_IsString(v)) {
        if (task_parse_rfc3339(v->valuestring, ms, why, sizeof(why)) != 0) FAIL("%s: %s", name, why);
    } else if (task_json_int(v, 0, TASK_TIME_MAX_MS, ms) != 0) {
        FAIL("%s: must be integer Unix milliseconds from 0 to %lld or an RFC 3339 timestamp up "
             "to " TASK_TIME_MAX_TEXT, name, (long long)TASK_TIME_MAX_MS);
    }
    return 0;
fail:
    return -1;
}

int task_text_time(const char *s, const char *name, int64_t *ms, char *err, size_t errlen)
{
    size_t digits = strspn(s, "0123456789");
    if (digits && !s[digits]) {
        /* at most the digits of TASK_TIME_MAX_MS, so that no value wraps */
        int64_t x = 0;
        for (size_t i = 0; i < digits && x <= TASK_TIME_MAX_MS; i++) x = x * 10 + (s[i] - '0');
        if (x > TASK_TIME_MAX_MS)
            FAIL("%s: must be Unix milliseconds from 0 to %lld or an RFC 3339 timestamp up to "
                 TASK_TIME_MAX_TEXT, name, (long long)TASK_TIME_MAX_MS);
        *ms = x;
        return 0;
    }
    char why[160];
    if (task_parse_rfc3339(s, ms, why, sizeof(why)) != 0)
        FAIL("%s: must be Unix milliseconds or an RFC 3339 timestamp: %s", name, why);
    return 0;
fail:
    return -1;
}

int64_t task_home_ms(int64_t execute_at_ms, int64_t now_ms, int64_t grace_ms)
{
    int64_t end = (execute_at_ms / 60000 + 1) * 60000;
    /* 1 s of the half grace is kept for the request's way to Redis */
    if (execute_at_ms >= now_ms || end + grace_ms / 2 > now_ms + 1000) return execute_at_ms;
    return now_ms;
}

int64_t task_backoff_ms(int64_t backoff_ms, int attempt, double jitter01)
{
    int64_t d = backoff_ms;
    for (int i = 1; i < attempt && d < TASK_BACKOFF_CAP_MS; i++) d *= 2;
    if (d > TASK_BACKOFF_CAP_MS) d = TASK_BACKOFF_CAP_MS;
    int64_t cut = (int64_t)((double)d * 0.2 * jitter01);
    return d - cut < 1 ? 1 : d - cut;
}

int task_json_num(const cJSON *v, double min, double max, int integer, double *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!isfinite(d) || d < min || d > max) return -1;
    if (integer) {
        /* past 2^53 a double skips integers: 2^53 + 1 would read as 2^53 */
        if (d != floor(d) || fabs(d) >= 9007199254740992.0) return -1;
    } else {
        /* Lua's cjson writes 14 significant digits: more would change */
        char s[32];
        snprintf(s, sizeof(s), "%.14g", d);
        if (strtod(s, NULL) != d) return -1;
    }
    *out = d;
    return 0;
}

int task_json_int(const cJSON *v, int64_t min, int64_t max, int64_t *out)
{
    double d;
    if (task_json_num(v, (double)min, (double)max, 1, &d) != 0) return -1;
    *out = (int64_t)d;
    return 0;
}

/* RFC 9110 token characters. */
static int task_tchar(int c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static task_url_check_fn *task_url_check;
static void *task_url_check_priv;

/* URLs accepted lately: a URL's check is a function of its text and the
 * check set (the destination policy reads no DNS at this point: flow.h),
 * and producers send the same few callback URLs again and again, so an
 * accepted one is not parsed by libcurl each time (a fifth of a POST's
 * instructions). Direct-mapped by hash, whole text compared, per thread;
 * emptied when the check changes. At most TASK_URL_SEEN URLs of at most
 * TASK_URL_MAX bytes. */
#define TASK_URL_SEEN 64
static _Thread_local struct {
    unsigned gen;
    char *url;
} task_url_seen[TASK_URL_SEEN];
static unsigned task_url_gen = 1;

static unsigned task_url_slot(const char *url)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)url; *p; p++) h = (h ^ *p) * 16777619u;
    return h % TASK_URL_SEEN;
}

void task_set_url_check(task_url_check_fn *fn, void *priv)
{
    task_url_check = fn;
    task_url_check_priv = priv;
    task_url_gen++;
}

static int task_check_url_parse(const char *url, char *err, size_t errlen);

static int task_check_url(const char *url, char *err, size_t errlen)
{
    unsigned slot = task_url_slot(url);
    if (task_url_seen[slot].gen == task_url_gen && strcmp(task_url_seen[slot].url, url) == 0)
        return 0;
    if (task_check_url_parse(url, err, errlen) != 0) return -1;
    free(task_url_seen[slot].url);
    task_url_seen[slot].url = xstrdup(url);
    task_url_seen[slot].gen = task_url_gen;
    return 0;
}

static int task_check_url_parse(const char *url, char *err, size_t errlen)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, why[200];
    int rc = -1;
    if (!u) FAIL("callback_url: out of memory");
    if (strlen(url) > TASK_URL_MAX) FAIL("callback_url: longer than %d bytes", TASK_URL_MAX);
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        FAIL("callback_url: must be an absolute http:// or https:// URL");
    if (url[strncasecmp(url, "http://", 7) == 0 ? 7 : 8] == '/')
        FAIL("callback_url: no host");
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host)
        FAIL("callback_url: not a valid URL");
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) FAIL("callback_url: contains whitespace or control characters");
    if (task_url_check && curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
        task_url_check(task_url_check_priv, host, atoi(port), why, sizeof(why)) != 0)
        FAIL("callback_url: %s", why);
    rc = 0;
fail:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    if (u) curl_url_cleanup(u);
    return rc;
}

static int task_check_header(const cJSON *h, char *err, size_t errlen)
{
    static const char *reserved[] = {"tickd-task-id", "tickd-attempt", "tickd-scheduled-at",
                                     "tickd-event", "content-length", "transfer-encoding",
                                     "connection", "webhook-id", "webhook-timestamp", "webhook-signature",
                                     "traceparent", "tracestate"};
    int n = 0;
    if (!cJSON_IsObject(h)) FAIL("header: must be an object of string values");
    for (const cJSON *e = h->child; e; e = e->next, n++) {
        const char *name = e->string;
        if (n >= 100) FAIL("header: more than 100 headers");
        if (!*name || strlen(name) > 256) FAIL("header: a name must be 1..256 characters");
        for (const char *p = name; *p; p++)
            if (!task_tchar((unsigned char)*p)) FAIL("header.%s: name is not an HTTP token", name);
        for (size_t i = 0; i < sizeof(reserved) / sizeof(*reserved); i++)
            if (strcasecmp(name, reserved[i]) == 0) FAIL("header.%s: set by tickd, not allowed", name);
        if (!cJSON_IsString(e)) FAIL("header.%s: value must be a string", name);
        if (strlen(e->valuestring) > 8192) FAIL("header.%s: value longer than 8192 bytes", name);
        /* a field value is VCHAR, obs-text, SP and HTAB (RFC 9110 5.5) */
        for (const char *p = e->valuestring; *p; p++) {
            unsigned char ch = (unsigned char)*p;
            if (ch == '\r' || ch == '\n') FAIL("header.%s: value contains CR or LF", name);
            if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
                FAIL("header.%s: value contains the control character 0x%02x (only HTAB is allowed)",
                     name, ch);
        }
        for (const cJSON *d = h->child; d != e; d = d->next)
            if (strcmp(d->string, name) == 0) FAIL("header.%s: given more than once", name);
    }
    return 0;
fail:
    return -1;
}

/* A number of req that the stored JSON would change: cJSON reads 1e400 as
 * inf and writes it as null, and writes a number in 15 digits when those
 * come within a rounding error of it (0.30000000000000004 becomes 0.3). 1 and
 * its path in `path` if one is found. */
static int task_lossy_number(const cJSON *v, char *path, size_t len, size_t cap, int depth)
{
    if (cJSON_IsNumber(v)) {
        char *s = cJSON_PrintUnformatted(v);
        log_assert(s); /* out of memory */
        int lossy = !isfinite(v->valuedouble) || strtod(s, NULL) != v->valuedouble;
        free(s);
        return lossy;
    }
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return 0;
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        int n = cJSON_IsArray(v) ? snprintf(path + len, cap - len, "[%d]", i)
                                 : snprintf(path + len, cap - len, ".%s", e->string);
        size_t sub = len + (size_t)n < cap ? len + (size_t)n : cap - 1;
        if (depth < CJSON_NESTING_LIMIT && task_lossy_number(e, path, sub, cap, depth + 1))
            return 1;
        path[len] = '\0';
    }
    return 0;
}

/* ---- the stored spec ---- */

typedef struct task_buf {
    char *p;
    size_t len, cap;
} task_buf;

static void task_buf_grow(task_buf *b, size_t n)
{
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

/* inline: a task's spec and record are some twenty pieces each */
static inline void task_buf_add(task_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) task_buf_grow(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void task_buf_int(task_buf *b, long long v)
{
    if (b->len + UTIL_INT_MAX > b->cap) task_buf_grow(b, UTIL_INT_MAX);
    b->len += (size_t)util_fmt_int(b->p + b->len, v);
}

/* s as a JSON string literal. */
static void task_buf_str(task_buf *b, const char *s)
{
    task_buf_add(b, "\"", 1);
    for (const char *run = s;; s++) {
        unsigned char ch = (unsigned char)*s;
        /* past the backslash (letters, most of a URL) nothing is escaped */
        if (ch > '\\' || (ch >= 0x20 && ch != '"' && ch != '\\')) continue;
        task_buf_add(b, run, (size_t)(s - run));
        if (!ch) break;
        char esc[8];
        if (ch == '"' || ch == '\\') snprintf(esc, sizeof(esc), "\\%c", ch);
        else snprintf(esc, sizeof(esc), "\\u%04x", ch);
        task_buf_add(b, esc, strlen(esc));
        run = s + 1;
    }
    task_buf_add(b, "\"", 1);
}

/* s, which needs no escaping (a key, a queue, a method: checked to be of
 * letters, digits and . _ : -), as a JSON string literal. */
static void task_buf_word(task_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 3 > b->cap) task_buf_grow(b, n + 2);
    b->p[b->len] = '"';
    memcpy(b->p + b->len + 1, s, n);
    b->p[b->len + 1 + n] = '"';
    b->len += n + 2;
    b->p[b->len] = '\0';
}

static char *task_print(const cJSON *v)
{
    char *s = cJSON_PrintUnformatted(v);
    log_assert(s); /* out of memory */
    return s;
}

static void task_buf_json(task_buf *b, const cJSON *v)
{
    char *s = task_print(v);
    task_buf_add(b, s, strlen(s));
    free(s);
}

/* "name":json after the members of an object being written (its '{' last
 * when there are none yet) */
static void task_buf_member(task_buf *b, const char *name, const char *json, size_t len)
{
    if (b->p[b->len - 1] != '{') task_buf_add(b, ",", 1);
    task_buf_add(b, "\"", 1);
    task_buf_add(b, name, strlen(name));
    task_buf_add(b, "\":", 2);
    task_buf_add(b, json, len);
}

/* The call obj describes (a task, or its on_failure), validated:
 * "callback_url":...,"method":...[,"header":{...}] */
static void task_buf_call(task_buf *b, const cJSON *obj, const char *method)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(obj, "header");
    task_buf_add(b, "\"callback_url\":", 15);
    task_buf_str(b, cJSON_GetObjectItemCaseSensitive(obj, "callback_url")->valuestring);
    task_buf_add(b, ",\"method\":", 10);
    task_buf_word(b, method);
    if (h) {
        task_buf_add(b, ",\"header\":", 10);
        task_buf_json(b, h);
    }
}

int task_find_fields(const cJSON *obj, const char *const *fields, size_t n,
                     const cJSON **found, char *err, size_t errlen)
{
    memset(found, 0, n * sizeof(*found));
    for (const cJSON *e = obj->child; e; e = e->next) {
        size_t i = 0;
        while (i < n && (e->string[0] != fields[i][0] || strcmp(e->string, fields[i]) != 0)) i++;
        if (i == n) FAIL("%.100s: unknown field", e->string);
        /* cJSON keeps both and reads the first: ambiguous, so refused */
        if (found[i]) FAIL("%.100s: given more than once", e->string);
        found[i] = e;
    }
    return 0;
fail:
    return -1;
}

int task_check_fields(const cJSON *obj, const char *const *fields, size_t n, char *err,
                      size_t errlen)
{
    const cJSON *found[TASK_FIELDS_MAX];
    log_assert(n <= TASK_FIELDS_MAX);
    return task_find_fields(obj, fields, n, found, err, errlen);
}

/* The method a task (or its on_failure) names, or NULL + err. */
static const char *task_method(const cJSON *v, char *err, size_t errlen)
{
    static const char *methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
    size_t i = 0;
    if (!cJSON_IsString(v)) FAIL("method: must be a string");
    while (i < 5 && strcmp(v->valuestring, methods[i]) != 0) i++;
    if (i == 5) FAIL("method: must be one of GET, POST, PUT, PATCH, DELETE");
    return methods[i];
fail:
    return NULL;
}

int task_url_valid(const char *url, char *err, size_t errlen)
{
    return task_check_url(url, err, errlen);
}

/* on_failure: {"callback_url", "method", "header"}, each checked as a task's
 * own, errors named "on_failure.<field>: ...". */
static int task_on_failure_check(const cJSON *o, const char **method, char *err, size_t errlen)
{
    static const char *fields[] = {"callback_url", "method", "header"};
    char why[400];
    const cJSON *v;
    if (!cJSON_IsObject(o)) FAIL("on_failure: must be an object with callback_url, method, header");
    if (task_check_fields(o, fields, 3, why, sizeof(why)) != 0) FAIL("on_failure.%s", why);
    v = cJSON_GetObjectItemCaseSensitive(o, "callback_url");
    if (!v) FAIL("on_failure.callback_url: required");
    if (!cJSON_IsString(v)) FAIL("on_failure.callback_url: must be a string");
    if (task_check_url(v->valuestring, why, sizeof(why)) != 0) FAIL("on_failure.%s", why);
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "method")) &&
        !(*method = task_method(v, why, sizeof(why))))
        FAIL("on_failure.%s", why);
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "header")) &&
        task_check_header(v, why, sizeof(why)) != 0)
        FAIL("on_failure.%s", why);
    return 0;
fail:
    return -1;
}

/* A task from the API (made 0: its key is a user's) or one tickd makes. */
static int task_input_read(const cJSON *obj, int64_t now_ms, int made, task_input *out,
                           char *err, size_t errlen)
{
    static const char *fields[] = {"key", "callback_url", "method", "header", "req",
                                   "execute_at", "delay_ms", "retry", "timeout_ms",
                                   "on_failure", "queue", "traceparent", "tracestate",
                                   "expires_at", "ttl_ms"};
    enum { F_KEY, F_URL, F_METHOD, F_HEADER, F_REQ, F_EXECUTE_AT, F_DELAY, F_RETRY, F_TIMEOUT,
           F_ON_FAILURE, F_QUEUE, F_TRACEPARENT, F_TRACESTATE, F_EXPIRES_AT, F_TTL, F_N };
    /* each member once, by the fields' order (what cJSON's lookup by name
     * would find: a name given twice is refused) */
    const cJSON *f[F_N];
    const cJSON *v;
    const char *method = "POST", *queue = NULL;
    int64_t max_attempts = TASK_DEFAULT_ATTEMPTS, backoff_ms = TASK_DEFAULT_BACKOFF_MS;
    int64_t timeout_ms = TASK_DEFAULT_TIMEOUT_MS, at;

    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(obj)) FAIL("task: must be a JSON object");
    if (task_find_fields(obj, fields, F_N, f, err, errlen) != 0) goto fail;

    if ((v = f[F_KEY])) {
        if (!cJSON_IsString(v) || !task_key_valid(v->valuestring))
            FAIL("key: must be 1-200 characters of A-Z a-z 0-9 . _ : -");
        const char *what, *pre = made ? NULL : task_key_reserved(v->valuestring, &what);
        if (pre) FAIL("key: must not start with \"%s\" (reserved for %s)", pre, what);
        strcpy(out->key, v->valuestring);
    } else {
        task_key_random(out->key);
        out->key_generated = 1;
    }

    v = f[F_URL];
    if (!v) FAIL("callback_url: required");
    if (!cJSON_IsString(v)) FAIL("callback_url: must be a string");
    if (task_check_url(v->valuestring, err, errlen) != 0) goto fail;

    if ((v = f[F_METHOD]) &&
        !(method = task_method(v, err, errlen)))
        goto fail;

    if ((v = f[F_HEADER]) &&
        task_check_header(v, err, errlen) != 0)
        goto fail;

    const cJSON *ea = f[F_EXECUTE_AT];
    const cJSON *dl = f[F_DELAY];
    if (ea && dl) FAIL("execute_at: give execute_at or delay_ms, not both");
    at = now_ms;
    char why[160];
    if (ea) {
        if (task_json_time(ea, "execute_at", &at, err, errlen) != 0) goto fail;
    } else if (dl) {
        int64_t d;
        if (task_json_int(dl, 0, TASK_MAX_AHEAD_MS, &d) != 0)
            FAIL("delay_ms: must be an integer from 0 to %lld", (long long)TASK_MAX_AHEAD_MS);
        at = now_ms + d;
    }
    if (at > now_ms + TASK_MAX_AHEAD_MS) FAIL("execute_at: more than ten years ahead");
    if (at > TASK_TIME_MAX_MS) FAIL("execute_at: after " TASK_TIME_MAX_TEXT);

    if ((v = f[F_RETRY])) {
        const cJSON *r;
        if (!cJSON_IsObject(v)) FAIL("retry: must be an object");
        for (r = v->child; r; r = r->next) {
            if (strcmp(r->string, "max_attempts") != 0 && strcmp(r->string, "backoff_ms") != 0)
                FAIL("retry.%.100s: unknown field", r->string);
            for (const cJSON *d = v->child; d != r; d = d->next)
                if (strcmp(d->string, r->string) == 0)
                    FAIL("retry.%s: given more than once", r->string);
        }
        if ((r = cJSON_GetObjectItemCaseSensitive(v, "max_attempts")) &&
            task_json_int(r, 1, 100, &max_attempts) != 0)
            FAIL("retry.max_attempts: must be an integer from 1 to 100");
        if ((r = cJSON_GetObjectItemCaseSensitive(v, "backoff_ms")) &&
            task_json_int(r, 1, 86400000, &backoff_ms) != 0)
            FAIL("retry.backoff_ms: must be an integer from 1 to 86400000");
    }
    if ((v = f[F_TIMEOUT]) &&
        task_json_int(v, 1, 300000, &timeout_ms) != 0)
        FAIL("timeout_ms: must be an integer from 1 to 300000");
    if ((v = f[F_QUEUE])) {
        if (!cJSON_IsString(v) || !task_queue_valid(v->valuestring))
            FAIL("queue: must be 1-%d characters of A-Z a-z 0-9 . _ -", TASK_QUEUE_MAX - 1);
        /* the default queue is not written: a task without one is in it */
        if (strcmp(v->valuestring, TASK_QUEUE_DEFAULT) != 0) queue = v->valuestring;
    }
    if (queue) snprintf(out->queue, sizeof(out->queue), "%s", queue);
    const cJSON *onf = f[F_ON_FAILURE];
    const char *onf_method = "POST";
    if (onf && task_on_failure_check(onf, &onf_method, err, errlen) != 0) goto fail;
    /* expiry: no attempt begins after it; after execute_at, so that one can */
    int64_t expires = -1;
    const cJSON *ex = f[F_EXPIRES_AT];
    const cJSON *ttl = f[F_TTL];
    if (ex && ttl) FAIL("expires_at: give expires_at or ttl_ms, not both");
    if (ex) {
        if (task_json_time(ex, "expires_at", &expires, err, errlen) != 0) goto fail;
        if (expires <= at) FAIL("expires_at: must be after execute_at (%lld)", (long long)at);
        /* one the API is given already past would only ever expire; a run a
         * schedule makes late does, and says so */
        if (!made && expires <= now_ms) FAIL("expires_at: already past (now is %lld)",
                                             (long long)now_ms);
    } else if (ttl) {
        int64_t d;
        if (task_json_int(ttl, 1, TASK_MAX_AHEAD_MS, &d) != 0)
            FAIL("ttl_ms: must be an integer from 1 to %lld", (long long)TASK_MAX_AHEAD_MS);
        expires = at + d;
        if (expires > TASK_TIME_MAX_MS) FAIL("ttl_ms: ends after " TASK_TIME_MAX_TEXT);
        if (!made && expires <= now_ms)
            FAIL("ttl_ms: the task would have expired already (execute_at + ttl_ms is before "
                 "now)");
    }
    char tparent[TRACE_PARENT_LEN + 1] = "";
    const cJSON *tstate = f[F_TRACESTATE];
    if ((v = f[F_TRACEPARENT])) {
        if (!cJSON_IsString(v)) FAIL("traceparent: must be a string");
        if (trace_parent_parse(v->valuestring, tparent, why, sizeof(why)) != 0)
            FAIL("traceparent: %s", why);
    }
    if (tstate) {
        if (!tparent[0]) FAIL("tracestate: needs traceparent");
        if (!cJSON_IsString(tstate)) FAIL("tracestate: must be a string");
        if (trace_state_check(tstate->valuestring, why, sizeof(why)) != 0)
            FAIL("tracestate: %s", why);
    }
    char path[TASK_PATH_MAX] = "req";
    if ((v = f[F_REQ]) &&
        task_lossy_number(v, path, 3, sizeof(path), 0))
        FAIL("%s: a number that would not be stored exactly (out of range, or more "
             "digits than a double holds)", path);

    /* The record (task.h): what the id holds and the defaults left out,
     * every other part as given, validated. The spec (every default made
     * explicit, so that a later change of defaults never changes a task
     * already scheduled) is read back from it where one is wanted
     * (task_input_spec): a store keeps the record, and the ingest's hot path
     * writes one form, not two. */
    task_buf r = {0}, onfb = {0};
    char *hdr = NULL, *req = NULL;
    if ((v = f[F_HEADER])) hdr = task_print(v);
    if ((v = f[F_REQ])) req = task_print(v);
    if (onf) {
        /* as sent, its method made explicit */
        task_buf_add(&onfb, "{", 1);
        task_buf_call(&onfb, onf, onf_method);
        task_buf_add(&onfb, "}", 1);
    }

    task_buf_str(&r, f[F_URL]->valuestring);
    task_buf_add(&r, "\n", 1);
    if (strcmp(method, "POST") != 0) task_buf_add(&r, method, strlen(method));
    task_buf_add(&r, "\n", 1);
    /* numbers written without a format: this is the ingest's hot path */
    task_buf_int(&r, timeout_ms);
    task_buf_add(&r, "\n", 1);
    if (queue) task_buf_add(&r, queue, strlen(queue));
    task_buf_add(&r, "\n", 1);
    if (max_attempts != TASK_DEFAULT_ATTEMPTS || backoff_ms != TASK_DEFAULT_BACKOFF_MS) {
        task_buf_int(&r, max_attempts);
        task_buf_add(&r, ",", 1);
        task_buf_int(&r, backoff_ms);
    }
    task_buf_add(&r, "\n{", 2);
    if (hdr) task_buf_member(&r, "header", hdr, strlen(hdr));
    if (req) task_buf_member(&r, "req", req, strlen(req));
    if (onf) task_buf_member(&r, "on_failure", onfb.p, onfb.len);
    task_buf_add(&r, "}", 1);
    free(hdr);
    free(req);
    free(onfb.p);
    out->rec = r.p;
    out->execute_at_ms = at;
    out->due_ms = at > now_ms ? at : now_ms;
    out->timeout_ms = timeout_ms;
    out->max_attempts = (int)max_attempts;
    if (expires >= 0) {
        char num[UTIL_INT_MAX];
        task_input_add_json(out, "expires_at", num, (size_t)util_fmt_int(num, expires));
    }
    if (tparent[0]) task_input_add_member(out, "traceparent", tparent);
    if (tstate) task_input_add_member(out, "tracestate", tstate->valuestring);
    return 0;
fail:
    memset(out, 0, sizeof(*out));
    return -1;
}

int task_input_parse(const cJSON *obj, int64_t now_ms, task_input *out, char *err,
                     size_t errlen)
{
    return task_input_read(obj, now_ms, 0, out, err, errlen);
}

int task_input_parse_made(const cJSON *obj, int64_t now_ms, task_input *out, char *err,
                          size_t errlen)
{
    return task_input_read(obj, now_ms, 1, out, err, errlen);
}

int64_t task_spec_expires_ms(const char *spec)
{
    /* most specs have none: found without a parse */
    if (!spec || !strstr(spec, "\"expires_at\":")) return 0;
    cJSON *o = cJSON_Parse(spec);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "expires_at");
    int64_t ms = cJSON_IsNumber(e) && e->valuedouble > 0 ? (int64_t)e->valuedouble : 0;
    cJSON_Delete(o);
    return ms;
}

int task_input_add_json(task_input *t, const char *name, const char *json, size_t n)
{
    size_t len = strlen(t->rec);
    task_buf b = {t->rec, len - 1, len + 1};   /* its last '}' dropped */
    b.p[b.len] = '\0';
    task_buf_member(&b, name, json, n);
    task_buf_add(&b, "}", 1);
    t->rec = b.p;
    return 0;
}

int task_input_add_member(task_input *t, const char *name, const char *str)
{
    task_buf m = {0};
    task_buf_str(&m, str);
    task_input_add_json(t, name, m.p, m.len);
    free(m.p);
    return 0;
}

/* 1 if s[0..n) is min..max characters, each one of `set` */
static int task_rec_chars(const char *s, size_t n, size_t min, size_t max, const char *set)
{
    if (n < min || n > max) return 0;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(set, s[i])) return 0;
    return 1;
}

int task_rec_split(const char *rec, size_t len, const char *part[TASK_REC_PARTS],
                   size_t plen[TASK_REC_PARTS])
{
    const char *p = rec, *end = rec + len;
    for (int i = 0; i < TASK_REC_PARTS; i++) {
        const char *nl = i < TASK_REC_PARTS - 1 ? memchr(p, '\n', (size_t)(end - p)) : end;
        if (!nl) return -1;
        part[i] = p;
        plen[i] = (size_t)(nl - p);
        p = nl + 1;
    }
    /* url literal, method, timeout, queue, retry ("a,b" or ""), the rest:
     * each of the plain parts only of the characters it may hold, so that
     * what is pasted into a spec is JSON */
    if (plen[0] < 2 || part[0][0] != '"' || part[0][plen[0] - 1] != '"' || plen[5] < 2 ||
        part[5][0] != '{' || part[5][plen[5] - 1] != '}' ||
        !task_rec_chars(part[1], plen[1], 0, 7, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") ||
        !task_rec_chars(part[2], plen[2], 1, 9, "0123456789") ||
        !task_rec_chars(part[3], plen[3], 0, TASK_QUEUE_MAX - 1,
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ||
        !task_rec_chars(part[4], plen[4], 0, 21, "0123456789,"))
        return -1;
    return 0;
}

int task_rec_retry(const char *s, size_t n, long long *attempts, long long *backoff_ms)
{
    char buf[24], tail;
    *attempts = TASK_DEFAULT_ATTEMPTS;
    *backoff_ms = TASK_DEFAULT_BACKOFF_MS;
    if (!n) return 0;
    if (n >= sizeof(buf)) return -1;
    memcpy(buf, s, n);
    buf[n] = '\n';
    buf[n + 1] = '\0';
    return sscanf(buf, "%9lld,%9lld%c", attempts, backoff_ms, &tail) == 3 && tail == '\n' ? 0 : -1;
}

/* The spec of the record rec[0..len) of the task of key, due at at. */
static char *task_rec_spec_of(const char *rec, size_t len, const char *key, int64_t at)
{
    const char *part[TASK_REC_PARTS];
    size_t plen[TASK_REC_PARTS];
    long long a, bo;
    if (task_rec_split(rec, len, part, plen) != 0 || task_rec_retry(part[4], plen[4], &a, &bo) != 0)
        return NULL;
    task_buf b = {0};
    char num[160];
    task_buf_add(&b, "{\"key\":", 7);
    task_buf_str(&b, key);
    task_buf_add(&b, ",\"callback_url\":", 16);
    task_buf_add(&b, part[0], plen[0]);
    task_buf_add(&b, ",\"method\":\"", 11);
    task_buf_add(&b, plen[1] ? part[1] : "POST", plen[1] ? plen[1] : 4);
    task_buf_add(&b, "\"", 1);
    if (plen[5] > 2) {
        task_buf_add(&b, ",", 1);
        task_buf_add(&b, part[5] + 1, plen[5] - 2);
    }
    int n = snprintf(num, sizeof(num),
                     ",\"execute_at\":%lld,\"retry\":{\"max_attempts\":%lld,\"backoff_ms\":%lld},"
                     "\"timeout_ms\":%.*s",
                     (long long)at, a, bo, (int)(plen[2] < 20 ? plen[2] : 20), part[2]);
    task_buf_add(&b, num, (size_t)n);
    if (plen[3]) {
        task_buf_add(&b, ",\"queue\":\"", 10);
        task_buf_add(&b, part[3], plen[3]);
        task_buf_add(&b, "\"", 1);
    }
    task_buf_add(&b, "}", 1);
    return b.p;
}

char *task_rec_spec(const char *rec, size_t len, const char *id)
{
    char slice[TASK_SLICE_MAX], key[TASK_KEY_MAX + 1];
    int64_t at;
    if (len && rec[0] == '{') return xstrndup(rec, len); /* a spec, as stored before */
    if (task_id_parse(id, slice, &at, key) != 0) return NULL;
    return task_rec_spec_of(rec, len, key, at);
}

char *task_input_spec(const task_input *t)
{
    char *s = task_rec_spec_of(t->rec, strlen(t->rec), t->key, t->execute_at_ms);
    log_assert(s); /* task_input_read writes a record task_rec_split reads */
    return s;
}

void task_input_free(task_input *t)
{
    free(t->rec);
    t->rec = NULL;
}

/* ---- URLs shown outside ---- */

static void task_redact_member(cJSON *o, const char *name)
{
    cJSON *u = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(u)) return;
    char *r = util_url_redact(u->valuestring);
    cJSON_ReplaceItemInObjectCaseSensitive(o, name, cJSON_CreateString(r));
    free(r);
}

void task_redact_urls(cJSON *task)
{
    task_redact_member(task, "callback_url");
    task_redact_member(cJSON_GetObjectItemCaseSensitive(task, "on_failure"), "callback_url");
}

/* ---- NULs, invalid UTF-8 and numbers not held in the JSON text ---- */

typedef struct task_scan {
    const char *p, *end;
    char path[TASK_PATH_MAX];
    size_t plen;            /* the path is cut at TASK_PATH_MAX - 1 bytes */
    int want;               /* TASK_SCAN_NUL, TASK_SCAN_UTF8: what is found */
    task_nul_fn *fn;        /* a string holding what is wanted */
    task_nul_fn *numfn;     /* a number cJSON does not hold (NULL: not looked for) */
    void *priv;
    size_t found;
    int stop;
    unsigned char bad_byte; /* the first byte starting no UTF-8 sequence, */
    size_t bad_at;          /* at this offset of the string (last found) */
} task_scan;

#define TASK_SCAN_NUL 1
#define TASK_SCAN_UTF8 2

static void task_scan_path(task_scan *sc, const char *s, size_t n)
{
    size_t room = sizeof(sc->path) - 1 - sc->plen;
    if (n > room) n = room;
    memcpy(sc->path + sc->plen, s, n);
    sc->plen += n;
    sc->path[sc->plen] = '\0';
}

static void task_scan_ws(task_scan *sc)
{
    while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\r' || *sc->p == '\n'))
        sc->p++;
}

static void task_scan_found(task_scan *sc)
{
    sc->found++;
    if (sc->fn(sc->path, sc->priv)) sc->stop = 1;
}

/* 1 when c ends a token (strchr(" \t\r\n,:]}\"{[", c), NUL included) */
static int task_scan_delim(char c)
{
    switch (c) {
    case ' ': case '\t': case '\r': case '\n': case ',': case ':': case ']': case '}': case '"':
    case '{': case '[': case '\0':
        return 1;
    default:
        return 0;
    }
}

/* 1 when the number token s[0..n) is read by strtod (as cJSON reads it) as
 * inf, or as 0 though a digit of its mantissa is not 0. */
static int task_number_lost(const char *s, size_t n)
{
    if (!n || (*s != '-' && !isdigit((unsigned char)*s))) return 0;
    /* a plain decimal (-?digits[.digits]) of fewer than 300 characters is
     * read as written, near enough: under 1e300, and at least 1e-300 unless
     * every digit is 0 (the ingest's numbers: no strtod for them) */
    size_t sign = *s == '-', ip = sign;
    while (ip < n && task_isdigit(s[ip])) ip++;
    if (ip > sign && n < 300) {
        if (ip == n) return 0;
        size_t fp = ip + 1;
        while (fp < n && task_isdigit(s[fp])) fp++;
        if (s[ip] == '.' && fp > ip + 1 && fp == n) return 0;
    }
    int nonzero = 0;
    for (size_t i = 0; i < n && s[i] != 'e' && s[i] != 'E'; i++)
        nonzero |= s[i] >= '1' && s[i] <= '9';
    char small[64], *buf = n < sizeof(small) ? small : xmalloc(n + 1);
    memcpy(buf, s, n);
    buf[n] = '\0';
    double d = strtod(buf, NULL);
    if (buf != small) free(buf);
    return isinf(d) || (d == 0 && nonzero);
}

/* The rest of a string, sc->p just past its opening quote: what of
 * TASK_SCAN_NUL and TASK_SCAN_UTF8 (bytes that are not UTF-8) it holds. A
 * member name (`name`) is added to the path as written, but for \" \\ and
 * \/ (so "X-A" shows as X-A, and a NUL as \u0000). */
static int task_scan_string(task_scan *sc, int name)
{
    int nul = 0;
    /* the next quote (end: none), and the next backslash and NUL before it
     * (the quote: none), each found by memchr and kept until passed, so
     * that each byte is searched once for each */
    const char *start = sc->p, *quote = NULL, *bs = NULL, *zero = NULL;
    while (sc->p < sc->end && *sc->p != '"') {
        /* a run of bytes that are neither a quote, an escape nor a NUL */
        const char *run = sc->p, *lim, *x;
        if (!quote || quote < run) quote = (x = memchr(run, '"', (size_t)(sc->end - run))) ? x : sc->end;
        if (!bs || bs < run) bs = (x = memchr(run, '\\', (size_t)(quote - run))) ? x : quote;
        if (!zero || zero < run) zero = (x = memchr(run, '\0', (size_t)(quote - run))) ? x : quote;
        lim = bs < zero ? bs : zero;
        sc->p = lim;
        if (name && sc->p > run) task_scan_path(sc, run, (size_t)(sc->p - run));
        if (sc->p >= sc->end || *sc->p == '"') break;
        const char *c = sc->p++;
        if (*c == '\\' && sc->p < sc->end) {
            char e = *sc->p++;
            if (e == 'u') {
                /* \\u0000 is a backslash and text: the pair was taken above */
                size_t hex = 0;
                while (hex < 4 && sc->p < sc->end && isxdigit((unsigned char)*sc->p)) sc->p++, hex++;
                if (hex == 4 && memcmp(sc->p - 4, "0000", 4) == 0) nul = 1;
                if (name) task_scan_path(sc, c, (size_t)(sc->p - c));
            } else if (name) {
                if (e == '"' || e == '\\' || e == '/') task_scan_path(sc, &e, 1);
                else task_scan_path(sc, c, 2);
            }
        } else if (*c == '\0') {
            nul = 1;
            if (name) task_scan_path(sc, "\\u0000", 6);
        } else if (name) {
            task_scan_path(sc, c, 1);
        }
    }
    /* escapes are ASCII: checking the raw bytes checks what cJSON decodes,
     * whose own \u escapes are refused when they are lone surrogates */
    size_t bad;
    int found = nul ? TASK_SCAN_NUL : 0;
    if ((sc->want & TASK_SCAN_UTF8) && !util_utf8_valid(start, (size_t)(sc->p - start), &bad)) {
        found |= TASK_SCAN_UTF8;
        sc->bad_byte = (unsigned char)start[bad];
        sc->bad_at = bad;
    }
    if (sc->p < sc->end) sc->p++;
    return found & sc->want;
}

/* One value at sc->p. Malformed text is walked over, one byte at least per
 * step, so any bytes end; cJSON has refused such a text anyway. */
static void task_scan_value(task_scan *sc, int depth)
{
    task_scan_ws(sc);
    if (sc->p >= sc->end || sc->stop) return;
    char open = *sc->p;
    if (open == '"') {
        sc->p++;
        if (task_scan_string(sc, 0)) task_scan_found(sc);
        return;
    }
    if (open != '{' && open != '[') {
        const char *tok = sc->p;
        while (sc->p < sc->end && !task_scan_delim(*sc->p)) sc->p++;
        if (sc->numfn && task_number_lost(tok, (size_t)(sc->p - tok))) {
            sc->found++;
            if (sc->numfn(sc->path, sc->priv)) sc->stop = 1;
        }
        return;
    }
    if (depth >= CJSON_NESTING_LIMIT) {  /* cJSON refuses deeper texts */
        sc->p = sc->end;
        return;
    }
    sc->p++;
    size_t base = sc->plen;
    for (int i = 0; !sc->stop;) {
        task_scan_ws(sc);
        if (sc->p >= sc->end) return;
        const char *at = sc->p;
        if (*sc->p == (open == '{' ? '}' : ']')) {
            sc->p++;
            return;
        }
        if (*sc->p == ',') {
            sc->p++;
            i++;
            continue;
        }
        if (open == '{') {
            if (*sc->p == '"') {
                sc->p++;
                if (base) task_scan_path(sc, ".", 1);
                if (task_scan_string(sc, 1)) task_scan_found(sc);
                task_scan_ws(sc);
                if (sc->p < sc->end && *sc->p == ':') sc->p++;
                task_scan_value(sc, depth + 1);
            }
        } else {
            char idx[16];
            task_scan_path(sc, idx, (size_t)snprintf(idx, sizeof(idx), "[%d]", i));
            task_scan_value(sc, depth + 1);
        }
        sc->plen = base;
        sc->path[base] = '\0';
        if (sc->p == at) sc->p++;
    }
}

/* Every value of the text, until a callback says stop. */
static void task_scan_all(task_scan *sc)
{
    while (sc->p < sc->end && !sc->stop) {
        const char *at = sc->p;
        task_scan_value(sc, 0);
        if (sc->p == at) sc->p++;
    }
}

size_t task_json_scan(const char *s, size_t len, task_nul_fn *nul, task_nul_fn *num, void *priv)
{
    task_scan sc = {.p = s, .end = s + len, .want = TASK_SCAN_NUL, .fn = nul, .numfn = num,
                    .priv = priv};
    task_scan_all(&sc);
    return sc.found;
}

size_t task_json_nuls(const char *s, size_t len, task_nul_fn *fn, void *priv)
{
    return task_json_scan(s, len, fn, NULL, priv);
}

typedef struct task_nul_err {
    char *err;
    size_t errlen;
} task_nul_err;

static int task_nul_first(const char *path, void *priv)
{
    task_nul_err *e = priv;
    snprintf(e->err, e->errlen, "%s: contains a NUL character (\\u0000)", *path ? path : "body");
    return 1;
}

static int task_number_first(const char *path, void *priv)
{
    task_nul_err *e = priv;
    snprintf(e->err, e->errlen, "%s: " TASK_NUMBER_LOST, *path ? path : "body");
    return 1;
}

static inline int task_number_char(char c)
{
    return task_isdigit((unsigned char)c) || c == '.' || c == '-';
}

int task_json_plain(const char *s, size_t len)
{
    if (memchr(s, '\\', len)) return 0;
    for (const char *e = "eE"; *e; e++)
        for (const char *p = s; (p = memchr(p, *e, len - (size_t)(p - s))); p++)
            if (p > s && (task_isdigit((unsigned char)p[-1]) || p[-1] == '.')) return 0;
    /* a number with no exponent is read as another only from 300
     * characters (task_number_lost): a run of 300 of - . and digits (in a
     * string too) says maybe. Such a run holds a multiple of 299: only the
     * runs at those bytes are measured. */
    for (size_t at = 0; at < len; at += 299) {
        size_t a = at, b = at;
        while (b < len && task_number_char(s[b])) b++;
        if (b == at) continue;
        while (a > 0 && task_number_char(s[a - 1])) a--;
        if (b - a >= 300) return 0;
    }
    return 1;
}

int task_json_check(const char *s, size_t len, char *err, size_t errlen)
{
    task_nul_err e = {err, errlen};
    return task_json_scan(s, len, task_nul_first, task_number_first, &e) ? -1 : 0;
}

typedef struct task_utf8_err {
    const task_scan *sc;
    char *err;
    size_t errlen;
} task_utf8_err;

static int task_utf8_first(const char *path, void *priv)
{
    task_utf8_err *e = priv;
    /* the path may quote the bad bytes: whoever prints err cleans it */
    snprintf(e->err, e->errlen, "%s: not valid UTF-8 (byte 0x%02X at byte %zu of the string)",
             *path ? path : "body", e->sc->bad_byte, e->sc->bad_at);
    return 1;
}

int task_json_check_utf8(const char *s, size_t len, char *err, size_t errlen)
{
    task_scan sc = {.p = s, .end = s + len, .want = TASK_SCAN_UTF8, .fn = task_utf8_first};
    task_utf8_err e = {&sc, err, errlen};
    sc.priv = &e;
    task_scan_all(&sc);
    return sc.found ? -1 : 0;
}
