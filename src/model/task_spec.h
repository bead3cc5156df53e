/* task_spec.h -- a stored task read once, for everything that runs it.
 *
 * task.c writes a task in two forms (task.h): the spec, JSON as the API
 * shows it, and the record, the compact form a store keeps. A task claimed
 * for its callback is read here, once, from whichever form the store holds,
 * into one struct that the scheduler (expires_at), flow control (queue and
 * destination), the callback client (URL, method, headers, body, trace
 * context, timeout) and the task.failed event all take. Nothing else parses
 * a stored task on the way to its callback.
 *
 * The reader builds no JSON tree for the whole task: it walks the members of
 * the stored object and keeps where each value is (a span into the text it
 * owns). A body given as JSON is sent as the text stored, which is the text
 * cJSON printed when the task was added (task.c refuses numbers it would not
 * print back the same), so it is sent byte for byte as before; strings are
 * unescaped only when they hold an escape. Safe on any bytes: a record that
 * cannot be read gives a spec with `bad` set, and the callback fails with
 * that reason, visibly. */
#ifndef TICKD_TASK_SPEC_H
#define TICKD_TASK_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "model/task.h"

/* Where a JSON value is in the spec's text (n == 0: absent). */
typedef struct task_span {
    const char *p;
    size_t n;
} task_span;

typedef struct task_spec {
    char *text;                 /* the stored form (NUL-terminated; in the spec's allocation) */
    size_t len;
    const char *bad;            /* why it cannot be called (static text), or NULL */
    char *url;                  /* callback_url, unescaped ("" when bad; in the spec's allocation) */
    char method[8];
    char queue[TASK_QUEUE_MAX]; /* "" = the default queue */
    int64_t timeout_ms;
    int max_attempts;           /* 1 when bad: a task that cannot be read is not retried */
    int64_t backoff_ms;
    int64_t expires_ms;         /* 0: none */
    task_span header;           /* a JSON object of strings */
    task_span req;              /* the body: a JSON string (sent unescaped) or any JSON */
    task_span on_failure;       /* a JSON object */
    task_span traceparent, tracestate; /* JSON strings */
    /* where the other members were found (the first of each name) */
    task_span callback_url, method_v, queue_v, timeout_v, retry, expires_at;
    task_span attempts_v, backoff_v;
} task_spec;

/* Read the stored task `id` (text[0..len): a record, or a spec starting with
 * '{'). Takes a copy of the text. Never NULL (a spec that cannot be read has
 * bad set). */
task_spec *task_spec_read(const char *text, size_t len);
void task_spec_free(task_spec *s);

/* The task as JSON, as the API shows it (malloc'd), or NULL when bad. */
char *task_spec_json(const task_spec *s, const char *id);

/* The string a span holds, unescaped (malloc'd), or NULL when it holds no
 * string. */
char *task_span_string(task_span v);

/* A short string with no escape in it, copied into out (outlen): "" when
 * the span holds none, an escape, or more than fits. No allocation: for
 * what the spec keeps plain (the method, the queue, a traceparent). */
void task_span_word(task_span v, char *out, size_t outlen);

/* The body to send and its length (not NUL-terminated: in the spec's text,
 * or in *buf, malloc'd, when req was a string that had to be unescaped;
 * "" when the task has none); *json set when req was JSON other than a
 * string (sent as application/json unless a header says otherwise). */
const char *task_spec_body(const task_spec *s, size_t *len, int *json, char **buf);

#endif
