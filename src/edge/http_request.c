/* http_request.c -- see http_request.h. */
#include "edge/http_request.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

void http_request_init(http_request *p, size_t max_body)
{
    p->max_body = max_body;
    http_request_reset(p);
}

/* The field table and the refusal's message are not cleared: nfields and
 * the refusal say how much of them holds anything. */
void http_request_reset(http_request *p)
{
    size_t max_body = p->max_body;
    memset(p, 0, offsetof(http_request, refusal));
    p->refusal.status = 0;
    p->max_body = max_body;
    p->keep_alive = 1;
}

static int http_refuse(http_request *p, int status, const char *reason, const char *code,
                       const char *msg)
{
    p->phase = HTTP_PHASE_ERROR;   /* and stays so: the request is lost */
    p->refusal.status = status;
    p->refusal.reason = reason;
    p->refusal.code = code;
    util_copy(p->refusal.msg, sizeof(p->refusal.msg), msg);
    return HTTP_REQ_ERROR;
}

static int http_bad(http_request *p, const char *msg)
{
    return http_refuse(p, 400, "Bad Request", "bad_request", msg);
}

static int http_too_large(http_request *p)
{
    return http_refuse(p, 413, "Payload Too Large", "payload_too_large",
                       "body: larger than server.max_body");
}

/* tchar of RFC 9110 5.6.2, a bit a character (0-63, 64-127): visible
 * ASCII but the separators ( ) < > @ , ; : \ " / [ ] ? = { } */
static const uint64_t http_tchar[4] = {0x03ff6cfa00000000ULL, 0x57ffffffc7fffffeULL, 0, 0};

static inline int http_token_char(unsigned char ch)
{
    return http_tchar[ch >> 6] >> (ch & 63) & 1;
}

/* field-vchar, SP and HTAB (RFC 9110 5.5): no NUL, CR, LF, other controls
 * or DEL */
static inline int http_value_char(unsigned char ch)
{
    return ch == '\t' || (ch >= 32 && ch != 127);
}

/* 1 when s[0..n) is all http_value_char. Eight bytes a step: a word with no
 * byte below 0x20 and none equal to 0x7f passes whole, and only a word that
 * holds one is looked at a byte at a time (HTAB, below 0x20, is allowed; a
 * request's values rarely hold one). The word tests are exact (SWAR, as in
 * "Bit Twiddling Hacks"): with no byte below 0x20, w - 0x2020.. borrows
 * nowhere, and a byte of 0xa0 or more, whose difference keeps its high bit,
 * has it cleared by ~w; the lowest byte below 0x20 always sets its own. The
 * same for a zero byte of w ^ 0x7f7f.., a byte equal to 0x7f. */
static int http_value_ok(const char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w, d;
        memcpy(&w, s + i, 8);
        d = w ^ (ones * 0x7f);
        if ((((w - ones * 0x20) & ~w) | ((d - ones) & ~d)) & high) {
            for (size_t k = i; k < i + 8; k++)
                if (!http_value_char((unsigned char)s[k])) return 0;
        }
    }
    for (; i < n; i++)
        if (!http_value_char((unsigned char)s[i])) return 0;
    return 1;
}

static int http_hex(unsigned char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static char *http_trim(char *p, char **end)
{
    while (p < *end && (*p == ' ' || *p == '\t')) p++;
    while (*end > p && ((*end)[-1] == ' ' || (*end)[-1] == '\t')) (*end)--;
    return p;
}

/* The next element of a comma-separated list (RFC 9110 5.6.1) at *p, OWS
 * trimmed; empty elements are skipped. 1 and the element, or 0 at the end. */
static int http_list_next(const char **p, const char **tok, size_t *len)
{
    const char *s = *p;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == ',') s++;
        if (!*s) return 0;
        const char *e = s;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t')) t--;
        *p = e;
        *tok = s;
        *len = (size_t)(t - s);
        return 1;
    }
}

const char *http_request_target(const http_request *p, const char *buf)
{
    return p->root ? "/" : buf + p->target;
}

/* 1 when field i is named name (of n bytes), in any case. The lengths are
 * compared first: most fields differ there, and a request's few fields
 * are each looked for by a dozen names. */
static int http_field_is(const http_request *p, const char *buf, int i, const char *name,
                         size_t n)
{
    return p->name_len[i] == n && strncasecmp(buf + p->field[i][0], name, n) == 0;
}

/* http_field_is of a literal name, its length from the literal */
#define HTTP_FIELD_IS(p, buf, i, lit) http_field_is((p), (buf), (i), "" lit, sizeof(lit) - 1)

const char *http_request_header(const http_request *p, const char *buf, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < p->nfields; i++)
        if (http_field_is(p, buf, i, name, n)) return buf + p->field[i][1];
    return NULL;
}

int http_request_header_count(const http_request *p, const char *buf, const char *name)
{
    size_t n = strlen(name);
    int k = 0;
    for (int i = 0; i < p->nfields; i++) k += http_field_is(p, buf, i, name, n);
    return k;
}

/* Find the end of the head, going on from where the last call stopped, so
 * that a head arriving byte by byte is scanned once. Lines end with CRLF
 * only: a bare LF or CR is refused as soon as it arrives (RFC 9112 2.2
 * lets a server choose; accepting LF would make tickd read a request
 * differently from a proxy in front that does not). Empty lines before the
 * request line are taken out of the buffer. HTTP_REQ_HEAD (p->scan = the
 * head's length), HTTP_REQ_MORE or HTTP_REQ_ERROR. */
static int http_scan_head(http_request *p, char *in, size_t *len)
{
    size_t i = p->scan, n = *len;
    if (i == 0) {
        size_t skip = 0;
        while (skip + 2 <= n && in[skip] == '\r' && in[skip + 1] == '\n') skip += 2;
        if (skip) {
            memmove(in, in + skip, n - skip);
            *len = n -= skip;
        }
        if (n && in[0] == '\n') goto bare_lf;
        if (n == 1 && in[0] == '\r') return HTTP_REQ_MORE;
        i = 1;   /* in[0] is not a line end */
    }
    /* in[i] after a CR must be LF; elsewhere an LF is bare. Only the bytes
     * at a CR or an LF decide: the text between is skipped by memchr, one
     * line at a time, as far as the head may reach. */
    size_t stop = n < HTTP_MAX_HEAD ? n : HTTP_MAX_HEAD;
    while (i < stop) {
        if (in[i - 1] == '\r') {
            if (in[i] != '\n')
                return http_bad(p, "request: bare CR in the head (lines end with CRLF)");
            if (i >= 3 && in[i - 2] == '\n') {
                p->scan = i + 1;
                return HTTP_REQ_HEAD;
            }
            i++;
            continue;
        }
        const char *cr = memchr(in + i, '\r', stop - i);
        size_t k = cr ? (size_t)(cr - in) : stop;
        if (memchr(in + i, '\n', k - i)) goto bare_lf;
        i = k + 1;
    }
    if (n > HTTP_MAX_HEAD)
        return http_refuse(p, 431, "Request Header Fields Too Large", "header_too_large",
                           "headers: larger than 16 KiB");
    p->scan = n;
    return HTTP_REQ_MORE;
bare_lf:
    return http_bad(p, "request: bare LF in the head (lines end with CRLF)");
}

/* The target: origin-form ("/path?q"), or absolute-form
 * ("http://host/path?q", what a proxy sends), routed on its path. */
static int http_parse_target(http_request *p, const char *base, const char *tgt,
                             const char *end)
{
    if (*tgt == '/') {
        p->target = (uint32_t)(tgt - base);
        return 0;
    }
    size_t n = (size_t)(end - tgt), skip;
    if (n > 7 && strncasecmp(tgt, "http://", 7) == 0) skip = 7;
    else if (n > 8 && strncasecmp(tgt, "https://", 8) == 0) skip = 8;
    else return -1;
    const char *auth = tgt + skip, *q = auth;
    while (q < end && *q != '/' && *q != '?' && *q != '#') q++;
    if (q == auth) return -1;
    if (q == end) {
        p->root = 1;
        return 0;
    }
    if (*q != '/') return -1;
    p->target = (uint32_t)(q - base);
    return 0;
}

/* Parse the head in base[0..hlen) in place (every line ends with CRLF:
 * http_scan_head saw to it). 0, or HTTP_REQ_ERROR. */
static int http_parse_head(http_request *p, char *base, size_t hlen)
{
    char *q = base, *end = base + hlen - 2;   /* the last CRLF */
    char msg[256];

    /* request line: METHOD SP target SP HTTP/1.x */
    char *eol = memchr(q, '\r', (size_t)(end - q));
    if (!eol) goto bad;
    char *sp1 = memchr(q, ' ', (size_t)(eol - q));
    if (!sp1 || sp1 == q) goto bad;
    for (char *c = q; c < sp1; c++)
        if (!http_token_char((unsigned char)*c)) goto bad;
    char *tgt = sp1 + 1;
    char *sp2 = memchr(tgt, ' ', (size_t)(eol - tgt));
    if (!sp2 || sp2 == tgt) goto bad;
    for (char *c = tgt; c < sp2; c++)
        if ((unsigned char)*c <= 32 || (unsigned char)*c >= 127) goto bad;
    if (eol - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
        (sp2[8] != '0' && sp2[8] != '1'))
        goto bad;
    if (http_parse_target(p, base, tgt, sp2) != 0)
        return http_bad(p, "request: target is neither /path nor http://host/path");
    p->http10 = sp2[8] == '0';
    p->keep_alive = !p->http10;
    *sp1 = *sp2 = '\0';
    p->method = 0;
    p->head = strcmp(base, "HEAD") == 0;

    /* fields: name ":" OWS value OWS, the name a token, the value without
     * control characters (RFC 9110 5.5, RFC 9112 5) */
    q = eol + 2;
    while (q < end) {
        eol = memchr(q, '\r', (size_t)(end - q) + 1);
        char *colon = q;
        /* (*eol, a CR, is not a tchar) */
        while (http_token_char((unsigned char)*colon)) colon++;
        if (colon == q || colon == eol || *colon != ':') goto bad;   /* also obs-fold */
        if (!http_value_ok(colon + 1, (size_t)(eol - colon - 1))) {
            snprintf(msg, sizeof(msg), "%.*s: control character in the value",
                     (int)(colon - q > 64 ? 64 : colon - q), q);
            return http_bad(p, msg);
        }
        if (p->nfields == HTTP_MAX_FIELDS)
            return http_refuse(p, 431, "Request Header Fields Too Large", "header_too_large",
                               "headers: more than 64 fields");
        char *vend = eol;
        char *v = http_trim(colon + 1, &vend);
        *colon = '\0';
        *vend = '\0';
        p->field[p->nfields][0] = (uint32_t)(q - base);
        p->field[p->nfields][1] = (uint32_t)(v - base);
        p->name_len[p->nfields] = (uint16_t)(colon - q);
        p->nfields++;
        q = eol + 2;
    }

    /* exactly one Host in HTTP/1.1, never two (RFC 9112 3.2) */
    int hosts = http_request_header_count(p, base, "Host");
    if (hosts > 1 || (hosts == 0 && !p->http10))
        return http_bad(p, hosts ? "Host: given more than once"
                                 : "Host: missing (HTTP/1.1 requires it)");
    if (hosts && strpbrk(http_request_header(p, base, "Host"), " \t,/\\@"))
        return http_bad(p, "Host: not host[:port]");

    /* Connection: a list of tokens, in every Connection field; close wins */
    int close_asked = 0, keep_asked = 0;
    for (int i = 0; i < p->nfields; i++) {
        if (!HTTP_FIELD_IS(p, base, i, "Connection")) continue;
        const char *l = base + p->field[i][1], *tok;
        size_t n;
        while (http_list_next(&l, &tok, &n)) {
            close_asked |= n == 5 && strncasecmp(tok, "close", 5) == 0;
            keep_asked |= n == 10 && strncasecmp(tok, "keep-alive", 10) == 0;
        }
    }
    if (close_asked) p->keep_alive = 0;
    else if (p->http10 && keep_asked) p->keep_alive = 1;
    return 0;
bad:
    return http_bad(p, "request: malformed HTTP/1.1 request");
}

/* The body's framing (RFC 9112 6): Transfer-Encoding, whose codings across
 * all its fields must be exactly "chunked" (chunked not last, or twice: 400,
 * the length cannot be known; other codings before chunked: 501), never
 * with Content-Length and never in HTTP/1.0; or Content-Length, 1*DIGIT,
 * repeated only with the same value (RFC 9110 8.6). 0, or HTTP_REQ_ERROR. */
static int http_framing(http_request *p, const char *base)
{
    int te = 0, cl = 0, codings = 0, chunked_at = 0, twice = 0;
    uint64_t len = 0;
    for (int i = 0; i < p->nfields; i++) {
        const char *l = base + p->field[i][1], *tok;
        size_t n;
        if (HTTP_FIELD_IS(p, base, i, "Transfer-Encoding")) {
            te = 1;
            while (http_list_next(&l, &tok, &n)) {
                codings++;
                if (n == 7 && strncasecmp(tok, "chunked", 7) == 0) {
                    twice |= chunked_at != 0;
                    chunked_at = codings;
                }
            }
        } else if (HTTP_FIELD_IS(p, base, i, "Content-Length")) {
            /* a list (Content-Length: 5, 5) is read as the fields repeated */
            int elems = 0;
            while (http_list_next(&l, &tok, &n)) {
                uint64_t v = 0;
                size_t k = 0;
                for (; k < n && tok[k] >= '0' && tok[k] <= '9'; k++)
                    v = v > UINT64_MAX / 16 ? v : v * 10 + (uint64_t)(tok[k] - '0');
                if (k < n) return http_bad(p, "Content-Length: not a number (1*DIGIT)");
                if (cl && v != len)
                    return http_bad(p, "Content-Length: given more than once with different values");
                cl = 1;
                len = v;
                elems++;
            }
            if (!elems) return http_bad(p, "Content-Length: empty");
        }
    }
    if (te) {
        if (p->http10) return http_bad(p, "Transfer-Encoding: not allowed in HTTP/1.0");
        if (cl) return http_bad(p, "Transfer-Encoding: not allowed with Content-Length");
        if (!chunked_at || chunked_at != codings || twice)
            return http_bad(p, "Transfer-Encoding: chunked must be the last coding, once");
        if (codings > 1)
            return http_refuse(p, 501, "Not Implemented", "not_implemented",
                               "Transfer-Encoding: only chunked is supported");
        p->chunked = 1;
        return 0;
    }
    if (len > p->max_body) return http_too_large(p);
    p->body_len = (size_t)len;
    return 0;
}

/* The head of hlen bytes has arrived: read it, its framing and Expect. */
static int http_head_done(http_request *p, char *base, size_t hlen)
{
    if (http_parse_head(p, base, hlen) != 0 || http_framing(p, base) != 0) return HTTP_REQ_ERROR;
    const char *expect = http_request_header(p, base, "Expect");
    if (expect && strcasecmp(expect, "100-continue") != 0)
        return http_refuse(p, 417, "Expectation Failed", "expectation_failed",
                           "Expect: only 100-continue is supported");
    p->expect = expect != NULL;
    p->body = hlen;
    if (p->chunked) {
        p->phase = HTTP_PHASE_CHUNKED;
        p->len = hlen;
        p->cpos = hlen;
    } else {
        p->phase = HTTP_PHASE_BODY;
        p->len = hlen + p->body_len;
    }
    return HTTP_REQ_HEAD;
}

enum {
    CS_SIZE0,   /* the first digit of a chunk size */
    CS_SIZE,    /* more digits, ';' or CR */
    CS_EXT,     /* chunk extensions up to CR */
    CS_SIZE_LF,
    CS_DATA,
    CS_DATA_CR,
    CS_DATA_LF,
    CS_TLINE,   /* the start of a trailer line, or the final CR */
    CS_TNAME,
    CS_TVALUE,
    CS_TLF,
    CS_END_LF
};

static int http_chunk_bad(http_request *p, const char *why)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "body: malformed chunked encoding (%s)", why);
    return http_bad(p, msg);
}

/* Decode the chunked body from p->cpos on, in place and once per byte: the
 * data goes to body + cout, the framing is dropped, so that the buffer
 * holds the head, the decoded data and what was not read yet. Sizes are
 * 1*HEXDIG; extensions (bounded) and trailer fields (bounded, dropped) are
 * checked byte by byte. */
static int http_chunked(http_request *p, char *in, size_t *len)
{
    uint64_t max = p->max_body;
    size_t i = p->cpos, n = *len;
    while (i < n) {
        unsigned char ch = (unsigned char)in[i];
        int h;
        if (p->cst == CS_DATA) {
            size_t take = n - i < p->csize ? n - i : (size_t)p->csize;
            memmove(in + p->body + p->cout, in + i, take);
            p->cout += take;
            p->csize -= take;
            i += take;
            if (p->csize == 0) p->cst = CS_DATA_CR;
            continue;
        }
        if (p->cst >= CS_TLINE && ++p->ctrail > HTTP_MAX_TRAILER)
            return http_chunk_bad(p, "trailer section over 4 KiB");
        switch (p->cst) {
        case CS_SIZE0:
            if ((h = http_hex(ch)) < 0) return http_chunk_bad(p, "chunk size not hex");
            p->csize = (uint64_t)h;
            p->cext = 1;   /* digits */
            p->cst = CS_SIZE;
            break;
        case CS_SIZE:
            if ((h = http_hex(ch)) >= 0) {
                if (++p->cext > 16) return http_chunk_bad(p, "chunk size over 16 digits");
                p->csize = p->csize * 16 + (uint64_t)h;
                if (p->csize > max) return http_too_large(p);   /* also keeps it from overflowing */
            } else if (ch == ';') {
                p->cext = 0;
                p->cst = CS_EXT;
            } else if (ch == '\r') {
                p->cst = CS_SIZE_LF;
            } else {
                return http_chunk_bad(p, "chunk size not hex");
            }
            break;
        case CS_EXT:
            if (ch == '\r') p->cst = CS_SIZE_LF;
            else if (!http_value_char(ch)) return http_chunk_bad(p, "control character in a chunk extension");
            else if (++p->cext > HTTP_MAX_CHUNK_EXT) return http_chunk_bad(p, "chunk extension over 1 KiB");
            break;
        case CS_SIZE_LF:
            if (ch != '\n') return http_chunk_bad(p, "no LF after CR");
            if (p->cout + p->csize > max) return http_too_large(p);
            p->cst = p->csize ? CS_DATA : CS_TLINE;
            break;
        case CS_DATA_CR:
            if (ch != '\r') return http_chunk_bad(p, "no CRLF after the chunk data");
            p->cst = CS_DATA_LF;
            break;
        case CS_DATA_LF:
            if (ch != '\n') return http_chunk_bad(p, "no CRLF after the chunk data");
            p->cst = CS_SIZE0;
            break;
        case CS_TLINE:
            if (ch == '\r') p->cst = CS_END_LF;
            else if (http_token_char(ch)) p->cst = CS_TNAME;
            else return http_chunk_bad(p, "bad trailer field");
            break;
        case CS_TNAME:
            if (ch == ':') p->cst = CS_TVALUE;
            else if (!http_token_char(ch)) return http_chunk_bad(p, "bad trailer field");
            break;
        case CS_TVALUE:
            if (ch == '\r') p->cst = CS_TLF;
            else if (!http_value_char(ch)) return http_chunk_bad(p, "bad trailer field");
            break;
        case CS_TLF:
            if (ch != '\n') return http_chunk_bad(p, "no LF after CR");
            p->cst = CS_TLINE;
            break;
        case CS_END_LF:
            if (ch != '\n') return http_chunk_bad(p, "no LF after CR");
            /* the framing took at least "0\r\n\r\n": the byte after the
             * data is not the next request's */
            p->body_len = p->cout;
            p->len = i + 1;
            in[p->body + p->cout] = '\0';
            p->phase = HTTP_PHASE_DONE;
            return HTTP_REQ_DONE;
        }
        i++;
    }
    /* all read is decoded or dropped */
    *len = p->cpos = p->body + p->cout;
    return HTTP_REQ_MORE;
}

int http_request_parse(http_request *p, char *buf, size_t *len)
{
    switch (p->phase) {
    case HTTP_PHASE_HEAD: {
        int k = http_scan_head(p, buf, len);
        if (k != HTTP_REQ_HEAD) return k;
        size_t hlen = p->scan;
        p->scan = 0;
        return http_head_done(p, buf, hlen);
    }
    case HTTP_PHASE_BODY:
        if (*len - p->body < p->body_len) return HTTP_REQ_MORE;
        p->phase = HTTP_PHASE_DONE;
        return HTTP_REQ_DONE;
    case HTTP_PHASE_CHUNKED:
        return http_chunked(p, buf, len);
    case HTTP_PHASE_DONE:
        return HTTP_REQ_DONE;
    default:
        return HTTP_REQ_ERROR;
    }
}
