/* testutil.h -- what the unit tests share: cmocka and its prerequisites,
 * string assertions that say what they saw, a seeded random stream, and
 * calendar and zone helpers for the tests of time (defined when base/tz.h is
 * included before this header). Static and inline: each test is one file. */
#ifndef TICKD_TESTUTIL_H
#define TICKD_TESTUTIL_H

/* cmocka.h needs these before it */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

/* Whether s begins with prefix. */
static inline int testutil_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

#define assert_prefix(s, prefix)                                               \
    do {                                                                       \
        if (!testutil_starts_with((s), (prefix)))                              \
            fail_msg("\"%s\" does not begin with \"%s\"", (s), (prefix));      \
    } while (0)

#define assert_contains(s, sub)                                                \
    do {                                                                       \
        if (!strstr((s), (sub)))                                               \
            fail_msg("\"%s\" does not contain \"%s\"", (s), (sub));            \
    } while (0)

/* splitmix64: the next number of the stream whose state is *state; tiny,
 * good enough, and the same everywhere (a seed replays a run). */
static inline uint64_t testutil_rnd(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

#ifdef TICKD_TZ_H
/* Unix seconds of a UTC date. */
static inline int64_t utc(int y, int mo, int d, int h, int mi, int s)
{
    return tz_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
}

/* The zone of that name; fails the test when it cannot be loaded. */
static inline const tz *zone(const char *name)
{
    char why[256];
    const tz *z = tz_get(name, why);
    if (!z) fail_msg("%s: %s", name, why);
    return z;
}
#endif

#endif
