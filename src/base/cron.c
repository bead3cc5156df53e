/* cron.c -- see cron.h. */
#include "base/cron.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { F_SEC, F_MIN, F_HOUR, F_MDAY, F_MON, F_WDAY };

static const struct field {
    const char *name;
    int min, max;       /* values accepted; weekday 7 is folded onto 0 */
    int count;          /* values in a cycle: the largest step */
} fields[] = {
    [F_SEC] = {"second", 0, 59, 60},
    [F_MIN] = {"minute", 0, 59, 60},
    [F_HOUR] = {"hour", 0, 23, 24},
    [F_MDAY] = {"day of month", 1, 31, 31},
    [F_MON] = {"month", 1, 12, 12},
    [F_WDAY] = {"day of week", 0, 7, 7},
};

static const char *const mon_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                        "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const wday_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

static const struct macro {
    const char *name, *expr;
} macros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

/* Where an error is reported: "cron: field 3 (day of month): ". */
typedef struct pctx {
    int pos;            /* field number as written, from 1 */
    int f;              /* F_* */
    char *err;
} pctx;

static int fail(const pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const pctx *c, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->err, 256, "cron: field %d (%s): %s", c->pos, fields[c->f].name, what);
    return -1;
}

/* Tokens quoted in errors are cut to this many bytes. */
#define TOK(len) (int)((len) > 24 ? 24 : (len))

/* A printable rendering of byte ch for an error. */
static const char *show(unsigned char ch, char buf[16])
{
    if (ch > 0x20 && ch < 0x7f) snprintf(buf, 16, "'%c'", ch);
    else snprintf(buf, 16, "byte 0x%02x", ch);
    return buf;
}

static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }
static int is_alpha(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }
static int lower(int ch) { return ch >= 'A' && ch <= 'Z' ? ch + 32 : ch; }

/* A number or name at s[*i..n): its value in *v. */
static int value(const pctx *c, const char *s, size_t n, size_t *i, int *v)
{
    size_t b = *i, e = b;
    while (e < n && (is_digit((unsigned char)s[e]) || is_alpha((unsigned char)s[e]))) e++;
    const char *tok = s + b;
    size_t len = e - b;
    const struct field *fd = &fields[c->f];
    *i = e;
    if (len == 0) {
        char buf[16];
        if (b == n) return fail(c, "a number is missing at the end");
        return fail(c, "unexpected %s", show((unsigned char)s[b], buf));
    }
    size_t k = 0;
    while (k < len && is_digit((unsigned char)tok[k])) k++;
    if (k == len) {
        long x = 0;
        for (k = 0; k < len && x <= 100000; k++) x = x * 10 + (tok[k] - '0');
        if (x < fd->min || x > fd->max)
            return fail(c, "%.*s is out of range %d-%d", TOK(len), tok, fd->min, fd->max);
        *v = (int)x;
        return 0;
    }
    const char *const *names = c->f == F_MON ? mon_names : c->f == F_WDAY ? wday_names : NULL;
    int nnames = c->f == F_MON ? 12 : 7;
    if (names && len == 3)
        for (int j = 0; j < nnames; j++)
            if (lower(tok[0]) == names[j][0] && lower(tok[1]) == names[j][1] &&
                lower(tok[2]) == names[j][2]) {
                *v = j + (c->f == F_MON);
                return 0;
            }
    return fail(c, c->f == F_MON ? "'%.*s' is not a number or month name (JAN-DEC)"
                   : c->f == F_WDAY ? "'%.*s' is not a number or weekday name (SUN-SAT)"
                   : "'%.*s' is not a number", TOK(len), tok);
}

/* One field s[0..n) into *set. */
static int field_parse(const pctx *c, const char *s, size_t n, uint64_t *set)
{
    const struct field *fd = &fields[c->f];
    size_t i = 0;
    *set = 0;
    for (;;) {
        int lo, hi, step = 1;
        size_t start = i;
        if (i < n && s[i] == ',')
            return fail(c, "an empty list element");
        if (i < n && s[i] == '*') {
            lo = fd->min, hi = fd->max, i++;
        } else {
            if (value(c, s, n, &i, &lo)) return -1;
            hi = lo;
            if (i < n && s[i] == '-') {
                i++;
                if (value(c, s, n, &i, &hi)) return -1;
                if (hi < lo)
                    return fail(c, "range %.*s runs backwards", TOK(i - start), s + start);
            } else if (i < n && s[i] == '/') {
                hi = fd->max; /* N/STEP: N to the end */
            }
        }
        if (i < n && s[i] == '/') {
            size_t b = ++i;
            while (i < n && is_digit((unsigned char)s[i])) i++;
            long x = 0;
            for (size_t k = b; k < i && x <= 100000; k++) x = x * 10 + (s[k] - '0');
            if (i == b) {
                char buf[16];
                if (i == n) return fail(c, "a step is missing after '/'");
                return fail(c, "the step is not a number: unexpected %s", show((unsigned char)s[i], buf));
            }
            if (x < 1 || x > fd->count)
                return fail(c, "step %.*s is out of range 1-%d", TOK(i - b), s + b, fd->count);
            step = (int)x;
        }
        for (int v = lo; v <= hi; v += step) *set |= UINT64_C(1) << (c->f == F_WDAY && v == 7 ? 0 : v);
        if (i == n) return 0;
        if (s[i] != ',') {
            char buf[16];
            return fail(c, "unexpected %s", show((unsigned char)s[i], buf));
        }
        if (++i == n) return fail(c, "an empty list element");
    }
}

static int is_space(int ch) { return ch == ' ' || ch == '\t'; }

int cron_parse(cron_expr *ce, const char *s, size_t len, char err[256])
{
    memset(ce, 0, sizeof(*ce));
    if (len > CRON_LEN_MAX) {
        snprintf(err, 256, "cron: longer than %d bytes", CRON_LEN_MAX);
        return -1;
    }
    size_t b = 0, e = len;
    while (b < e && is_space((unsigned char)s[b])) b++;
    while (e > b && is_space((unsigned char)s[e - 1])) e--;
    if (b == e) {
        snprintf(err, 256, "cron: empty expression");
        return -1;
    }
    if (s[b] == '@') {
        for (size_t m = 0; m < sizeof(macros) / sizeof(macros[0]); m++) {
            size_t ml = strlen(macros[m].name);
            size_t k = 0;
            while (k < ml && b + k < e && lower((unsigned char)s[b + k]) == macros[m].name[k]) k++;
            if (k == ml && b + k == e)
                return cron_parse(ce, macros[m].expr, strlen(macros[m].expr), err);
        }
        snprintf(err, 256, "cron: unknown macro '%.*s' (known: @yearly @annually @monthly "
                 "@weekly @daily @midnight @hourly)", (int)(e - b > 24 ? 24 : e - b), s + b);
        return -1;
    }
    /* split into fields */
    size_t fb[7], fe[7];
    int nf = 0;
    for (size_t i = b; i < e;) {
        if (nf == 7) break;
        fb[nf] = i;
        while (i < e && !is_space((unsigned char)s[i])) i++;
        fe[nf++] = i;
        while (i < e && is_space((unsigned char)s[i])) i++;
    }
    if (nf != 5 && nf != 6) {
        snprintf(err, 256, "cron: expected 5 fields (minute hour day-of-month month "
                 "day-of-week) or 6 with a leading second, got %s%d", nf == 7 ? "more than " : "",
                 nf == 7 ? 6 : nf);
        return -1;
    }
    uint64_t *sets[6] = {&ce->sec, &ce->min, &ce->hour, &ce->mday, &ce->mon, &ce->wday};
    int first = nf == 6 ? F_SEC : F_MIN;
    if (nf == 5) ce->sec = 1;
    for (int k = 0; k < nf; k++) {
        pctx c = {k + 1, first + k, err};
        if (field_parse(&c, s + fb[k], fe[k] - fb[k], sets[first + k])) return -1;
    }
    ce->dom_star = s[fb[nf - 3]] == '*';
    ce->dow_star = s[fb[nf - 1]] == '*';
    return 0;
}

/* ---- next run ------------------------------------------------------------- */

/* The smallest v >= from with bit v set, or -1. */
static int bit_next(uint64_t set, int from)
{
    if (from > 63) return -1;
    uint64_t m = set & (~UINT64_C(0) << from);
    return m ? __builtin_ctzll(m) : -1;
}

static int day_ok(const cron_expr *ce, int y, int mo, int d)
{
    int64_t days = tz_days_from_civil(y, mo, d);
    int wday = (int)((days % 7 + 11) % 7);
    int dom = (ce->mday >> d) & 1, dow = (ce->wday >> wday) & 1;
    return ce->dom_star || ce->dow_star ? dom && dow : dom || dow;
}

/* The first matching wall-clock time >= l (local seconds), in years up to
 * ylimit: 0 and *out, or -1. Skips by field: a month, day, hour or minute that
 * cannot match is passed over whole. */
static int match_next(const cron_expr *ce, int64_t l, int ylimit, int64_t *out)
{
    int64_t days = l / 86400, sod = l % 86400; /* l >= 0 */
    int y, mo, d, h = (int)(sod / 3600), mi = (int)(sod / 60 % 60), s = (int)(sod % 60);
    tz_civil_from_days(days, &y, &mo, &d);
    for (;;) {
        if (y > ylimit) return -1;
        int v = bit_next(ce->mon, mo);
        if (v < 0) {
            y++, mo = 1, d = 1, h = mi = s = 0;
            continue;
        }
        if (v != mo) mo = v, d = 1, h = mi = s = 0;
        if (d > tz_days_in_month(y, mo)) {
            mo++, d = 1, h = mi = s = 0;
            continue;
        }
        if (!day_ok(ce, y, mo, d)) {
            d++, h = mi = s = 0;
            continue;
        }
        if ((v = bit_next(ce->hour, h)) < 0) {
            d++, h = mi = s = 0;
            continue;
        }
        if (v != h) h = v, mi = s = 0;
        if ((v = bit_next(ce->min, mi)) < 0) {
            h++, mi = s = 0;
            continue;
        }
        if (v != mi) mi = v, s = 0;
        if ((v = bit_next(ce->sec, s)) < 0) {
            mi++, s = 0;
            continue;
        }
        s = v;
        *out = tz_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
        return 0;
    }
}

#define CRON_MS_MAX INT64_C(253086768000000) /* 9990-01-01T00:00:00Z */

int cron_next(const cron_expr *ce, const tz *z, int64_t after_ms, int64_t *next_ms)
{
    if (!z) {
        char err[256];
        z = tz_get("UTC", err); /* built in: cannot fail */
    }
    if (after_ms < 0 || after_ms >= CRON_MS_MAX) return -1;
    /* Runs are on whole seconds; t is the first one after after_ms. Wall-clock
     * times from the one just after t-1 on are candidates: starting there
     * rather than at t's own wall time keeps a gap that ends exactly at t. */
    int64_t t = after_ms / 1000 + 1;
    int64_t l = t - 1 + tz_offset(z, t - 1) + 1;
    if (l < 0) l = 0;
    tz_civil now;
    tz_local(z, t, &now);
    int ylimit = now.year + CRON_HORIZON_YEARS;
    for (;;) {
        if (match_next(ce, l, ylimit, &l)) return -1;
        int64_t u[2];
        int n = tz_resolve(z, l, u);
        if (u[0] >= t) { /* in a gap u[0] is the gap's end; in a fold, the first */
            *next_ms = u[0] * 1000;
            return 0;
        }
        if (n == 2) {
            /* t lies in the second pass of a fold: every wall time up to the
             * fold's end had its run in the first pass. */
            int64_t e = tz_next_change(z, u[0]);
            int64_t fold_end = e == INT64_MAX ? l + 1 : e + tz_offset(z, e - 1);
            l = fold_end > l + 1 ? fold_end : l + 1;
        } else {
            l++;
        }
    }
}
