/* fuzz_url_redact.c -- libFuzzer target for util_url_redact, the one
 * redaction of URLs shown outside tickd.
 *
 * The input is a URL. Its redaction must be redacted already (a second pass
 * changes nothing), and must not overrun. When libcurl's URL parser (the one
 * that checks callback_url and sends callbacks) reads the input, it must
 * read the redaction as the same scheme, host, port and path, with no
 * password, a user of *** only when the input had userinfo, and every query
 * value *** (so the redaction agrees with curl on where the host is). */
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static char *part(CURLU *u, CURLUPart what)
{
    char *v = NULL;
    if (curl_url_get(u, what, &v, 0) != CURLUE_OK) return NULL;
    return v;
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096 || memchr(data, '\0', size)) return 0;
    char *in = malloc(size + 1);
    if (!in) abort();
    memcpy(in, data, size);
    in[size] = '\0';
    char *r = util_url_redact(in), *again = util_url_redact(r);
    if (strcmp(r, again) != 0) {
        fprintf(stderr, "redacted twice differs:\n%s\n%s\n", r, again);
        abort();
    }
    CURLU *a = curl_url(), *b = curl_url();
    if (!a || !b) abort();
    if (curl_url_set(a, CURLUPART_URL, in, 0) == CURLUE_OK &&
        curl_url_set(b, CURLUPART_URL, r, 0) == CURLUE_OK) {
        static const CURLUPart kept[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT,
                                         CURLUPART_PATH};
        for (size_t i = 0; i < sizeof(kept) / sizeof(*kept); i++) {
            char *x = part(a, kept[i]), *y = part(b, kept[i]);
            if (!same(x, y)) {
                fprintf(stderr, "part %d: %s / %s\n%s\n%s\n", (int)kept[i], x, y, in, r);
                abort();
            }
            curl_free(x);
            curl_free(y);
        }
        char *user = part(a, CURLUPART_USER), *pw = part(a, CURLUPART_PASSWORD);
        char *ruser = part(b, CURLUPART_USER), *rpw = part(b, CURLUPART_PASSWORD);
        char *rq = part(b, CURLUPART_QUERY);
        if (rpw || ((user || pw) ? !same(ruser, "***") : ruser != NULL)) {
            fprintf(stderr, "userinfo kept:\n%s\n%s\n", in, r);
            abort();
        }
        /* each query part is ***, or name=*** */
        for (const char *q = rq; q && *q;) {
            size_t n = strcspn(q, "&"), eq = strcspn(q, "=&");
            const char *v = eq < n ? q + eq + 1 : q;
            size_t vn = eq < n ? n - eq - 1 : n;
            if (n && !(vn == 3 && memcmp(v, "***", 3) == 0)) {
                fprintf(stderr, "query value kept:\n%s\n%s\n", in, r);
                abort();
            }
            q += n + (q[n] == '&');
        }
        curl_free(user);
        curl_free(pw);
        curl_free(ruser);
        curl_free(rpw);
        curl_free(rq);
    }
    curl_url_cleanup(a);
    curl_url_cleanup(b);
    free(again);
    free(r);
    free(in);
    return 0;
}
