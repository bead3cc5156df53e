/* tz.h -- IANA time zones read straight from TZif files, without setenv("TZ").
 *
 * localtime_r() and mktime() read the process-wide TZ; switching it per call in
 * a threaded daemon races. tz reads a zone's TZif file (RFC 8536, versions 1 to
 * 4) once: the 64-bit transition table of v2+ files, and the footer's POSIX TZ
 * string for instants past the table's last transition.
 *
 * Times are in seconds on the UTC time line (Unix time, leap seconds not
 * counted); "local seconds" are a wall-clock time written the same way, as if
 * the wall clock were UTC (so local seconds = UTC seconds + UTC offset).
 * Instants are limited to years 1 to 9999; outside, the nearest end's offset
 * is used.
 *
 * Threads: tz_get() may be called from any thread (the cache is behind a
 * mutex). A zone is immutable once loaded and is never freed, so the pointer
 * stays valid for the life of the process and every other call is lock-free.
 * tz_set_dir() is for tests and start-up, before any tz_get(). */
#ifndef TICKD_TZ_H
#define TICKD_TZ_H

#include <stddef.h>
#include <stdint.h>

#define TZ_NAME_MAX 64          /* longest zone name accepted */
#define TZ_DEFAULT_DIR "/usr/share/zoneinfo"

typedef struct tz tz;

/* A wall-clock time. */
typedef struct tz_civil {
    int year;       /* 1..9999 */
    int mon;        /* 1..12 */
    int mday;       /* 1..31 */
    int hour, min, sec;
    int wday;       /* 0 = Sunday */
    int utoff_s;    /* UTC offset in effect, seconds east */
} tz_civil;

/* Read zones from `dir` instead of TZ_DEFAULT_DIR (copied). Zones already
 * loaded stay cached. */
void tz_set_dir(const char *dir);

/* The zone called `name` ("UTC", "Europe/London"), loaded on first use and
 * cached; "UTC" itself is built in, so the default zone needs no zoneinfo.
 * NULL with `err` filled when the name is malformed (empty, over TZ_NAME_MAX,
 * a leading `/`, an empty component, a character outside [A-Za-z0-9_+-/], so
 * no `.` or `..`), when no such zone file exists, or when the file is not a
 * valid TZif file. A zone that failed is not cached: a later call retries. */
const tz *tz_get(const char *name, char err[256]);

/* A zone from a TZif image buf[0..n) rather than the zone directory, not
 * cached; NULL with err filled as tz_get() does. For tests and fuzzing; free it
 * with tz_free(). Zones from tz_get() are never freed. */
tz *tz_parse(const char *name, const unsigned char *buf, size_t n, char err[256]);
void tz_free(tz *z);

/* The zone's name as given to tz_get(). */
const char *tz_name(const tz *z);

/* UTC offset in seconds east of UTC at instant t_s. */
int tz_offset(const tz *z, int64_t t_s);

/* Wall-clock time at instant t_s. */
void tz_local(const tz *z, int64_t t_s, tz_civil *out);

/* Format instant t_ms as RFC 3339 in zone z, with the zone's offset:
 * "2026-03-08T03:00:00-04:00", or "...T03:00:00.250-04:00" when t_ms is not
 * on a whole second. Zone UTC, and offsets with seconds (local mean time,
 * before ~1900), which RFC 3339 cannot write, give UTC with "Z". Returns the
 * length. */
#define TZ_RFC3339_MAX 40
int tz_rfc3339(const tz *z, int64_t t_ms, char out[TZ_RFC3339_MAX]);

/* The first instant > t_s at which the UTC offset changes, or INT64_MAX when
 * none follows (within the supported years). Changes of only the abbreviation
 * or the DST flag are not reported. */
int64_t tz_next_change(const tz *z, int64_t t_s);

/* The instants whose wall-clock time is `local_s` (local seconds). Returns:
 *   1  the usual case, out[0];
 *   2  a fold (clocks set back): out[0] < out[1], the earlier first;
 *   0  a gap (clocks set forward, the time never happens): out[0] is the first
 *      instant after the gap, the instant of the change.
 * Where three or more instants share a wall time (no zone since 1900 does
 * this), the earliest two are given. */
int tz_resolve(const tz *z, int64_t local_s, int64_t out[2]);

/* Calendar helpers on the proleptic Gregorian calendar. */
int64_t tz_days_from_civil(int64_t y, int m, int d);
void tz_civil_from_days(int64_t days, int *y, int *m, int *d);
int tz_days_in_month(int64_t y, int m);

#endif
