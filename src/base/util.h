/* util.h -- allocation that never returns NULL. As in Redis, running out of
 * memory is not a state tickd tries to limp on in: it logs and aborts, and the
 * leases in Redis hand its claimed tasks to another replica or to the restart. */
#ifndef TICKD_UTIL_H
#define TICKD_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The struct holding `ptr`, a pointer to its `member` (intrusive lists). */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Blocks of one size kept for reuse by the one thread that makes and frees
 * them: for what a request makes and frees by the thousand a second (a
 * POST's task and its store operation). glibc's per-thread cache keeps
 * seven blocks of a size; with dozens of requests in flight the rest go
 * through its bins, which took a seventh of the single POST's user time.
 * At most `keep` free blocks are held, the rest are freed. Under
 * AddressSanitizer none are kept, so that a use after a put is still
 * caught. */
typedef struct util_pool {
    void *free;                 /* the free blocks, each linked by its first bytes */
    unsigned n, keep;           /* kept, and at most kept (0: none) */
} util_pool;
/* a pool's keep for a request's blocks: a few batches' worth */
#define UTIL_POOL_KEEP 1024
/* 0 under AddressSanitizer (GCC's macro, clang's feature): a put frees */
#if defined(__SANITIZE_ADDRESS__)
#define UTIL_POOL_KEEPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UTIL_POOL_KEEPS 0
#endif
#endif
#ifndef UTIL_POOL_KEEPS
#define UTIL_POOL_KEEPS 1
#endif
/* A block of `size` bytes (the same size at every call on p), uninitialised
 * as xmalloc's. */
void *util_pool_get(util_pool *p, size_t size);
/* b (from util_pool_get of p, or NULL) kept or freed. */
void util_pool_put(util_pool *p, void *b);
/* Every kept block freed. */
void util_pool_drain(util_pool *p);

/* src into dst (cap bytes), cut to fit and always NUL-terminated; returns
 * the length copied (NULL copies as ""). What snprintf(dst, cap, "%s", src)
 * does, without
 * parsing a format on every task's way (ids and slices are copied several
 * times per callback). */
size_t util_copy(char *dst, size_t cap, const char *src);

/* Bytes of a struct: a member's offsetof and sizeof (UTIL_SPAN). */
typedef struct util_span {
    size_t off, len;
} util_span;
#define UTIL_SPAN(type, member) {offsetof(type, member), sizeof(((type *)0)->member)}

/* p's size bytes zeroed but for the text buffers keep[0..n) (in the order
 * they lie, apart), of which only the first byte is: a struct made empty
 * for reuse without writing buffers that are written whole (terminated)
 * before they are read. */
void util_zero_but(void *p, size_t size, const util_span *keep, size_t n);

/* Text built into a fixed buffer, piece by piece, cut to fit and always
 * NUL-terminated: for the texts made per request or per task (an answer's
 * head, an id, a stored record), where snprintf's format parsing is most of
 * the cost. */
typedef struct util_buf {
    char *p;
    size_t len, cap;            /* cap: the buffer's size (> 0) */
} util_buf;
#define UTIL_BUF(arr) ((util_buf){(arr), 0, sizeof(arr)})
/* inline: a request's answer is a dozen of them */
static inline void util_buf_add(util_buf *b, const char *s, size_t n)
{
    if (b->len + n >= b->cap) n = b->cap - 1 - b->len;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static inline void util_buf_str(util_buf *b, const char *s)
{
    util_buf_add(b, s, strlen(s));
}
void util_buf_int(util_buf *b, long long v);

/* Clocks in ms: wall (CLOCK_REALTIME) and monotonic. */
int64_t util_realtime_ms(void);
int64_t util_mono_ms(void);
int64_t util_realtime_us(void);
int64_t util_mono_us(void);

/* A wake-up another thread sends to an event loop, which watches the fd for
 * EV_READ (an eventfd: nonblocking, close-on-exec; -1 when none could be
 * made). util_wake adds one (any thread), util_wake_take empties it (the
 * loop's thread). The loop's base then needs no lock of its own. */
int util_wake_fd(void);
void util_wake(int fd);
void util_wake_take(int fd);

/* FNV-1a, 32 bits: task buckets and hash tables. */
uint32_t util_fnv1a(const void *p, size_t n);

/* v in decimal into buf (UTIL_INT_MAX bytes, NUL-terminated); returns the
 * length. No locale, no printf: hot paths format many of these. */
#define UTIL_INT_MAX 24
int util_fmt_int(char *buf, long long v);

/* UTF-8 as RFC 3629 has it: no overlong forms, no surrogates (U+D800 to
 * U+DFFF), nothing past U+10FFFF, no sequence cut short. The one check of
 * text from outside: the API refuses strings that fail it, and text tickd
 * passes on (receivers' answers, messages quoting input) is cleaned by it.
 * util_utf8_seq: the length (1 to 4) of the valid sequence s[0..n) starts
 * with, 0 when it starts none (or n is 0). util_utf8_valid: 1 when all of
 * s[0..n) is valid, else 0 with the offset of the first byte that starts no
 * valid sequence in *bad (when bad is not NULL). */
size_t util_utf8_seq(const char *s, size_t n);
int util_utf8_valid(const char *s, size_t n, size_t *bad);

/* Make buf[0..len) printable text in place: a control byte (but tab, CR and
 * LF) or a byte that is not part of a valid UTF-8 sequence becomes '?'. For
 * bytes from outside that go into JSON answers (a receiver's body). */
void util_text_clean(char *buf, size_t len);

/* A URL as it may be shown outside tickd (events, logs, listings), without
 * what may be a credential: the userinfo becomes *** (u:pw@host shows as
 * ***@host), each query value *** (?token=***&a=***; a part with no '=' is
 * *** whole), a fragment #***. Scheme, host, port and path are kept as
 * written.
 * Malloc'd. */
char *util_url_redact(const char *url);

#endif
