/* util.c -- see util.h. */
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

/* Out of memory: nothing can be done but to say it and stop. Written to
 * stderr directly, not through log.h, which sits above util (it cleans its
 * messages with util_text_clean), and whose formatting may need memory. */
static void util_oom(size_t n)
{
    fprintf(stderr, "tickd: PANIC: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) util_oom(n);
    return p;
}

void *util_pool_get(util_pool *p, size_t size)
{
    void *b = p->free;
    if (!b) return xmalloc(size < sizeof(void *) ? sizeof(void *) : size);
    memcpy(&p->free, b, sizeof(void *));
    p->n--;
    return b;
}

void util_pool_put(util_pool *p, void *b)
{
    if (!b) return;
    if (!UTIL_POOL_KEEPS || p->n >= p->keep) {
        free(b);
        return;
    }
    memcpy(b, &p->free, sizeof(void *));
    p->free = b;
    p->n++;
}

void util_pool_drain(util_pool *p)
{
    while (p->free) {
        void *b = p->free;
        memcpy(&p->free, b, sizeof(void *));
        free(b);
    }
    p->n = 0;
}

/* glibc's calloc takes the arena's path, not the per-thread cache malloc
 * takes first: for a small block (most callers ask for one struct) malloc
 * and a memset cost about half (90 to 200 fewer instructions an allocation
 * and its free, measured under callgrind). A large one keeps calloc, whose
 * fresh pages come zeroed. The memset goes through a volatile pointer: GCC
 * would otherwise make the pair a call of calloc again. */
#define XCALLOC_SMALL 1024
static void *(*volatile xcalloc_zero)(void *, int, size_t) = memset;

void *xcalloc(size_t n, size_t size)
{
    if (!n) n = 1;
    if (!size) size = 1;
    if (size <= XCALLOC_SMALL && n <= XCALLOC_SMALL / size) {
        void *p = xmalloc(n * size);
        return xcalloc_zero(p, 0, n * size);
    }
    void *p = calloc(n, size);
    if (!p) util_oom(n > SIZE_MAX / size ? SIZE_MAX : n * size);
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

size_t util_copy(char *dst, size_t cap, const char *src)
{
    if (!cap) return 0;
    size_t n = src ? strnlen(src, cap - 1) : 0;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
    return n;
}

void util_buf_int(util_buf *b, long long v)
{
    char num[UTIL_INT_MAX];
    util_buf_add(b, num, (size_t)util_fmt_int(num, v));
}

void util_zero_but(void *p, size_t size, const util_span *keep, size_t n)
{
    char *b = p;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep[i].off < at || keep[i].len == 0 || keep[i].off + keep[i].len > size) abort();
        memset(b + at, 0, keep[i].off - at);
        b[keep[i].off] = '\0';
        at = keep[i].off + keep[i].len;
    }
    memset(b + at, 0, size - at);
}

static int64_t util_clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t util_realtime_ms(void) { return util_clock_us(CLOCK_REALTIME) / 1000; }
int64_t util_mono_ms(void) { return util_clock_us(CLOCK_MONOTONIC) / 1000; }
int64_t util_realtime_us(void) { return util_clock_us(CLOCK_REALTIME); }
int64_t util_mono_us(void) { return util_clock_us(CLOCK_MONOTONIC); }

int util_wake_fd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void util_wake(int fd)
{
    uint64_t one = 1;
    /* EAGAIN: the count is full, so the loop is woken already */
    while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR) {}
}

void util_wake_take(int fd)
{
    uint64_t n;
    while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR) {}
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
    /* two digits a division, written where they go once the length is
     * known (ids and due times have 13) */
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
                                "31323334353637383940414243444546474849505152535455565758596061"
                                "6263646566676869707172737475767778798081828384858687888990919293"
                                "949596979899";
    static const unsigned long long pow10[20] = {
        1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
        100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
        10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
        100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL};
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    /* the digits: log10 from log2 (1233 / 4096 = log10 2, a little under),
     * set right by one compare (of u | 1, so that 0 has one; a power of ten
     * past 1 is even, so the low bit changes no other answer) */
    int t = (64 - __builtin_clzll(u | 1)) * 1233 >> 12;
    int n = t + ((u | 1) >= pow10[t]) + (v < 0);
    char *p = buf + n;
    *p = '\0';
    for (; u >= 100; u /= 100) {
        p -= 2;
        memcpy(p, pairs + 2 * (u % 100), 2);
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, pairs + 2 * u, 2);
    } else {
        *--p = (char)('0' + u);
    }
    if (v < 0) *--p = '-';
    return n;
}

size_t util_utf8_seq(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (!n) return 0;
    if (p[0] < 0x80) return 1;
    /* RFC 3629 section 4: the lead byte gives the length and the range of
     * the second byte, which is where overlongs (E0, F0), surrogates (ED)
     * and code points past U+10FFFF (F4) are cut off; C0, C1 and F5-FF
     * lead nothing */
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        if (p[0] == 0xe0) lo = 0xa0;
        else if (p[0] == 0xed) hi = 0x9f;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        if (p[0] == 0xf0) lo = 0x90;
        else if (p[0] == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return len;
}

int util_utf8_valid(const char *s, size_t n, size_t *bad)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII eight bytes at a time: a request body is mostly ASCII */
        uint64_t w;
        if (i + 8 <= n && (memcpy(&w, s + i, 8), !(w & UINT64_C(0x8080808080808080)))) {
            i += 8;
            continue;
        }
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = util_utf8_seq(s + i, n - i);
        if (!k) {
            if (bad) *bad = i;
            return 0;
        }
        i += k;
    }
    return 1;
}

void util_text_clean(char *buf, size_t len)
{
    unsigned char *p = (unsigned char *)buf, *end = p + len;
    while (p < end) {
        if (*p >= 0x80) {
            size_t n = util_utf8_seq((const char *)p, (size_t)(end - p));
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

/* Appends n bytes of s to out (outlen bytes, NUL kept), as far as they fit. */
static void util_put(char *out, size_t outlen, size_t *len, const char *s, size_t n)
{
    if (*len + 1 >= outlen) return;
    if (n > outlen - 1 - *len) n = outlen - 1 - *len;
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

char *util_url_redact(const char *url)
{
    /* at most 3 bytes out for 1 in ("a" to "***"), and "***@", "#***" */
    size_t cap = 3 * strlen(url) + 8, len = 0;
    char *out = xmalloc(cap);
    out[0] = '\0';
    /* a scheme, its colon and any slashes (libcurl takes http:/h and
     * http:h as http://h), then the authority up to the first / ? or #; its
     * userinfo (if any) up to its last @, as user:password@ may hold an @
     * escaped or not */
    const char *p = url, *auth = url;
    while (isalnum((unsigned char)*auth) || *auth == '+' || *auth == '-' || *auth == '.') auth++;
    if (auth > url && isalpha((unsigned char)*url) && *auth == ':') {
        for (auth++; *auth == '/';) auth++;
        const char *end = auth + strcspn(auth, "/?#"), *at = NULL;
        for (const char *c = auth; c < end; c++)
            if (*c == '@') at = c;
        util_put(out, cap, &len, url, (size_t)(auth - url));
        if (at) util_put(out, cap, &len, "***", 3);
        p = at ? at : auth;
    }
    size_t path = strcspn(p, "?#");
    util_put(out, cap, &len, p, path);
    p += path;
    if (*p == '?') {
        /* each value, and a part without one (which may be a token alone) */
        util_put(out, cap, &len, "?", 1);
        p++;
        while (*p && *p != '#') {
            size_t part = strcspn(p, "&#"), name = strcspn(p, "=&#");
            if (name < part) util_put(out, cap, &len, p, name + 1);
            if (part) util_put(out, cap, &len, "***", 3);
            p += part;
            if (*p == '&') {
                util_put(out, cap, &len, "&", 1);
                p++;
            }
        }
    }
    if (*p == '#') util_put(out, cap, &len, p[1] ? "#***" : "#", p[1] ? 4 : 1);
    return out;
}
