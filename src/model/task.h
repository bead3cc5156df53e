/* task.h -- what a task is, independent of where it is stored: validation of
 * the API's task JSON, times, slice and id naming, retry backoff.
 *
 * Slices. A slice is one UTC minute x one bucket, named "YYYYMMDDHHMM.b".
 * The bucket of a task with a key is a hash of the key modulo the bucket
 * count (the store gives a task without one the bucket of its loop turn), so
 * a busy minute spreads over `buckets` slices (and, on a cluster, the nodes).
 *
 * Ids. "<slice>.<execute_at ms>.<key>": the task's home slice, the execute_at
 * the user asked for, and the key. Every character is URL-safe. The id names
 * the home slice, so GET and DELETE go straight to the right keys; the same
 * key and execute_at give the same id, which is what makes a re-POST
 * idempotent (see task_home_ms for an execute_at far in the past). */
#ifndef TICKD_TASK_H
#define TICKD_TASK_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define TASK_KEY_MAX 200
#define TASK_KEY_RANDOM_LEN 22 /* a key tickd makes: base62 characters */
#define TASK_URL_MAX 2048
#define TASK_SLICE_MAX 24   /* "YYYYMMDDHHMM.bbbb" + NUL, with room */
#define TASK_ID_MAX (TASK_SLICE_MAX + 24 + TASK_KEY_MAX)
#define TASK_MAX_AHEAD_MS (10LL * 366 * 86400 * 1000) /* ten years */
#define TASK_BACKOFF_CAP_MS (3600LL * 1000)

/* What a task that names no retry policy or timeout gets. */
#define TASK_DEFAULT_ATTEMPTS 5
#define TASK_DEFAULT_BACKOFF_MS 1000
#define TASK_DEFAULT_TIMEOUT_MS 10000

/* A validated task, ready to store. */
/* Queues (flow.h): a task names one, or is in the default queue. */
#define TASK_QUEUE_MAX 65
#define TASK_QUEUE_DEFAULT "default"

typedef struct task_input {
    char key[TASK_KEY_MAX + 1];
    int key_generated;      /* no key was given: key is random */
    int64_t execute_at_ms;  /* as asked (absolute), before clamping to now */
    int64_t due_ms;         /* max(execute_at_ms, now) */
    int64_t timeout_ms;
    int max_attempts;
    char *rec;              /* the task as a record (below), malloc'd;
                             * task_input_free; its spec: task_input_spec */
    char queue[TASK_QUEUE_MAX]; /* the queue it names ("" = the default) */
    int64_t home_now_ms;    /* 0: the store's clock picks the home slice
                             * (task_home_ms); else this clock does (a
                             * schedule's run: its claim's, so that the run
                             * made again gets the same id) */
} task_input;

/* A check of a callback URL's host (as libcurl's URL parser gives it) and
 * port beyond their syntax, set once at start: 0, or -1 with the reason in
 * why (task_input_parse answers "callback_url: <why>"). NULL: none. */
typedef int task_url_check_fn(void *priv, const char *host, int port, char *why, size_t whylen);
void task_set_url_check(task_url_check_fn *fn, void *priv);

/* A callback URL checked as a task's callback_url is (syntax, then the URL
 * check): 0, or -1 with "callback_url: reason" in err. */
int task_url_valid(const char *url, char *err, size_t errlen);

/* Validate one task object from the API at time now_ms and fill `out`.
 * Returns 0, or -1 with "field: reason" in err and nothing allocated. A key
 * with a reserved prefix (task_key_reserved) is refused. */
int task_input_parse(const cJSON *obj, int64_t now_ms, task_input *out,
                     char *err, size_t errlen);
/* The same for a task tickd makes itself (a schedule's run), whose key may
 * start with a reserved prefix: the prefix is there for it. */
int task_input_parse_made(const cJSON *obj, int64_t now_ms, task_input *out, char *err,
                          size_t errlen);
void task_input_free(task_input *t);

/* cJSON ends every string at a NUL, so a string holding "\u0000" (or a raw
 * 0 byte) would be stored cut short: the text is checked before it is
 * trusted. task_json_nuls calls fn for each string of the JSON text s[0..len)
 * -- member name or value, at any depth -- that holds a NUL, with its path
 * ("header.X-A", "tasks[2].req.a[0]"; a NUL in a name shows as \u0000) and
 * stops when fn returns nonzero. Safe on any bytes. Returns the count. */
#define TASK_PATH_MAX 256
typedef int task_nul_fn(const char *path, void *priv);
size_t task_json_nuls(const char *s, size_t len, task_nul_fn *fn, void *priv);

/* task_json_nuls, and num (NULL: none) called the same way for each number
 * written in the text that cJSON would store as another: one past a
 * double's range (1e400, read as inf) or one whose digits are not all zero
 * read as 0 (1e-400). Returns the count of both. */
size_t task_json_scan(const char *s, size_t len, task_nul_fn *nul, task_nul_fn *num, void *priv);

/* The first such string or number as an error: -1 with "path: contains a
 * NUL character (\u0000)" or "path: a number that would not be stored
 * exactly (...)" in err, or 0 when there is none. */
int task_json_check(const char *s, size_t len, char *err, size_t errlen);
/* 1 when s[0..len), a text cJSON takes whole (so with no raw NUL, and each
 * number of the form -?digits[.digits][e...]), can hold nothing
 * task_json_check finds: a NUL in a string needs a backslash (\u0000), a
 * number read as another an exponent (an 'e' or 'E' after a digit or a '.')
 * or 300 characters. A text with neither (no run of 300 of - . and digits),
 * as the ingest's are, one task or a batch, need not be scanned. 0 says
 * nothing. */
int task_json_plain(const char *s, size_t len);
#define TASK_NUMBER_LOST "a number that would not be stored exactly (too large for a double, " \
                         "or so small it would read as 0)"

/* The first string of the JSON text s[0..len) -- member name or value, at
 * any depth -- whose bytes are not UTF-8 (util_utf8_valid): -1 with "path:
 * not valid UTF-8 (byte 0xF8 at byte 3 of the string)" in err, or 0 when
 * every string is. Bytes outside strings are cJSON's to refuse. Safe on any
 * bytes. */
int task_json_check_utf8(const char *s, size_t len, char *err, size_t errlen);

/* The URLs of a task object (callback_url, on_failure.callback_url) as
 * util_url_redact shows them, in place: for a task that leaves tickd in an
 * event or a listing. */
void task_redact_urls(cJSON *task);

/* Numbers from outside: one bounded parser for every time and rate field.
 *
 * Times are Unix ms from 0 (1970) to TASK_TIME_MAX_MS, the last ms of the
 * year 9999: every such time has four year digits in RFC 3339 and is an
 * integer below 2^53, held exactly by a double (cJSON, Redis scores) and
 * written exactly by the Lua scripts (lua/lib.lua: json_exact). */
#define TASK_TIME_MAX_MS INT64_C(253402300799999) /* 9999-12-31T23:59:59.999Z */
#define TASK_TIME_MAX_TEXT "9999-12-31T23:59:59.999Z"

/* Parse an RFC 3339 timestamp ("2026-11-22T05:00:00.250Z", "...+02:00") to
 * Unix ms (digits past the ms dropped), in [0, TASK_TIME_MAX_MS]. Returns 0,
 * or -1 with the reason in err. */
int task_parse_rfc3339(const char *s, int64_t *ms, char *err, size_t errlen);

/* A time given in JSON: an integer number of Unix ms or an RFC 3339 string,
 * in [0, TASK_TIME_MAX_MS]. 0, or -1 with "name: reason" in err. */
int task_json_time(const cJSON *v, const char *name, int64_t *ms, char *err, size_t errlen);
/* The same given as text (a query parameter): Unix ms in digits, or RFC
 * 3339. */
int task_text_time(const char *s, const char *name, int64_t *ms, char *err, size_t errlen);

/* A JSON number in [min, max] that tickd holds exactly: finite; when
 * `integer`, an integer below 2^53 in magnitude; else one of at most 14
 * significant digits, which is what Redis's Lua JSON writes back. 0, else
 * -1 (the caller names the field and the bounds). */
int task_json_num(const cJSON *v, double min, double max, int integer, double *out);

/* Every member of obj is one of fields[0..n), once: 0, or -1 with
 * "name: unknown field" / "name: given more than once" in err. */
int task_check_fields(const cJSON *obj, const char *const *fields, size_t n, char *err,
                      size_t errlen);
/* The same, and found[0..n) each field's member (NULL: not given). n at most
 * TASK_FIELDS_MAX for task_check_fields. */
#define TASK_FIELDS_MAX 32
int task_find_fields(const cJSON *obj, const char *const *fields, size_t n,
                     const cJSON **found, char *err, size_t errlen);

/* task_json_num of an integer, into an int64_t. */
int task_json_int(const cJSON *v, int64_t min, int64_t max, int64_t *out);

/* Bucket of a key: FNV-1a 32 modulo buckets. */
int task_bucket(const char *key, int buckets);

/* Slice name of time ms and bucket b into out (TASK_SLICE_MAX bytes). */
void task_slice_name(int64_t ms, int bucket, char *out);

/* The bucket of a slice name (or of an id, which starts with one). */
int task_slice_bucket(const char *slice);

/* The minute number (ms / 60000) of a slice name, or -1 if malformed. */
int64_t task_slice_minute(const char *slice);

/* Records. The spec in the compact form a store keeps: what the id holds
 * (key, execute_at) and the default retry policy left out, six parts split
 * by newlines (no part holds one: JSON text here has none outside strings):
 *   callback_url as a JSON string literal \n method ("" = POST) \n
 *   timeout_ms \n queue ("" = the default) \n retry ("max_attempts,backoff_ms",
 *   "" = the default) \n a JSON object of the rest (header, req, on_failure,
 *   schedule_id; "{}" when none)
 * task_rec_spec gives the spec of task `id` back from its record (malloc'd;
 * members in another order than the spec had), a text starting with '{'
 * (a spec stored as it is) copied, or NULL when rec is neither. */
char *task_rec_spec(const char *rec, size_t len, const char *id);
/* A record's six parts (pointers into rec), each of the characters it may
 * hold: 0, or -1 when rec is not a record. */
#define TASK_REC_PARTS 6
int task_rec_split(const char *rec, size_t len, const char *part[TASK_REC_PARTS],
                   size_t plen[TASK_REC_PARTS]);
/* A record's retry part ("max_attempts,backoff_ms", or "" for the
 * defaults): 0, or -1 when malformed. */
int task_rec_retry(const char *s, size_t n, long long *attempts, long long *backoff_ms);

/* The expires_at (ms) of a stored spec, 0 when it has none. */
int64_t task_spec_expires_ms(const char *spec);

/* The spec of t (malloc'd): its record read back (task_rec_spec), every
 * default explicit. */
char *task_input_spec(const task_input *t);

/* A string member "name": str added to the record of t, and so to its spec
 * (a schedule's run names its schedule). Returns 0. */
int task_input_add_member(task_input *t, const char *name, const char *str);
/* The same with a JSON text json[0..n) as the value. */
int task_input_add_json(task_input *t, const char *name, const char *json, size_t n);

/* Build an id; split one. task_id_parse fills slice (TASK_SLICE_MAX), the
 * execute_at and the key (TASK_KEY_MAX + 1); returns 0 or -1 if malformed. */
void task_id_make(const char *slice, int64_t execute_at_ms, const char *key,
                  char *out, size_t outlen);
int task_id_parse(const char *id, char *slice, int64_t *execute_at_ms, char *key);
/* The execute_at an id holds, read without checking its slice or key (an id
 * claim.lua read the same way: lua/lib.lua id_at_text), or -1 when it holds
 * no digits there. */
int64_t task_id_at(const char *id);

/* 1 if s is a listing's cursor as next_cursor gives it (store.h),
 * "<slice>~<score>~<id>": a slice name as task_slice_name makes, an integer
 * score (ms) and a task id. Checked whole before a store's script takes the
 * parts as they are; one that passes fits STORE_CURSOR_MAX. */
int task_cursor_valid(const char *s);

/* 1 if s is a valid queue name: 1..64 of [A-Za-z0-9._-]. */
int task_queue_valid(const char *s);

/* 1 if s is a valid task key: 1..200 of [A-Za-z0-9._:-]. */
int task_key_valid(const char *s);

/* Names tickd makes itself: the key of a schedule's run starts with
 * TASK_RUN_PREFIX ("s:<schedule key>:<version>"), the webhook-id of an event
 * about a task is "<task id>" TASK_EVENT_SEP "<event>". task.c lists every
 * name tickd makes and why none collides with a user's. */
#define TASK_RUN_PREFIX "s:"
#define TASK_EVENT_SEP "~"

/* The reserved prefix a key starts with (and in *what, when what is not
 * NULL, what it is reserved for), or NULL: a key a user may give. */
const char *task_key_reserved(const char *key, const char **what);

/* Random URL-safe key of 22 characters into out (>= 23 bytes). */
void task_key_random(char *out);
/* 1 if key could be one task_key_random made. */
int task_key_looks_random(const char *key);

/* The time whose minute is a new task's home slice: its execute_at, unless
 * that minute ended so long ago (more than grace_ms / 2, less a margin) that
 * the scan may have passed it; then now. The id names the home slice, so a
 * re-POST is idempotent as long as its execute_at still gets the same home. */
int64_t task_home_ms(int64_t execute_at_ms, int64_t now_ms, int64_t grace_ms);

/* Wait before attempt `attempt` + 1, after `attempt` (>= 1) failed:
 * backoff_ms * 2^(attempt-1), capped at one hour, then reduced by up to 20 %
 * by jitter01 in [0, 1) so that retries of a burst spread out. */
int64_t task_backoff_ms(int64_t backoff_ms, int attempt, double jitter01);

#endif
