/* log.h -- leveled logging to stderr, one line per event, each stamped with
 * UTC time and the file:line that logged it: as text, or (log_json) as one
 * JSON object {"ts","level","src","msg"} per line. A line about a task begins
 * "task <id>"; in JSON it also carries the id as "task_id". */
#ifndef TICKD_LOG_H
#define TICKD_LOG_H

#include <stddef.h>

enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* lines below this level are dropped; atomic: set again on SIGHUP while the
 * dispatch threads log */
extern _Atomic int log_level;
extern int log_json;  /* 1: one JSON object per line (server.log_format = json) */

/* Parse "debug", "info", "warn" or "error"; -1 when unknown. */
int log_level_parse(const char *s);

void log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_debug(...) do { if (log_level <= LOG_DEBUG) log_write(LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define log_info(...)  do { if (log_level <= LOG_INFO)  log_write(LOG_INFO,  __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define log_warn(...)  do { if (log_level <= LOG_WARN)  log_write(LOG_WARN,  __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define log_error(...) log_write(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)

/* One line per answered API request (server.access_log): the client's
 * address, method, target, status, body bytes and ms from the head's first
 * byte. Written whatever log_level. */
void log_access(const char *remote, const char *method, const char *target, int status,
                size_t bytes, long long ms);

/* As redis's serverAssert / serverPanic: say what broke (the condition or
 * the message, file and line), then abort for a core file. */
void log_panic_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define log_panic(...) log_panic_at(__FILE__, __LINE__, __VA_ARGS__)
#define log_assert(cond) \
    do { if (!(cond)) log_panic_at(__FILE__, __LINE__, "assertion failed: %s", #cond); } while (0)

/* A warning whose cause repeats (a failing Redis: one per bucket per tick,
 * one per task being recorded) is logged at most once per LOG_LIMIT_MS, with
 * the count of those left out. */
#define LOG_LIMIT_MS 5000
typedef struct log_limit {
    long long last_ms;
    int quiet;
} log_limit;
void log_limited_at(log_limit *l, long long now_ms, const char *file, int line,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define log_warn_limited(l, now_ms, ...) log_limited_at(l, now_ms, __FILE__, __LINE__, __VA_ARGS__)

#endif
