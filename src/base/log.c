/* log.c -- see log.h. One fprintf per text line, and a JSON line under the
 * stream's lock, so lines from the dispatch threads never interleave
 * mid-line. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

_Atomic int log_level = LOG_INFO;
int log_json;

/* s as the inside of a JSON string (at most `max` bytes of it), to f */
static void log_json_str(FILE *f, const char *s, size_t max)
{
    for (size_t i = 0; s[i] && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
}

/* "2026-11-24T13:03:18.123Z" into stamp (32 bytes) */
static void log_stamp(char *stamp)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(stamp, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + n, 32 - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* A JSON line, written whole under the stream's lock (lines from the
 * dispatch threads never interleave). */
static void log_json_line(const char *stamp, const char *level, const char *src, char *msg)
{
    util_text_clean(msg, strlen(msg)); /* valid UTF-8, whatever a message quotes */
    flockfile(stderr);
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"src\":\"", stamp, level);
    log_json_str(stderr, src, 128);
    fputs("\",\"msg\":\"", stderr);
    log_json_str(stderr, msg, 4096);
    fputc('"', stderr);
    if (strncmp(msg, "task ", 5) == 0) {
        size_t n = strcspn(msg + 5, " :;,");
        if (n > 0 && n < 200) {
            fputs(",\"task_id\":\"", stderr);
            log_json_str(stderr, msg + 5, n);
            fputc('"', stderr);
        }
    }
    fputs("}\n", stderr);
    funlockfile(stderr);
}

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
    static const char *names[] = {"debug", "info", "warn", "error"};
    char msg[1024], stamp[32];
    va_list ap;

    log_stamp(stamp);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (log_json) {
        char src[160];
        snprintf(src, sizeof(src), "%s:%d", base, line);
        log_json_line(stamp, names[level & 3], src, msg);
        return;
    }
    fprintf(stderr, "%s %c %s:%d %s\n", stamp, tag[level & 3], base, line, msg);
}

void log_access(const char *remote, const char *method, const char *target, int status,
                size_t bytes, long long ms)
{
    char stamp[32];
    log_stamp(stamp);
    if (!log_json) {
        fprintf(stderr, "%s A %s \"%.16s %.1024s\" %d %zu %lldms\n", stamp, remote, method,
                target, status, bytes, ms);
        return;
    }
    flockfile(stderr);
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"info\",\"src\":\"access\",\"remote\":\"",
            stamp);
    log_json_str(stderr, remote, 64);
    fputs("\",\"method\":\"", stderr);
    log_json_str(stderr, method, 16);
    fputs("\",\"target\":\"", stderr);
    log_json_str(stderr, target, 1024);
    fprintf(stderr, "\",\"status\":%d,\"bytes\":%zu,\"ms\":%lld}\n", status, bytes, ms);
    funlockfile(stderr);
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
