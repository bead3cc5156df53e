/* fuzz_tz.c -- libFuzzer target for the TZif and POSIX TZ string parsers.
 *
 * The input is a TZif image. Accepted zones are queried around their
 * transitions and at a few fixed instants, checking that an instant's wall
 * time resolves back to it (or to the instant's twin in a fold), that wall
 * times near changes resolve to instants having them or to the gap they fall
 * in, and that tz_next_change moves forward to a real change. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/tz.h"

static void check_wall(const tz *z, int64_t w)
{
    int64_t u[2];
    int n = tz_resolve(z, w, u);
    if (n == 0) {
        int64_t before = tz_offset(z, u[0] - 1), after = tz_offset(z, u[0]);
        if (!(before < after && u[0] + before <= w && w < u[0] + after)) abort();
        return;
    }
    for (int i = 0; i < n; i++)
        if (u[i] + tz_offset(z, u[i]) != w) abort();
    if (n == 2 && u[0] >= u[1]) abort();
}

static void probe(const tz *z, int64_t t)
{
    int64_t u[2];
    int off = tz_offset(z, t);
    if (off < -25 * 3600 || off > 26 * 3600) abort();
    int n = tz_resolve(z, t + off, u);
    if (n == 0) abort(); /* t itself has this wall time */
    /* t is the first or second occurrence, or a later one (three or more
     * occurrences: only the earliest two are given) */
    if (u[0] != t && !(n == 2 && u[1] <= t)) abort();
    int64_t e = tz_next_change(z, t);
    if (e <= t) abort();
    if (e != INT64_MAX && tz_offset(z, e - 1) == tz_offset(z, e)) abort();
    /* wall times around the change: each resolves to instants having it, or
     * to the forward change whose gap holds it */
    if (e != INT64_MAX && e < 253402300799 - 86400)
        for (int d = -2; d <= 2; d++)
            check_wall(z, e + tz_offset(z, e - 1) + d * 900);
    char buf[TZ_RFC3339_MAX];
    if (tz_rfc3339(z, t * 1000, buf) >= TZ_RFC3339_MAX) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    tz *z = tz_parse("Fuzz", data, size, err);
    if (!z) {
        if (strncmp(err, "tz: Fuzz: ", 10) != 0) abort();
        return 0;
    }
    static const int64_t fixed[] = {INT64_MIN, -62135596800, -2147483648, -1, 0, 1,
                                    1767225600, 2147483647, 4102444800, 253402300799,
                                    INT64_MAX};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        int64_t t = fixed[i] < -62135596800 ? -62135596800 : fixed[i] > 253402300799 ? 253402300799 : fixed[i];
        probe(z, t);
    }
    /* walk the first changes from 1900 and from 2030 (into the footer's rule) */
    int64_t starts[2] = {-2208988800, 1893456000};
    for (int k = 0; k < 2; k++) {
        int64_t t = starts[k];
        for (int i = 0; i < 12 && t != INT64_MAX && t < 253402300799 - 86400; i++) {
            probe(z, t);
            probe(z, t - 1);
            t = tz_next_change(z, t);
        }
    }
    tz_free(z);
    return 0;
}
