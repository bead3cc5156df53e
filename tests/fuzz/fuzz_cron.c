/* fuzz_cron.c -- libFuzzer target for cron_parse and cron_next.
 *
 * Input: byte 0 picks a zone, bytes 1-8 the start time, the rest is the
 * expression. Accepted expressions get five cron_next calls in a row, each
 * checked: strictly later, on a whole second, and either a first occurrence of
 * a matching wall time or the end of a gap that swallowed one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/tz.h"

static const char *const zones[] = {"UTC", "America/New_York", "Europe/London",
                                    "Australia/Lord_Howe", "Asia/Kathmandu",
                                    "America/Sao_Paulo", "Pacific/Chatham", "America/Nuuk"};

static int matches(const cron_expr *c, const tz *z, int64_t s)
{
    tz_civil v;
    tz_local(z, s, &v);
    int dom = (c->mday >> v.mday) & 1, dow = (c->wday >> v.wday) & 1;
    int day = c->dom_star || c->dow_star ? dom && dow : dom || dow;
    return ((c->sec >> v.sec) & 1) && ((c->min >> v.min) & 1) && ((c->hour >> v.hour) & 1) &&
           ((c->mon >> v.mon) & 1) && day;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (size < 9) return 0;
    const tz *z = tz_get(zones[data[0] % (sizeof(zones) / sizeof(zones[0]))], err);
    if (!z) abort();
    uint64_t raw;
    memcpy(&raw, data + 1, 8);
    /* mostly 1970-2100, sometimes anything */
    int64_t after = data[0] & 0x80 ? (int64_t)raw : (int64_t)(raw % UINT64_C(4102444800000));
    cron_expr c;
    if (cron_parse(&c, (const char *)data + 9, size - 9, err)) {
        if (strncmp(err, "cron: ", 6) != 0) abort();
        return 0;
    }
    for (int i = 0; i < 5; i++) {
        int64_t next;
        if (cron_next(&c, z, after, &next)) break;
        if (next <= after || next % 1000 != 0) abort();
        int64_t s = next / 1000, u[2];
        if (matches(&c, z, s)) {
            /* a first occurrence: no earlier instant has this wall time */
            tz_resolve(z, s + tz_offset(z, s), u);
            if (u[0] != s) abort();
        } else {
            /* the end of a gap: clocks moved forward at s, over a match */
            if (tz_offset(z, s - 1) >= tz_offset(z, s)) abort();
        }
        after = next;
    }
    return 0;
}
