/* show.h -- tickctl's human-readable output: tasks as a table with aligned
 * columns (id, status, due, attempts, url), one task in detail, counters as
 * name / value lines; times as RFC 3339 UTC with milliseconds. Every text
 * that came from outside (the API's answers, a callback's bytes) is made
 * printable before it reaches the terminal: no escape sequence from a task
 * or a receiver can move the cursor. */
#ifndef TICKCTL_SHOW_H
#define TICKCTL_SHOW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* Unix ms as "2026-12-01T09:00:00.250Z" into out (>= 32 bytes). */
void show_time(int64_t ms, char *out, size_t outlen);

/* A malloc'd printable copy of s[0..len) (it may be shorter): control
 * characters (C0 but tab and line ends, DEL, C1), bidi controls (U+061C,
 * U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and invalid UTF-8 become
 * '?' each (so an escape sequence loses its ESC); with one_line, tabs and
 * line ends become spaces too, else a CR is kept only before an LF. */
char *show_clean(const char *s, size_t len, int one_line);

/* The same for JSON text printed as it came (--json): a C1 or bidi control
 * becomes its \uXXXX escape, so a JSON string keeps its value and the
 * terminal sees no control. */
char *show_json_clean(const char *s, size_t len);

/* The tasks of a JSON array (as GET /v1/tasks gives them) as a table with a
 * head line; "no tasks" on stderr when there are none. */
void show_tasks(FILE *f, const cJSON *tasks);

/* One task (GET /v1/tasks/{id}) in detail, a field a line; now_ms for the
 * "in 4m59s" / "3s ago" beside the due time. */
void show_task(FILE *f, const cJSON *task, int64_t now_ms);

/* The members of a JSON object, name and value a line, nested objects as
 * "outer.inner" (GET /v1/stats). */
void show_object(FILE *f, const cJSON *obj);

#endif
