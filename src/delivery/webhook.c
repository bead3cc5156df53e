/* webhook.c -- see webhook.h. */
#include "delivery/webhook.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/log.h"
#include "base/util.h"

#define HMAC_BLOCK 64   /* SHA-256's block */

struct webhook_keys {
    int n;
    /* each key's HMAC pads, hashed once: SHA-256 states after one block of
     * key ^ 0x36 (inner) and key ^ 0x5c (outer) */
    EVP_MD_CTX *inner[WEBHOOK_KEYS_MAX], *outer[WEBHOOK_KEYS_MAX];
};

struct webhook_ctx {
    EVP_MD_CTX *md;
};

static int b64_val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict standard base64 (padding optional) of s[0..n) into out (room for
 * n * 3 / 4 bytes); the decoded length, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out)
{
    size_t pad = 0;
    while (n && s[n - 1] == '=' && pad < 2) n--, pad++;
    if (n % 4 == 1 || (pad && (n + pad) % 4)) return -1;
    long o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    if (acc & ((1u << bits) - 1)) return -1; /* bits left over must be zero */
    return o;
}

static EVP_MD_CTX *pad_state(const unsigned char *key, size_t klen, unsigned char x)
{
    unsigned char block[HMAC_BLOCK];
    memset(block, x, sizeof(block));
    for (size_t i = 0; i < klen; i++) block[i] ^= key[i];
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (!m || EVP_DigestInit_ex(m, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(m, block, sizeof(block)) != 1)
        log_panic("libcrypto: SHA-256 of a signing key failed");
    OPENSSL_cleanse(block, sizeof(block));
    return m;
}

int webhook_keys_parse(const char *list, webhook_keys **out, char *err, size_t errlen)
{
    return webhook_keys_parse_as("callback.signing_secrets", list, out, err, errlen);
}

int webhook_keys_parse_as(const char *name, const char *list, webhook_keys **out, char *err,
                          size_t errlen)
{
    webhook_keys *k = NULL;
    int idx = 0;
    const char *p = list;
    *out = NULL;
    for (;;) {
        p += strspn(p, " \t");
        if (!*p) break;
        size_t n = strcspn(p, " \t");
        unsigned char key[WEBHOOK_KEY_MAX * 2];
        long kl;
        idx++;
        if (idx > WEBHOOK_KEYS_MAX) {
            snprintf(err, errlen, "%s: more than %d secrets", name,
                     WEBHOOK_KEYS_MAX);
            goto fail;
        }
        if (n < 6 || memcmp(p, "whsec_", 6) != 0) {
            snprintf(err, errlen, "%s: secret %d does not start with "
                     "whsec_ (tickd --gen-secret prints one)", name, idx);
            goto fail;
        }
        if (n - 6 > (WEBHOOK_KEY_MAX * 2 * 3) / 4 - 4) {
            snprintf(err, errlen, "%s: secret %d is longer than %d bytes",
                     name, idx, WEBHOOK_KEY_MAX);
            goto fail;
        }
        if ((kl = b64_decode(p + 6, n - 6, key)) < 0) {
            snprintf(err, errlen, "%s: secret %d is not valid base64 "
                     "after whsec_", name, idx);
            goto fail;
        }
        if (kl < WEBHOOK_KEY_MIN || kl > WEBHOOK_KEY_MAX) {
            OPENSSL_cleanse(key, sizeof(key));
            snprintf(err, errlen, "%s: secret %d decodes to %ld bytes; "
                     "%d..%d are needed", name, idx, kl, WEBHOOK_KEY_MIN, WEBHOOK_KEY_MAX);
            goto fail;
        }
        if (!k) k = xcalloc(1, sizeof(*k));
        k->inner[k->n] = pad_state(key, (size_t)kl, 0x36);
        k->outer[k->n] = pad_state(key, (size_t)kl, 0x5c);
        k->n++;
        OPENSSL_cleanse(key, sizeof(key));
        p += n;
    }
    *out = k;
    return 0;
fail:
    webhook_keys_free(k);
    return -1;
}

void webhook_keys_free(webhook_keys *k)
{
    if (!k) return;
    for (int i = 0; i < k->n; i++) {
        EVP_MD_CTX_free(k->inner[i]);
        EVP_MD_CTX_free(k->outer[i]);
    }
    free(k);
}

int webhook_keys_count(const webhook_keys *k)
{
    return k ? k->n : 0;
}

webhook_ctx *webhook_ctx_new(void)
{
    webhook_ctx *c = xcalloc(1, sizeof(*c));
    c->md = EVP_MD_CTX_new();
    log_assert(c->md);
    return c;
}

void webhook_ctx_free(webhook_ctx *c)
{
    if (!c) return;
    EVP_MD_CTX_free(c->md);
    free(c);
}

/* HMAC-SHA256 of "id.ts_s.body" under key i into mac (32 bytes), from the
 * key's pad states. */
static void webhook_mac(const webhook_keys *k, int i, webhook_ctx *c, const char *id,
                        int64_t ts_s, const char *body, size_t len, unsigned char *mac)
{
    char ts[24];
    int tl = snprintf(ts, sizeof(ts), ".%lld.", (long long)ts_s);
    unsigned char ih[32];
    /* HMAC = H(key ^ opad || H(key ^ ipad || msg)) */
    if (EVP_MD_CTX_copy_ex(c->md, k->inner[i]) != 1 ||
        EVP_DigestUpdate(c->md, id, strlen(id)) != 1 ||
        EVP_DigestUpdate(c->md, ts, (size_t)tl) != 1 ||
        (len && EVP_DigestUpdate(c->md, body, len) != 1) ||
        EVP_DigestFinal_ex(c->md, ih, NULL) != 1 ||
        EVP_MD_CTX_copy_ex(c->md, k->outer[i]) != 1 ||
        EVP_DigestUpdate(c->md, ih, sizeof(ih)) != 1 ||
        EVP_DigestFinal_ex(c->md, mac, NULL) != 1)
        log_panic("libcrypto: HMAC-SHA256 of a callback failed");
}

size_t webhook_sign(const webhook_keys *k, webhook_ctx *c, const char *id, int64_t ts_s,
                    const char *body, size_t len, char *out)
{
    size_t o = 0;
    unsigned char mac[32];
    for (int i = 0; i < k->n; i++) {
        webhook_mac(k, i, c, id, ts_s, body, len, mac);
        if (o) out[o++] = ' ';
        memcpy(out + o, "v1,", 3);
        o += 3;
        o += (size_t)EVP_EncodeBlock((unsigned char *)out + o, mac, sizeof(mac));
    }
    out[o] = '\0';
    return o;
}

int webhook_verify(const webhook_keys *k, webhook_ctx *c, const char *id, const char *ts,
                   const char *sig, const char *body, size_t len, int64_t now_s,
                   char *why, size_t whylen)
{
    unsigned char mac[WEBHOOK_KEYS_MAX][32], got[48];
    int64_t ts_s = 0;
    int v1 = 0;
    if (!id || !ts || !sig) {
        snprintf(why, whylen, "no %s header", !id ? "webhook-id" : !ts ? "webhook-timestamp"
                                                                  : "webhook-signature");
        return -1;
    }
    /* Unix seconds as digits alone: the signed text is the number's */
    size_t nd = strspn(ts, "0123456789");
    if (nd == 0 || nd > 18 || ts[nd]) {
        snprintf(why, whylen, "webhook-timestamp is not Unix seconds");
        return -1;
    }
    for (size_t i = 0; i < nd; i++) ts_s = ts_s * 10 + (ts[i] - '0');
    if (now_s - ts_s > WEBHOOK_TOLERANCE_S) {
        snprintf(why, whylen, "timestamp %lld s old (the tolerance is %d s)",
                 (long long)(now_s - ts_s), WEBHOOK_TOLERANCE_S);
        return -1;
    }
    if (ts_s - now_s > WEBHOOK_TOLERANCE_S) {
        snprintf(why, whylen, "timestamp %lld s in the future (the tolerance is %d s)",
                 (long long)(ts_s - now_s), WEBHOOK_TOLERANCE_S);
        return -1;
    }
    for (int i = 0; i < k->n; i++) webhook_mac(k, i, c, id, ts_s, body, len, mac[i]);
    for (const char *p = sig;;) {
        p += strspn(p, " ");
        if (!*p) break;
        size_t n = strcspn(p, " ");
        /* "v1," and 32 bytes in base64: 44 characters with the padding */
        if (n > 3 && memcmp(p, "v1,", 3) == 0) {
            v1 = 1;
            if (n - 3 <= 44 && b64_decode(p + 3, n - 3, got) == 32)
                for (int i = 0; i < k->n; i++)
                    if (CRYPTO_memcmp(got, mac[i], 32) == 0) return 0;
        }
        p += n;
    }
    snprintf(why, whylen, "%s", v1 ? "no signature matches the secret"
                                   : "no v1 signature in webhook-signature");
    return -1;
}

int webhook_gen_secret(char *out, size_t outlen)
{
    unsigned char key[32];
    size_t got = 0;
    if (outlen < 6 + 45) return -1;
    while (got < sizeof(key)) {
        ssize_t n = getrandom(key + got, sizeof(key) - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    memcpy(out, "whsec_", 6);
    EVP_EncodeBlock((unsigned char *)out + 6, key, sizeof(key));
    OPENSSL_cleanse(key, sizeof(key));
    return 0;
}
