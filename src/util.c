/* util.c -- see util.h. */
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

static void util_oom(size_t n)
{
    log_panic("out of memory allocating %zu bytes", n);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) util_oom(n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) util_oom(n * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) util_oom(n);
    return p;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

int64_t util_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint32_t util_fnv1a(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h;
}

int util_fmt_int(char *buf, long long v)
{
    char tmp[UTIL_INT_MAX], *p = tmp + sizeof(tmp);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do *--p = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) *--p = '-';
    int n = (int)(tmp + sizeof(tmp) - p);
    memcpy(buf, p, (size_t)n);
    buf[n] = '\0';
    return n;
}

/* The length of the valid UTF-8 sequence at p (up to end), 0 if none. */
static size_t util_utf8_len(const unsigned char *p, const unsigned char *end)
{
    size_t n = *p >= 0xf0 && *p <= 0xf4 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc2 && *p <= 0xdf ? 2 : 0;
    if (!n || (size_t)(end - p) < n) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((*p == 0xe0 && p[1] < 0xa0) || (*p == 0xed && p[1] > 0x9f))) return 0;
    if (n == 4 && ((*p == 0xf0 && p[1] < 0x90) || (*p == 0xf4 && p[1] > 0x8f))) return 0;
    return n;
}

void util_text_clean(char *buf, size_t len)
{
    unsigned char *p = (unsigned char *)buf, *end = p + len;
    while (p < end) {
        if (*p >= 0x80) {
            size_t n = util_utf8_len(p, end);
            if (n) {
                p += n;
                continue;
            }
            *p = '?';
        } else if ((*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') || *p == 0x7f) {
            *p = '?';
        }
        p++;
    }
}
