/* fuzz_webhook_verify.c -- the receiver's side of Standard Webhooks
 * (webhook_verify, which tickctl listen runs on every request it is sent):
 * the webhook-id, webhook-timestamp and webhook-signature headers and the
 * body all come from outside.
 *
 * Input: "<id>\n<timestamp>\n<signature>\n<body>" (a missing part after
 * the id is a missing header). Each input is also checked once with
 * its own signature, made by webhook_sign, which must verify. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "delivery/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static webhook_keys *k;
    static webhook_ctx *c;
    char why[256], sig[WEBHOOK_SIG_MAX];
    if (!k) {
        char err[256];
        if (webhook_keys_parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw "
                               "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY",
                               &k, err, sizeof(err)) != 0)
            abort();
        c = webhook_ctx_new();
    }
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char *part[4] = {s, NULL, NULL, NULL};
    for (int i = 1; i < 4; i++) {
        char *nl = part[i - 1] ? strchr(part[i - 1], '\n') : NULL;
        if (!nl) break;
        *nl = '\0';
        part[i] = nl + 1;
    }
    const char *body = part[3] ? part[3] : "";
    size_t len = part[3] ? size - (size_t)(part[3] - s) : 0;
    webhook_verify(k, c, part[0], part[1], part[2], body, len, 1614265330, why, sizeof(why));
    /* what tickd signs, the receiver verifies */
    webhook_sign(k, c, part[0], 1614265330, body, len, sig);
    if (webhook_verify(k, c, part[0], "1614265330", sig, body, len, 1614265330, why,
                       sizeof(why)) != 0)
        log_panic("a signature made by webhook_sign did not verify: %s", why);
    free(s);
    return 0;
}
