/* fuzz_netpolicy.c -- the start-up parsers of the callback guard and signing:
 * callback.deny/allow CIDR lists (netpolicy_parse), literal URL hosts at POST
 * (netpolicy_check_host), connect-time matching of any address, and the
 * whsec_ secret list (webhook_keys_parse).
 *
 * Input: "<deny list>\n<host>\n<16 address bytes>" (parts may be missing). */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "delivery/netpolicy.h"
#include "delivery/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char *host = strchr(s, '\n');
    if (host) *host++ = '\0';
    else host = s + strlen(s);
    char *raw = strchr(host, '\n');
    if (raw) *raw++ = '\0';

    char err[256], why[200];
    netpolicy p;
    if (netpolicy_init(&p, s, "", err, sizeof(err)) == 0) {
        netpolicy_set_self(&p, "127.0.0.1", 8080);
        netpolicy_check_host(&p, host, 8080, why, sizeof(why));
        netpolicy_check_host(&p, host, 80, why, sizeof(why));
        if (raw && (size_t)(raw - s) + 16 <= size) {
            struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons(8080)};
            memcpy(&s6.sin6_addr, data + (raw - s), 16);
            netpolicy_check(&p, (struct sockaddr *)&s6, why, sizeof(why));
            struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons(80)};
            memcpy(&s4.sin_addr, data + (raw - s), 4);
            netpolicy_check(&p, (struct sockaddr *)&s4, why, sizeof(why));
        }
        netpolicy_free(&p);
    }
    /* the same text as an allow list, and as signing secrets */
    if (netpolicy_init(&p, "", s, err, sizeof(err)) == 0) netpolicy_free(&p);
    webhook_keys *k;
    if (webhook_keys_parse(s, &k, err, sizeof(err)) == 0 && k) {
        char sig[WEBHOOK_SIG_MAX];
        webhook_ctx *c = webhook_ctx_new();
        webhook_sign(k, c, host, 1, s, strlen(s), sig);
        webhook_ctx_free(c);
        webhook_keys_free(k);
    }
    free(s);
    return 0;
}
