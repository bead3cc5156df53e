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

struct trace_ctx {
    EVP_MD *sha256;  /* fetched once: EVP_sha256() is looked up again at every init */
    EVP_MD_CTX *md;
};

trace_ctx *trace_ctx_new(void)
{
    trace_ctx *c = xmalloc(sizeof(*c));
    c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    c->md = EVP_MD_CTX_new();
    log_assert(c->sha256 && c->md);
    return c;
}

void trace_ctx_free(trace_ctx *c)
{
    if (!c) return;
    EVP_MD_CTX_free(c->md);
    EVP_MD_free(c->sha256);
    free(c);
}

/* 8 or 16 bytes of SHA-256 over a (alen bytes), NUL, b, NUL and n in
 * decimal, never all zero, as hex */
static void trace_derive(trace_ctx *c, const char *a, size_t alen, const char *b, int n,
                         char *out, size_t bytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char num[24];
    int numlen = util_fmt_int(num, n);
    log_assert(EVP_DigestInit_ex2(c->md, c->sha256, NULL) == 1 &&
               EVP_DigestUpdate(c->md, a, alen) == 1 &&
               EVP_DigestUpdate(c->md, "", 1) == 1 &&
               EVP_DigestUpdate(c->md, b, strlen(b) + 1) == 1 &&
               EVP_DigestUpdate(c->md, num, (size_t)numlen) == 1 &&
               EVP_DigestFinal_ex(c->md, md, &mdlen) == 1);
    int zero = 1;
    for (size_t i = 0; i < bytes; i++) zero &= md[i] == 0;
    if (zero) md[bytes - 1] = 1;
    for (size_t i = 0; i < bytes; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * bytes] = '\0';
}

void trace_for_attempt(trace_ctx *c, const char *parent, const char *id, int attempt,
                       int64_t due_ms, char out[TRACE_PARENT_LEN + 1])
{
    /* "<parent>\n<due_ms>" */
    char who[TRACE_PARENT_LEN + 32], span[17];
    memcpy(who, parent, TRACE_PARENT_LEN);
    who[TRACE_PARENT_LEN] = '\n';
    size_t n = TRACE_PARENT_LEN + 1 + (size_t)util_fmt_int(who + TRACE_PARENT_LEN + 1, due_ms);
    trace_ctx *own = c ? NULL : (c = trace_ctx_new());
    trace_derive(c, who, n, id, attempt, span, 8);
    trace_ctx_free(own);
    memcpy(out, parent, TRACE_PARENT_LEN + 1);
    memcpy(out + 36, span, 16);
}

void trace_new(trace_ctx *c, const char *id, char out[TRACE_PARENT_LEN + 1])
{
    char tid[33], pid[17];
    trace_ctx *own = c ? NULL : (c = trace_ctx_new()); /* one for both ids */
    trace_derive(c, "trace", 5, id, 0, tid, 16);
    trace_derive(c, "root", 4, id, 0, pid, 8);
    trace_ctx_free(own);
    snprintf(out, TRACE_PARENT_LEN + 1, "00-%s-%s-01", tid, pid);
}
