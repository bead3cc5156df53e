/* util.h -- allocation that never returns NULL. As in Redis, running out of
 * memory is not a state tickd tries to limp on in: it logs and aborts, and the
 * leases in Redis hand its claimed tasks to another replica or to the restart. */
#ifndef TICKD_UTIL_H
#define TICKD_UTIL_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

#endif
