/* span_oracle.h -- the span id trace.h promises, computed by OpenSSL's own
 * SipHash-2-4 (EVP_MAC "SIPHASH", 8 bytes, the TRACE_SPAN_KEY) over the
 * bytes trace.h names: what the unit tests and the fuzz target check
 * trace_for_attempt against. */
#ifndef TICKD_TEST_SPAN_ORACLE_H
#define TICKD_TEST_SPAN_ORACLE_H

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/trace.h"

/* The 16 hex digits of attempt's span, into hex (17 bytes); 0, or -1 when
 * OpenSSL would not compute it. */
static int span_oracle(const char *parent, const char *id, int attempt, long long due_ms,
                       char hex[17])
{
    size_t idlen = strlen(id), n = 0;
    unsigned char *m = malloc(TRACE_PARENT_LEN + idlen + 64), md[8];
    if (!m) return -1;
    n += (size_t)sprintf((char *)m, "%.*s\n%lld", TRACE_PARENT_LEN, parent, due_ms) + 1;
    memcpy(m + n, id, idlen + 1);
    n += idlen + 1;
    n += (size_t)sprintf((char *)m + n, "%d", attempt);
    size_t mdlen = 0, size = 8;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
                           OSSL_PARAM_construct_end()};
    int ok = ctx && EVP_MAC_init(ctx, (const unsigned char *)TRACE_SPAN_KEY, 16, params) == 1 &&
             EVP_MAC_update(ctx, m, n) == 1 && EVP_MAC_final(ctx, md, &mdlen, sizeof(md)) == 1 &&
             mdlen == 8;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    free(m);
    if (!ok) return -1;
    int zero = 1;
    for (int i = 0; i < 8; i++) zero &= md[i] == 0;
    if (zero) md[7] = 1;
    for (int i = 0; i < 8; i++) sprintf(hex + 2 * i, "%02x", md[i]);
    return 0;
}

#endif
