/* log.c -- see log.h. One fprintf per line so lines from the dispatch threads
 * never interleave mid-line (stdio locks the stream per call). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int log_level = LOG_INFO;

int log_level_parse(const char *s)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

void log_write(int level, const char *file, int line, const char *fmt, ...)
{
    static const char tag[] = "DIWE";
    char msg[1024], stamp[32];
    struct timespec ts;
    struct tm tm;
    va_list ap;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    fprintf(stderr, "%s.%03ldZ %c %s:%d %s\n", stamp, ts.tv_nsec / 1000000,
            tag[level & 3], base ? base + 1 : file, line, msg);
}

void log_panic_at(const char *file, int line, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_write(LOG_ERROR, file, line, "PANIC: %s", msg);
    abort();
}

void log_limited_at(log_limit *l, long long now_ms, const char *file, int line,
                    const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (now_ms - l->last_ms < LOG_LIMIT_MS) {
        l->quiet++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (log_level > LOG_WARN) return;
    if (l->quiet) log_write(LOG_WARN, file, line, "%s (and %d more warnings since the last one)", msg, l->quiet);
    else log_write(LOG_WARN, file, line, "%s", msg);
    l->last_ms = now_ms;
    l->quiet = 0;
}
