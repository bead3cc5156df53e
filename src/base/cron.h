/* cron.h -- cron expressions and their next run time in a time zone.
 *
 * Syntax (Vixie cron's, without its extensions L, W, #, ?):
 *   [second] minute hour day-of-month month day-of-week
 * Five fields, or six with a leading seconds field (five fields run at second
 * 0). Each field is a comma list of `*`, `N`, `N-M`, each optionally followed
 * by `/STEP`; `N/STEP` means N to the field's maximum by STEP (`5/15` in the
 * minute field: 5,20,35,50). Months may be written JAN-DEC and weekdays SUN-SAT,
 * any case; weekday 7 is Sunday as well as 0. Ranges run forwards (`5-3` is an
 * error); STEP is 1 up to the field's count of values (60, 24, 31, 12, 7).
 * Macros: @yearly = @annually = "0 0 1 1 *", @monthly = "0 0 1 * *",
 * @weekly = "0 0 * * 0", @daily = @midnight = "0 0 * * *", @hourly = "0 * * * *".
 *
 * Days: when the day-of-month and day-of-week fields are both restricted
 * (neither starts with `*`), a day matching either runs; otherwise a day must
 * match both. As in Vixie cron, a step over `*` (every other day) counts as
 * unrestricted here.
 *
 * Daylight saving: a matching wall-clock time that does not exist (clocks set
 * forward) runs once, at the first instant after the gap; one that happens
 * twice (clocks set back) runs once, at its first occurrence. Several matching
 * times in one gap make a single run. */
#ifndef TICKD_CRON_H
#define TICKD_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "base/tz.h"

#define CRON_LEN_MAX 256        /* longest expression accepted, in bytes */
#define CRON_HORIZON_YEARS 8    /* cron_next looks this far; Feb 29 may skip 2100 */

typedef struct cron_expr {
    uint64_t sec, min, hour;    /* bit n set: value n runs */
    uint64_t mday;              /* bits 1..31 */
    uint64_t mon;               /* bits 1..12 */
    uint64_t wday;              /* bits 0..6, 0 = Sunday */
    int dom_star, dow_star;     /* the day field's text starts with `*` */
} cron_expr;

/* Parse s[0..len) (need not be NUL-terminated; a NUL byte is an error) into
 * ce. Returns 0, or -1 with err filled, e.g.
 * "cron: field 3 (day of month): 32 is out of range 1-31"; fields are
 * numbered from 1 as written, so with a seconds field day-of-month is 4. */
int cron_parse(cron_expr *ce, const char *s, size_t len, char err[256]);

/* The first run strictly after after_ms (Unix ms) in zone z (NULL: UTC),
 * whole seconds, in *next_ms. Returns 0, or -1 when there is none within
 * CRON_HORIZON_YEARS (30 Feb never comes) or after_ms is before 1970 or past
 * year 9990. Pure: no clock is read, nothing is allocated. */
int cron_next(const cron_expr *ce, const tz *z, int64_t after_ms, int64_t *next_ms);

#endif
