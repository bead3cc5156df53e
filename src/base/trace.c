/* trace.c -- W3C traceparent and tracestate (trace.h). */
#include "base/trace.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"

static int trace_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int trace_zero(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != '0') return 0;
    return 1;
}

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -1)

int trace_parent_parse(const char *s, char out[TRACE_PARENT_LEN + 1], char *why, size_t whylen)
{
    size_t n = strlen(s);
    if (n < TRACE_PARENT_LEN)
        return WHY("must be version-traceid-parentid-flags, 55 characters (got %zu)", n);
    if (!trace_hex(s, 2)) return WHY("version: must be 2 lowercase hex digits");
    if (memcmp(s, "ff", 2) == 0) return WHY("version: ff is not a valid version");
    if (memcmp(s, "00", 2) == 0 ? n != TRACE_PARENT_LEN
                                : n > TRACE_PARENT_LEN && s[TRACE_PARENT_LEN] != '-')
        return WHY("must be 55 characters for version %.2s", s);
    if (s[2] != '-' || s[35] != '-' || s[52] != '-')
        return WHY("must be version-traceid-parentid-flags, split by '-'");
    if (!trace_hex(s + 3, 32) || trace_zero(s + 3, 32))
        return WHY("trace id: must be 32 lowercase hex digits, not all zero");
    if (!trace_hex(s + 36, 16) || trace_zero(s + 36, 16))
        return WHY("parent id: must be 16 lowercase hex digits, not all zero");
    if (!trace_hex(s + 53, 2)) return WHY("flags: must be 2 lowercase hex digits");
    /* a later version is read as 00 and sent on as 00 (the rules' advice) */
    memcpy(out, "00", 2);
    memcpy(out + 2, s + 2, TRACE_PARENT_LEN - 2);
    out[TRACE_PARENT_LEN] = '\0';
    return 0;
}

int trace_state_check(const char *s, char *why, size_t whylen)
{
    size_t n = strlen(s);
    int members = 0;
    if (n == 0 || n > TRACE_STATE_MAX) return WHY("must be 1 to %d characters", TRACE_STATE_MAX);
    for (const char *p = s; p <= s + n;) {
        const char *end = strchr(p, ',');
        if (!end) end = s + n;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        const char *e = end;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
        if (e > p) { /* an empty member is allowed, and skipped */
            const char *eq = memchr(p, '=', (size_t)(e - p));
            if (!eq || eq == p || eq - p > 256 || e - eq - 1 < 1 || e - eq - 1 > 256)
                return WHY("list member %d: must be key=value", members + 1);
            if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
                return WHY("list member %d: a key starts with a-z or 0-9", members + 1);
            for (const char *k = p; k < eq; k++)
                if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789_-*/@", *k))
                    return WHY("list member %d: a key is a-z 0-9 _ - * / @", members + 1);
            for (const char *v = eq + 1; v < e; v++)
                if (*v < 0x20 || *v > 0x7e || *v == ',' || *v == '=')
                    return WHY("list member %d: a value is printable ASCII but , and =",
                               members + 1);
            if (++members > 32) return WHY("at most 32 list members");
        }
        p = end + 1;
    }
    if (!members) return WHY("no list member");
    return 0;
}

/* SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012) of n bytes under a 16-byte key */
#define SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIP_ROUND(v0, v1, v2, v3)                                                            \
    do {                                                                                     \
        v0 += v1; v1 = SIP_ROTL(v1, 13); v1 ^= v0; v0 = SIP_ROTL(v0, 32);                   \
        v2 += v3; v3 = SIP_ROTL(v3, 16); v3 ^= v2;                                         \
        v0 += v3; v3 = SIP_ROTL(v3, 21); v3 ^= v0;                                         \
        v2 += v1; v1 = SIP_ROTL(v1, 17); v1 ^= v2; v2 = SIP_ROTL(v2, 32);                   \
    } while (0)

static uint64_t sip_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static uint64_t siphash24(const unsigned char key[16], const unsigned char *p, size_t n)
{
    uint64_t k0 = sip_le64(key), k1 = sip_le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    uint64_t m, last = (uint64_t)(n & 0xff) << 56;
    const unsigned char *end = p + (n & ~(size_t)7);
    for (; p < end; p += 8) {
        m = sip_le64(p);
        v3 ^= m;
        SIP_ROUND(v0, v1, v2, v3);
        SIP_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    for (size_t i = 0; i < (n & 7); i++) last |= (uint64_t)p[i] << (8 * i);
    v3 ^= last;
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++) SIP_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* bytes of md as lowercase hex, 1 in the last byte if all are zero */
static void trace_hex_of(unsigned char *md, size_t bytes, char *out)
{
    static const char hex[] = "0123456789abcdef";
    int zero = 1;
    for (size_t i = 0; i < bytes; i++) zero &= md[i] == 0;
    if (zero) md[bytes - 1] = 1;
    for (size_t i = 0; i < bytes; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * bytes] = '\0';
}

void trace_for_attempt(const char *parent, const char *id, int attempt, int64_t due_ms,
                       char out[TRACE_PARENT_LEN + 1])
{
    /* SipHash-2-4 under TRACE_SPAN_KEY of "<parent>\n<due_ms>", NUL, id,
     * NUL, attempt: in one piece, on the stack unless the id is long */
    size_t idlen = strlen(id), need = TRACE_PARENT_LEN + 1 + UTIL_INT_MAX + idlen + 1 + UTIL_INT_MAX;
    char stack[512], *m = need <= sizeof(stack) ? stack : xmalloc(need);
    size_t n = TRACE_PARENT_LEN;
    memcpy(m, parent, TRACE_PARENT_LEN);
    m[n++] = '\n';
    n += (size_t)util_fmt_int(m + n, due_ms) + 1; /* with its NUL */
    memcpy(m + n, id, idlen + 1);
    n += idlen + 1;
    n += (size_t)util_fmt_int(m + n, attempt);
    uint64_t h = siphash24((const unsigned char *)TRACE_SPAN_KEY, (const unsigned char *)m, n);
    if (m != stack) free(m);
    unsigned char md[8];
    char span[17];
    for (int i = 0; i < 8; i++) md[i] = (unsigned char)(h >> (8 * i));
    trace_hex_of(md, 8, span);
    memcpy(out, parent, TRACE_PARENT_LEN + 1);
    memcpy(out + 36, span, 16);
}

/* the first `bytes` of SHA-256 over "<what>", NUL, id, NUL, "0", as hex */
static void trace_sha_derive(const char *what, const char *id, char *out, size_t bytes)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    log_assert(c && EVP_DigestInit_ex2(c, EVP_sha256(), NULL) == 1 &&
               EVP_DigestUpdate(c, what, strlen(what) + 1) == 1 &&
               EVP_DigestUpdate(c, id, strlen(id) + 1) == 1 && EVP_DigestUpdate(c, "0", 1) == 1 &&
               EVP_DigestFinal_ex(c, md, &mdlen) == 1);
    EVP_MD_CTX_free(c);
    trace_hex_of(md, bytes, out);
}

void trace_new(const char *id, char out[TRACE_PARENT_LEN + 1])
{
    char tid[33], pid[17];
    trace_sha_derive("trace", id, tid, 16);
    trace_sha_derive("root", id, pid, 8);
    snprintf(out, TRACE_PARENT_LEN + 1, "00-%s-%s-01", tid, pid);
}
