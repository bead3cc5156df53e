/* h1_answer.c -- see h1_answer.h. */
#include "delivery/h1_answer.h"

#include "base/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <strings.h>

/* tok is one of the comma-separated tokens of v..end (case-insensitive) */
static int h1_token(const char *v, const char *end, const char *tok)
{
    size_t tl = strlen(tok);
    while (v < end) {
        const char *comma = memchr(v, ',', (size_t)(end - v));
        const char *e = comma ? comma : end;
        while (v < e && (*v == ' ' || *v == '\t')) v++;
        const char *te = e;
        while (te > v && (te[-1] == ' ' || te[-1] == '\t')) te--;
        if ((size_t)(te - v) == tl && strncasecmp(v, tok, tl) == 0) return 1;
        v = comma ? comma + 1 : end;
    }
    return 0;
}

/* The last coding of a Transfer-Encoding value is chunked. */
static int h1_chunked_last(const char *v, const char *end)
{
    const char *last = v;
    for (const char *q = v; q < end; q++)
        if (*q == ',') last = q + 1;
    return h1_token(last, end, "chunked");
}

#define H1_BAD(...) do { snprintf(a->err, sizeof(a->err), __VA_ARGS__); return -1; } while (0)

/* The length of the head at p (up to and with its empty line: CRLF CRLF,
 * LF LF or a mix), 0 when it has not all arrived. */
static size_t h1_head_len(const char *p, size_t n)
{
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(p + n - q))) != NULL; q++) {
        const char *r = q + 1;
        if (r < p + n && *r == '\r') r++;
        if (r < p + n && *r == '\n') return (size_t)(r + 1 - p);
    }
    return 0;
}

int64_t h1_retry_after(const char *v, size_t n, int64_t now_s)
{
    char buf[64];
    int64_t x = 0;
    size_t i = 0;
    if (n == 0) return -1;
    /* delay-seconds of any length: a delay past H1_RETRY_AFTER_MAX_S is
     * that long (the caller caps it further), never unreadable */
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++)
        if ((x = x * 10 + (v[i] - '0')) > H1_RETRY_AFTER_MAX_S) x = H1_RETRY_AFTER_MAX_S;
    if (i == n) return x * 1000;
    if (n >= sizeof(buf)) return -1;
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    memcpy(buf, v, n);
    buf[n] = '\0';
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end) return -1;
    int64_t at = (int64_t)timegm(&tm);
    if (at <= now_s) return 0;
    return at - now_s > H1_RETRY_AFTER_MAX_S ? H1_RETRY_AFTER_MAX_S * 1000 : (at - now_s) * 1000;
}

/* An answer head of n bytes: status and framing. */
static int h1_head(h1_answer *a, const char *p, size_t n)
{
    /* HTTP/1.0 and 1.1 only, as libcurl reads them (it refuses 1.2 to 1.9) */
    if (n < 13 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '1' || p[8] != ' ' ||
        p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (p[12] != ' ' && p[12] != '\r' && p[12] != '\n'))
        H1_BAD("malformed answer: bad status line");
    if (memchr(p, '\0', n)) H1_BAD("malformed answer: NUL in the head");
    long status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    int close_tok = 0, keep_tok = 0, chunked = 0, coded = 0, have_len = 0, fields = 0;
    int64_t clen = 0;
    const char *end = p + n, *line = (const char *)memchr(p, '\n', n) + 1;
    while (line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        size_t ll = (size_t)(eol - line);
        if (ll && line[ll - 1] == '\r') ll--;
        if (ll == 0) break;
        const char *colon = memchr(line, ':', ll);
        /* a line without a colon continues the field above it (obs-fold),
         * if it starts with a blank and there is one; else it is refused,
         * as libcurl refuses it */
        if (!colon && (!fields || (line[0] != ' ' && line[0] != '\t')))
            H1_BAD("malformed answer: header line without a colon");
        fields = 1;
        if (colon) {
            size_t nl = (size_t)(colon - line);
            const char *v = colon + 1, *ve = line + ll;
            while (v < ve && (*v == ' ' || *v == '\t')) v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
            if (nl == 14 && strncasecmp(line, "content-length", 14) == 0) {
                int64_t x = 0;
                if (v == ve) H1_BAD("malformed answer: empty Content-Length");
                for (const char *q = v; q < ve; q++) {
                    if (*q < '0' || *q > '9' || x > 100000000000000LL)
                        H1_BAD("malformed answer: bad Content-Length");
                    x = x * 10 + (*q - '0');
                }
                if (have_len && x != clen) H1_BAD("malformed answer: two Content-Lengths");
                have_len = 1;
                clen = x;
            } else if (nl == 17 && strncasecmp(line, "transfer-encoding", 17) == 0) {
                coded = 1;
                chunked = h1_chunked_last(v, ve);
            } else if (nl == 11 && strncasecmp(line, "retry-after", 11) == 0) {
                int64_t ms = h1_retry_after(v, (size_t)(ve - v), (int64_t)time(NULL));
                a->retry_after_ms = ms >= 0 ? ms + 1 : 0;
            } else if (nl == 10 && strncasecmp(line, "connection", 10) == 0) {
                close_tok |= h1_token(v, ve, "close");
                keep_tok |= h1_token(v, ve, "keep-alive");
            }
        }
        line = eol + 1;
    }
    a->status = status;
    if (status < 200) {
        if (status == 101) H1_BAD("malformed answer: 101 Switching Protocols");
        return 0; /* an interim answer (100, 103): the final one follows */
    }
    a->close = close_tok || (p[7] == '0' && !keep_tok);
    if (a->head_req || status == 204 || status == 304) {
        a->phase = PH_DONE;
    } else if (chunked) {
        a->phase = PH_CHUNK_SIZE;
    } else if (coded || !have_len || clen > H1_DRAIN_MAX) {
        /* the body runs to the close, or is long: not read, the connection closes */
        a->close = 1;
        a->capped = have_len && clen > H1_DRAIN_MAX;
        a->phase = PH_DONE;
    } else {
        a->remain = clen;
        a->phase = clen ? PH_BODY : PH_DONE;
    }
    return 0;
}

static int h1_hex(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int h1_answer_has_status(const h1_answer *a)
{
    return a->status >= 200 && a->phase != PH_HEAD;
}

int h1_answer_parse(h1_answer *a, const char *data, size_t len, size_t *used)
{
    size_t pos = 0;
    int rc = 0;
    while (rc == 0) {
        const char *p = data + pos;
        size_t avail = len - pos;
        if (a->phase == PH_DONE) {
            rc = 1;
        } else if (a->phase == PH_HEAD) {
            size_t n = h1_head_len(p, avail < H1_HEAD_MAX ? avail : H1_HEAD_MAX);
            if (!n) {
                if (avail >= H1_HEAD_MAX) {
                    snprintf(a->err, sizeof(a->err), "malformed answer: head over 64 KiB");
                    rc = -1;
                }
                break;
            }
            if (h1_head(a, p, n) != 0) rc = -1;
            pos += n;
        } else if (a->phase == PH_BODY || a->phase == PH_CHUNK_DATA) {
            size_t n = avail < (uint64_t)a->remain ? avail : (size_t)a->remain;
            if (a->keep_on && (a->status < 200 || a->status > 299) && a->kept < H1_KEEP_MAX && n) {
                size_t k = n < H1_KEEP_MAX - a->kept ? n : H1_KEEP_MAX - a->kept;
                if (!a->keep) a->keep = xmalloc(H1_KEEP_MAX);
                memcpy(a->keep + a->kept, p, k);
                a->kept += k;
            }
            pos += n;
            a->remain -= (int64_t)n;
            a->body += (int64_t)n;
            if (a->phase == PH_CHUNK_DATA && a->body > H1_DRAIN_MAX) {
                /* a chunked body past the bound: not read on, the connection closes */
                a->capped = a->close = 1;
                a->phase = PH_DONE;
                continue;
            }
            if (a->remain > 0) break;
            a->phase = a->phase == PH_BODY ? PH_DONE : PH_CHUNK_CRLF;
        } else if (a->phase == PH_CHUNK_CRLF) {
            size_t n = avail >= 1 && p[0] == '\n' ? 1 : avail >= 2 && p[0] == '\r' && p[1] == '\n' ? 2 : 0;
            if (!n) {
                if (avail == 0 || (avail == 1 && p[0] == '\r')) break;
                snprintf(a->err, sizeof(a->err), "malformed answer: chunk not ended by CRLF");
                rc = -1;
                break;
            }
            pos += n;
            a->phase = PH_CHUNK_SIZE;
        } else if (a->phase == PH_CHUNK_EXT) {
            const char *eol = memchr(p, '\n', avail);
            pos += eol ? (size_t)(eol + 1 - p) : avail;
            if (!eol) break;
            a->phase = a->remain ? PH_CHUNK_DATA : PH_TRAILER;
        } else { /* PH_CHUNK_SIZE, PH_TRAILER: one line, LF or CRLF ended */
            /* a trailer line is kept whole to be read: shorter than 4 KiB
             * with its line end, as libcurl takes it */
            size_t win = a->phase == PH_TRAILER ? H1_LINE_MAX - 1 : H1_LINE_MAX;
            const char *eol = memchr(p, '\n', avail < win ? avail : win);
            if (!eol && avail < win) break;
            if (!eol && a->phase == PH_TRAILER) {
                snprintf(a->err, sizeof(a->err), "malformed answer: trailer line of 4 KiB or more");
                rc = -1;
                break;
            }
            size_t ll = eol ? (size_t)(eol - p) : win, i = 0;
            pos += eol ? ll + 1 : win;
            if (eol && ll && p[ll - 1] == '\r') ll--;
            if (a->phase == PH_TRAILER) {
                if (ll == 0) a->phase = PH_DONE;
                continue;
            }
            int64_t size = 0;
            for (; i < ll && h1_hex((unsigned char)p[i]) >= 0; i++) {
                if (size > (INT64_MAX >> 4)) break;
                size = size * 16 + h1_hex((unsigned char)p[i]);
            }
            /* at most 16 digits, as libcurl reads them */
            if (i == 0 || i > 16 || (i < ll && p[i] != ';' && p[i] != ' ' && p[i] != '\t') ||
                (!eol && i == ll)) {
                snprintf(a->err, sizeof(a->err), "malformed answer: bad chunk size");
                rc = -1;
                break;
            }
            a->remain = size;
            /* a size line longer than that has an extension: the rest of
             * it is read and dropped, however long (libcurl reads it so) */
            a->phase = !eol ? PH_CHUNK_EXT : size ? PH_CHUNK_DATA : PH_TRAILER;
        }
    }
    *used = pos;
    return rc;
}
