/* util.h -- allocation that never returns NULL. As in Redis, running out of
 * memory is not a state tickd tries to limp on in: it logs and aborts, and the
 * leases in Redis hand its claimed tasks to another replica or to the restart. */
#ifndef TICKD_UTIL_H
#define TICKD_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The struct holding `ptr`, a pointer to its `member` (intrusive lists). */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Clocks in ms: wall (CLOCK_REALTIME) and monotonic. */
int64_t util_realtime_ms(void);
int64_t util_mono_ms(void);

/* FNV-1a, 32 bits: task buckets and hash tables. */
uint32_t util_fnv1a(const void *p, size_t n);

/* v in decimal into buf (UTIL_INT_MAX bytes, NUL-terminated); returns the
 * length. No locale, no printf: hot paths format many of these. */
#define UTIL_INT_MAX 24
int util_fmt_int(char *buf, long long v);

/* Make buf[0..len) printable text in place: a control byte (but tab, CR and
 * LF) or a byte that is not part of a valid UTF-8 sequence becomes '?'. For
 * bytes from outside that go into JSON answers (a receiver's body). */
void util_text_clean(char *buf, size_t len);

#endif
