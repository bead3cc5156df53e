/* client.c -- see client.h. */
#include "client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "show.h"
#include "base/util.h"

typedef struct ctl_buf {
    char *p;
    size_t len, cap;
    int too_big;
} ctl_buf;

static size_t ctl_on_data(char *data, size_t size, size_t n, void *priv)
{
    ctl_buf *b = priv;
    size_t add = size * n;
    if (b->len + add > CTL_ANSWER_MAX) {
        b->too_big = 1;
        return 0; /* libcurl stops with CURLE_WRITE_ERROR */
    }
    if (b->len + add + 1 > b->cap) {
        b->cap = (b->len + add + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, data, add);
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

int ctl_api_check(const ctl_api *api, char *why, size_t whylen)
{
    const char *u = api->url;
    if (strncasecmp(u, "http://", 7) != 0 && strncasecmp(u, "https://", 8) != 0) {
        snprintf(why, whylen, "the API's URL must start with http:// or https:// (TICKD_URL "
                 "or --url), not \"%.100s\"", u);
        return -1;
    }
    CURLU *h = curl_url();
    int bad = curl_url_set(h, CURLUPART_URL, u, 0) != CURLUE_OK;
    curl_url_cleanup(h);
    if (bad) {
        snprintf(why, whylen, "the API's URL is not a URL (TICKD_URL or --url): \"%.100s\"", u);
        return -1;
    }
    return 0;
}

/* The error of a non-2xx answer, as the API words it:
 * "tickctl: 404 not found: id: no such task". */
static void ctl_say_error(const ctl_answer *a)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(a->json, "error");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (cJSON_IsString(code) && cJSON_IsString(msg)) {
        char *c = show_clean(code->valuestring, strnlen(code->valuestring, 63), 1);
        char *m = show_clean(msg->valuestring, strnlen(msg->valuestring, 1023), 1);
        for (char *p = c; *p; p++)
            if (*p == '_') *p = ' ';
        fprintf(stderr, "tickctl: %ld %s: %s\n", a->status, c, m);
        free(c);
        free(m);
    } else {
        /* not tickd's JSON (a proxy's page?): its first line */
        size_t n = a->body ? strcspn(a->body, "\r\n") : 0;
        char *m = show_clean(a->body ? a->body : "", n < 199 ? n : 199, 1);
        fprintf(stderr, "tickctl: %ld from the API%s%s\n", a->status, *m ? ": " : " (no body)",
                m);
        free(m);
    }
    if (a->status == 401)
        fprintf(stderr, "tickctl: give the API token in TICKD_TOKEN or with --token\n");
}

int ctl_call(const ctl_api *api, const char *method, const char *path, const cJSON *body,
             ctl_answer *out)
{
    char url[4096], errbuf[CURL_ERROR_SIZE] = "", auth[1024];
    ctl_buf b = {0};
    struct curl_slist *hdrs = NULL;
    char *sent = body ? cJSON_PrintUnformatted(body) : NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((size_t)snprintf(url, sizeof(url), "%s%s", api->url, path) >= sizeof(url)) {
        fprintf(stderr, "tickctl: the request's URL is longer than %zu bytes\n", sizeof(url) - 1);
        free(sent);
        return CTL_API;
    }
    CURL *e = curl_easy_init();
    if (!e) {
        fprintf(stderr, "tickctl: libcurl could not start\n");
        free(sent);
        return CTL_API;
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CTL_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)CTL_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, ctl_on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "tickctl");
    if (strcmp(method, "HEAD") == 0) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    if (api->token && *api->token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", api->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (sent) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        /* tickd answers at once; no 100-continue round trip */
        hdrs = curl_slist_append(hdrs, "Expect:");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, sent);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(sent));
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);

    CURLcode cc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
    if (cc != CURLE_OK) {
        if (b.too_big)
            fprintf(stderr, "tickctl: the answer to %s %s is over %u MiB\n", method, path,
                    CTL_ANSWER_MAX >> 20);
        else
            fprintf(stderr, "tickctl: cannot reach tickd at %s: %s (is tickd running there? "
                    "TICKD_URL or --url names it)\n", api->url, *errbuf ? errbuf
                                                                  : curl_easy_strerror(cc));
        rc = b.too_big ? CTL_API : CTL_UNREACHABLE;
        free(b.p);
        out->status = 0;
        goto done;
    }
    out->body = b.p ? b.p : xstrdup("");
    out->len = b.len;
    out->json = b.len ? cJSON_ParseWithLength(out->body, out->len) : NULL;
    if (out->status >= 200 && out->status < 300) {
        rc = CTL_OK;
    } else {
        ctl_say_error(out);
        ctl_answer_free(out);
        rc = CTL_API;
    }
done:
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(e);
    free(sent);
    return rc;
}

void ctl_answer_free(ctl_answer *a)
{
    cJSON_Delete(a->json);
    free(a->body);
    memset(a, 0, sizeof(*a));
}

char *ctl_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, (int)strlen(s));
    char *out = xstrdup(e ? e : "");
    curl_free(e);
    return out;
}
