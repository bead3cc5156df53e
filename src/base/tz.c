/* tz.c -- see tz.h. TZif layout: RFC 8536. POSIX TZ strings: POSIX.1-2017
 * section 8.3, with the RFC's extensions (hours -167..167 in rule times). */
#include "base/tz.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TZ_FILE_MAX (1 << 20)   /* the largest zone file is ~4 KiB */
#define TZ_TRANS_MAX 65536
#define TZ_OFF_MIN (-25 * 3600)
#define TZ_OFF_MAX (26 * 3600)
/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z */
#define TZ_T_MIN INT64_C(-62135596800)
#define TZ_T_MAX INT64_C(253402300799)

/* One date of a POSIX TZ rule: when DST starts or ends, in local time. */
typedef struct tz_rule {
    char kind;          /* 'J': Jn, 1..365 without Feb 29; 'D': n, 0..365; 'M' */
    int n, m, w, d;     /* n for J and D; month, week 1..5 (5 = last), weekday */
    int32_t time_s;     /* local time of day of the change, -167h..167h */
} tz_rule;

struct tz {
    struct tz *next;            /* cache chain */
    char name[TZ_NAME_MAX + 1];
    int ntrans;
    int64_t *trans_s;           /* ascending */
    int32_t *trans_off;         /* offset from trans_s[i] on */
    int32_t first_off;          /* before the first transition */
    int has_footer;             /* past the last transition: the rule below */
    int has_dst;
    int32_t std_off, dst_off;
    tz_rule start, end;         /* DST start and end */
};

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;
static tz *tz_cache;
static char *tz_dir;

/* ---- calendar ------------------------------------------------------------ */

/* H. Hinnant's days_from_civil / civil_from_days: exact on the proleptic
 * Gregorian calendar, no tables, no overflow for years far beyond 9999. */
int64_t tz_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void tz_civil_from_days(int64_t z, int *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static int tz_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int tz_days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && tz_leap(y) ? 29 : dim[m - 1];
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t clamp_t(int64_t t)
{
    return t < TZ_T_MIN ? TZ_T_MIN : t > TZ_T_MAX ? TZ_T_MAX : t;
}

static int year_of(int64_t local_s)
{
    int y, m, d;
    tz_civil_from_days(floor_div(local_s, 86400), &y, &m, &d);
    return y;
}

/* ---- the footer's rule ---------------------------------------------------- */

/* Local seconds at which `r` falls in year y. */
static int64_t rule_local(const tz_rule *r, int y)
{
    int64_t jan1 = tz_days_from_civil(y, 1, 1), day;
    if (r->kind == 'J') {
        day = jan1 + r->n - 1 + (tz_leap(y) && r->n >= 60);
    } else if (r->kind == 'D') {
        day = jan1 + r->n;
    } else {
        int64_t first = tz_days_from_civil(y, r->m, 1);
        int wday_first = (int)((first % 7 + 11) % 7); /* 1970-01-01 was a Thursday */
        day = first + (r->d - wday_first + 7) % 7 + (int64_t)(r->w - 1) * 7;
        while (day - first >= tz_days_in_month(y, r->m)) day -= 7;
    }
    return day * 86400 + r->time_s;
}

/* DST start and end of year y as instants. */
static void rule_year(const tz *z, int y, int64_t *start, int64_t *end)
{
    *start = rule_local(&z->start, y) - z->std_off;
    *end = rule_local(&z->end, y) - z->dst_off;
}

/* Is instant t in DST under the footer's rule? The latest change at or before
 * t decides; a start and an end at the same instant (DST all year, as
 * "EST5EDT,0/0,J365/25" writes it) leave DST on. */
static int rule_isdst(const tz *z, int64_t t)
{
    int y = year_of(t + z->std_off), dst = 0;
    int64_t best = INT64_MIN;
    for (int yy = y - 1; yy <= y + 1; yy++) {
        int64_t s, e;
        rule_year(z, yy, &s, &e);
        if (e <= t && e > best) best = e, dst = 0;
        if (s <= t && s >= best) best = s, dst = 1;
    }
    return dst;
}

/* A rule whose offset never changes (DST all year, as "EST5EDT,0/0,J365/25"
 * writes it, or equal offsets) becomes a fixed offset, so no search for its
 * next change runs through the centuries. Rules repeat every 400 years. */
static void rule_settle(tz *z)
{
    if (!z->has_dst) return;
    if (z->std_off != z->dst_off)
        for (int y = 2000; y <= 2400; y++) {
            int64_t s, e;
            rule_year(z, y, &s, &e);
            if (rule_isdst(z, s) != rule_isdst(z, s - 1) || rule_isdst(z, e) != rule_isdst(z, e - 1))
                return;
        }
    if (rule_isdst(z, 946684800)) z->std_off = z->dst_off;
    z->has_dst = 0;
}

/* ---- lookups -------------------------------------------------------------- */

int tz_offset(const tz *z, int64_t t)
{
    t = clamp_t(t);
    if (z->ntrans == 0 || t >= z->trans_s[z->ntrans - 1]) {
        if (z->has_footer)
            return z->has_dst && rule_isdst(z, t) ? z->dst_off : z->std_off;
        if (z->ntrans == 0) return z->first_off;
    }
    if (t < z->trans_s[0]) return z->first_off;
    int lo = 0, hi = z->ntrans - 1; /* last transition <= t */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (z->trans_s[mid] <= t) lo = mid; else hi = mid - 1;
    }
    return z->trans_off[lo];
}

void tz_local(const tz *z, int64_t t, tz_civil *out)
{
    t = clamp_t(t);
    int off = tz_offset(z, t);
    int64_t l = t + off, days = floor_div(l, 86400), sod = l - days * 86400;
    tz_civil_from_days(days, &out->year, &out->mon, &out->mday);
    out->hour = (int)(sod / 3600);
    out->min = (int)(sod / 60 % 60);
    out->sec = (int)(sod % 60);
    out->wday = (int)((days % 7 + 11) % 7);
    out->utoff_s = off;
}

int tz_rfc3339(const tz *z, int64_t t_ms, char out[TZ_RFC3339_MAX])
{
    int64_t s = floor_div(t_ms, 1000);
    int frac = (int)(t_ms - s * 1000);
    tz_civil c;
    tz_local(z, s, &c);
    int utc_form = strcmp(z->name, "UTC") == 0 || c.utoff_s % 60 != 0;
    if (utc_form && c.utoff_s) { /* RFC 3339 has no offset seconds: say it in UTC */
        static const tz utc = {.name = "UTC", .has_footer = 1};
        tz_local(&utc, s, &c);
    }
    char fs[8] = "", off[8] = "Z";
    if (frac) snprintf(fs, sizeof(fs), ".%03d", frac);
    if (!utc_form) {
        int a = c.utoff_s < 0 ? -c.utoff_s : c.utoff_s;
        snprintf(off, sizeof(off), "%c%02d:%02d", c.utoff_s < 0 ? '-' : '+', a / 3600 % 100,
                 a / 60 % 60);
    }
    return snprintf(out, TZ_RFC3339_MAX, "%04d-%02d-%02dT%02d:%02d:%02d%s%s", c.year, c.mon,
                    c.mday, c.hour, c.min, c.sec, fs, off);
}

const char *tz_name(const tz *z)
{
    return z->name;
}

/* The first instant > t where the offset differs from the one just before. */
int64_t tz_next_change(const tz *z, int64_t t)
{
    if (t >= TZ_T_MAX) return INT64_MAX;
    t = clamp_t(t);
    int lo = 0, hi = z->ntrans; /* first transition > t */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (z->trans_s[mid] > t) hi = mid; else lo = mid + 1;
    }
    for (int i = lo; i < z->ntrans; i++)
        if (tz_offset(z, z->trans_s[i] - 1) != tz_offset(z, z->trans_s[i]))
            return z->trans_s[i];
    if (!z->has_footer || !z->has_dst || z->std_off == z->dst_off) return INT64_MAX;
    /* past the table: the rule's changes, year by year from t's */
    int64_t from = z->ntrans && t < z->trans_s[z->ntrans - 1] ? z->trans_s[z->ntrans - 1] : t;
    int y0 = year_of(from + z->std_off);
    for (int y = y0 - 1; y <= 9999 && y <= y0 + 401; y++) {
        int64_t ev[2], tmp;
        rule_year(z, y, &ev[0], &ev[1]);
        if (ev[0] > ev[1]) tmp = ev[0], ev[0] = ev[1], ev[1] = tmp;
        for (int k = 0; k < 2; k++)
            if (ev[k] > from && ev[k] <= TZ_T_MAX && tz_offset(z, ev[k] - 1) != tz_offset(z, ev[k]))
                return ev[k];
    }
    return INT64_MAX;
}

int tz_resolve(const tz *z, int64_t l, int64_t out[2])
{
    /* Every offset is within 26 h, so the instants with wall time l lie in
     * [l - 26h, l + 26h]; the offsets in force there are the candidates. */
    enum { WIN = 26 * 3600 + 1, MAXO = 16 };
    int32_t offs[MAXO];
    int noffs = 0;
    int64_t lo = l - WIN, hi = l + WIN, e = lo;
    offs[noffs++] = tz_offset(z, lo);
    while (noffs < MAXO && (e = tz_next_change(z, e)) <= hi) {
        int32_t o = tz_offset(z, e), dup = 0;
        for (int i = 0; i < noffs; i++) dup |= offs[i] == o;
        if (!dup) offs[noffs++] = o;
    }
    int n = 0;
    int64_t sol[MAXO];
    for (int i = 0; i < noffs; i++) {
        int64_t u = l - offs[i];
        if (tz_offset(z, u) != offs[i]) continue;
        int j = n++; /* insertion sort, ascending */
        while (j > 0 && sol[j - 1] > u) sol[j] = sol[j - 1], j--;
        sol[j] = u;
    }
    if (n > 0) {
        out[0] = sol[0];
        if (n > 1) out[1] = sol[1];
        return n > 1 ? 2 : 1;
    }
    /* a gap: the change whose skipped wall times [e + before, e + after) hold l */
    for (e = lo; (e = tz_next_change(z, e)) <= hi;) {
        int64_t before = tz_offset(z, e - 1), after = tz_offset(z, e);
        if (e + before <= l && l < e + after) {
            out[0] = e;
            return 0;
        }
    }
    out[0] = l - offs[0]; /* unreachable for a consistent zone */
    return 1;
}

/* ---- POSIX TZ strings ------------------------------------------------------ */

typedef struct {
    const char *p, *end;
} cur;

static int peek(const cur *c)
{
    return c->p < c->end ? (unsigned char)*c->p : -1;
}

static int num(cur *c, int maxdigits, int *v)
{
    int n = 0, x = 0;
    while (n < maxdigits && peek(c) >= '0' && peek(c) <= '9')
        x = x * 10 + (*c->p++ - '0'), n++;
    *v = x;
    return n ? 0 : -1;
}

static int posix_name(cur *c)
{
    const char *s = c->p;
    if (peek(c) == '<') {
        c->p++;
        while (peek(c) != '>' && peek(c) != -1) {
            int ch = peek(c);
            if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '+' || ch == '-'))
                return -1;
            c->p++;
        }
        if (peek(c) != '>' || c->p - s < 4) return -1;
        c->p++;
        return 0;
    }
    while ((peek(c) >= 'A' && peek(c) <= 'Z') || (peek(c) >= 'a' && peek(c) <= 'z')) c->p++;
    return c->p - s >= 3 ? 0 : -1;
}

/* [+-]hh[:mm[:ss]], hours up to maxh; seconds with the sign as written. */
static int posix_hms(cur *c, int maxh, int32_t *secs)
{
    int sign = 1, h, m = 0, s = 0;
    if (peek(c) == '+' || peek(c) == '-') sign = *c->p++ == '-' ? -1 : 1;
    if (num(c, 3, &h) || h > maxh) return -1;
    if (peek(c) == ':') {
        c->p++;
        if (num(c, 2, &m) || m > 59) return -1;
        if (peek(c) == ':') {
            c->p++;
            if (num(c, 2, &s) || s > 59) return -1;
        }
    }
    *secs = sign * (h * 3600 + m * 60 + s);
    return 0;
}

static int posix_rule(cur *c, tz_rule *r)
{
    r->time_s = 2 * 3600;
    if (peek(c) == 'J') {
        c->p++;
        r->kind = 'J';
        if (num(c, 3, &r->n) || r->n < 1 || r->n > 365) return -1;
    } else if (peek(c) == 'M') {
        c->p++;
        r->kind = 'M';
        if (num(c, 2, &r->m) || r->m < 1 || r->m > 12 || peek(c) != '.') return -1;
        c->p++;
        if (num(c, 1, &r->w) || r->w < 1 || r->w > 5 || peek(c) != '.') return -1;
        c->p++;
        if (num(c, 1, &r->d) || r->d > 6) return -1;
    } else {
        r->kind = 'D';
        if (num(c, 3, &r->n) || r->n > 365) return -1;
    }
    if (peek(c) == '/') {
        c->p++;
        if (posix_hms(c, 167, &r->time_s)) return -1;
    }
    return 0;
}

/* Parse the footer TZ string s[0..len) into z. 0, or -1 when malformed. */
static int posix_parse(tz *z, const char *s, size_t len)
{
    cur c = {s, s + len};
    int32_t off;
    if (posix_name(&c) || posix_hms(&c, 24, &off)) return -1;
    z->std_off = z->dst_off = -off; /* POSIX counts hours west */
    z->has_footer = 1;
    if (peek(&c) == -1) return 0;
    if (posix_name(&c)) return -1;
    z->has_dst = 1;
    z->dst_off = z->std_off + 3600;
    if (peek(&c) != ',' && peek(&c) != -1) {
        if (posix_hms(&c, 24, &off)) return -1;
        z->dst_off = -off;
    }
    if (peek(&c) == -1) { /* no rule: the US rule, as glibc assumes */
        z->start = (tz_rule){'M', 0, 3, 2, 0, 7200};
        z->end = (tz_rule){'M', 0, 11, 1, 0, 7200};
        return 0;
    }
    if (peek(&c) != ',') return -1;
    c.p++;
    if (posix_rule(&c, &z->start) || peek(&c) != ',') return -1;
    c.p++;
    if (posix_rule(&c, &z->end) || peek(&c) != -1) return -1;
    return 0;
}

/* ---- TZif ----------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* Parse a TZif image into z. 0, or -1 with err filled. */
static int tzif_parse(tz *z, const unsigned char *b, size_t n, char err[256])
{
    const char *why = "truncated";
    size_t hdr = 44, at = 0;
    if (n < hdr || memcmp(b, "TZif", 4) != 0) { why = "no TZif magic"; goto bad; }
    int v2 = b[4] >= '2';
    uint32_t cnt[6];
    for (int i = 0; i < 6; i++) cnt[i] = be32(b + 20 + 4 * i);
    int tsz = 4;
    if (v2) {
        /* skip the 32-bit block: the 64-bit one after it says the same, wider */
        uint64_t skip = (uint64_t)cnt[3] * 5 + (uint64_t)cnt[4] * 6 + cnt[5] +
                        (uint64_t)cnt[2] * 8 + cnt[1] + cnt[0];
        if (skip > n - hdr || n - hdr - skip < hdr) goto bad;
        at = hdr + skip;
        if (memcmp(b + at, "TZif", 4) != 0) { why = "no second TZif header"; goto bad; }
        for (int i = 0; i < 6; i++) cnt[i] = be32(b + at + 20 + 4 * i);
        tsz = 8;
    }
    at += hdr;
    uint32_t isutcnt = cnt[0], isstdcnt = cnt[1], leapcnt = cnt[2],
             timecnt = cnt[3], typecnt = cnt[4], charcnt = cnt[5];
    if (leapcnt) { why = "leap-second zones are not supported"; goto bad; }
    if (typecnt == 0 || typecnt > 256 || timecnt > TZ_TRANS_MAX ||
        (isutcnt && isutcnt != typecnt) || (isstdcnt && isstdcnt != typecnt) ||
        charcnt > 65536) {
        why = "bad counts";
        goto bad;
    }
    size_t need = (size_t)timecnt * (tsz + 1) + typecnt * 6 + charcnt + isstdcnt + isutcnt;
    if (need > n - at) goto bad;
    const unsigned char *tt = b + at, *ti = tt + (size_t)timecnt * tsz,
                        *ty = ti + timecnt;
    int32_t toff[256];
    for (uint32_t i = 0; i < typecnt; i++) {
        int32_t o = (int32_t)be32(ty + 6 * i);
        if (o < TZ_OFF_MIN || o > TZ_OFF_MAX || ty[6 * i + 4] > 1 ||
            (charcnt && ty[6 * i + 5] >= charcnt)) {
            why = "bad local time type";
            goto bad;
        }
        toff[i] = o;
    }
    z->trans_s = xmalloc(sizeof(int64_t) * (timecnt ? timecnt : 1));
    z->trans_off = xmalloc(sizeof(int32_t) * (timecnt ? timecnt : 1));
    for (uint32_t i = 0; i < timecnt; i++) {
        int64_t t = tsz == 8 ? be64(tt + 8 * i) : (int64_t)(int32_t)be32(tt + 4 * i);
        if (ti[i] >= typecnt || (i && t <= z->trans_s[i - 1])) {
            why = "bad transition table";
            goto bad;
        }
        z->trans_s[i] = t;
        z->trans_off[i] = toff[ti[i]];
    }
    /* keep only transitions that change the offset: the others (a new
     * abbreviation, a DST flag with the same offset) change nothing tz tells */
    int kept = 0;
    for (uint32_t i = 0; i < timecnt; i++)
        if (z->trans_off[i] != (kept ? z->trans_off[kept - 1] : toff[0])) {
            z->trans_s[kept] = z->trans_s[i];
            z->trans_off[kept++] = z->trans_off[i];
        }
    z->ntrans = kept;
    z->first_off = toff[0];
    at += need;
    if (v2) { /* the footer is required: a file without it is cut short */
        const unsigned char *f = b + at, *nl;
        if (at >= n || f[0] != '\n' || !(nl = memchr(f + 1, '\n', n - at - 1))) {
            why = "bad footer";
            goto bad;
        }
        size_t flen = (size_t)(nl - f - 1);
        if (flen && posix_parse(z, (const char *)f + 1, flen)) {
            why = "bad footer TZ string";
            goto bad;
        }
        rule_settle(z);
    }
    return 0;
bad:
    snprintf(err, 256, "tz: %s: not a valid TZif file (%s)", z->name, why);
    return -1;
}

/* ---- names, files, cache ---------------------------------------------------- */

static const char *name_check(const char *name)
{
    size_t n = strlen(name);
    if (n == 0) return "empty";
    if (n > TZ_NAME_MAX) return "too long";
    if (name[0] == '/') return "an absolute path";
    const char *comp = name;
    for (size_t i = 0; i <= n; i++) {
        char ch = name[i];
        if (ch == '/' || ch == '\0') {
            size_t cl = (size_t)(name + i - comp);
            if (cl == 0) return "an empty path component";
            comp = name + i + 1;
            continue;
        }
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '+' || ch == '-'))
            return ch == '.' ? "a '.': no relative paths" : "a character outside A-Z a-z 0-9 _ + - /";
    }
    return NULL;
}

static tz *tz_load(const char *name, char err[256])
{
    tz *z = xcalloc(1, sizeof(*z));
    util_copy(z->name, sizeof(z->name), name);
    if (strcmp(name, "UTC") == 0) { /* built in: the default zone needs no tzdata */
        z->has_footer = 1;
        return z;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", tz_dir ? tz_dir : TZ_DEFAULT_DIR, name);
    unsigned char *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd < 0 && errno != ENOENT && errno != ENOTDIR)
            snprintf(err, 256, "tz: %s: %s", name, strerror(errno));
        else
            snprintf(err, 256, "tz: unknown time zone '%s'", name);
        goto fail;
    }
    if (st.st_size > TZ_FILE_MAX) {
        snprintf(err, 256, "tz: %s: not a valid TZif file (too large)", name);
        goto fail;
    }
    size_t n = (size_t)st.st_size, got = 0;
    buf = xmalloc(n ? n : 1);
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, 256, "tz: %s: read failed", name);
            goto fail;
        }
        got += (size_t)r;
    }
    if (tzif_parse(z, buf, n, err)) goto fail;
    free(buf);
    close(fd);
    return z;
fail:
    free(buf);
    if (fd >= 0) close(fd);
    tz_free(z);
    return NULL;
}

tz *tz_parse(const char *name, const unsigned char *buf, size_t n, char err[256])
{
    tz *z = xcalloc(1, sizeof(*z));
    util_copy(z->name, sizeof(z->name), name);
    if (n > TZ_FILE_MAX) {
        snprintf(err, 256, "tz: %s: not a valid TZif file (too large)", z->name);
        tz_free(z);
        return NULL;
    }
    if (tzif_parse(z, buf, n, err)) {
        tz_free(z);
        return NULL;
    }
    return z;
}

void tz_free(tz *z)
{
    if (!z) return;
    free(z->trans_s);
    free(z->trans_off);
    free(z);
}

void tz_set_dir(const char *dir)
{
    pthread_mutex_lock(&tz_lock);
    free(tz_dir);
    tz_dir = dir ? xstrdup(dir) : NULL;
    pthread_mutex_unlock(&tz_lock);
}

const tz *tz_get(const char *name, char err[256])
{
    const char *why = name_check(name);
    if (why) {
        snprintf(err, 256, "tz: '%.*s' is not a time zone name (%s)", TZ_NAME_MAX, name, why);
        return NULL;
    }
    pthread_mutex_lock(&tz_lock);
    tz *z;
    for (z = tz_cache; z; z = z->next)
        if (strcmp(z->name, name) == 0) break;
    if (!z && (z = tz_load(name, err))) {
        z->next = tz_cache;
        tz_cache = z;
    }
    pthread_mutex_unlock(&tz_lock);
    return z;
}
