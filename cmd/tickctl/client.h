/* client.h -- tickctl's requests to the tickd API, over libcurl.
 *
 * One blocking request at a time. An answer is read whole (up to
 * CTL_ANSWER_MAX bytes) and handed back parsed; what went wrong is printed
 * here, once, to stderr, and told by the exit code the caller returns:
 * CTL_API for an answer that is an error (its status, code and message
 * printed), CTL_UNREACHABLE when no answer came. */
#ifndef TICKCTL_CLIENT_H
#define TICKCTL_CLIENT_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* tickctl's exit codes (tickctl --help, doc/tickctl.1) */
enum {
    CTL_OK = 0,
    CTL_API = 1,          /* the API answered an error; or a local failure */
    CTL_USAGE = 2,        /* bad command line */
    CTL_UNREACHABLE = 3,  /* no answer from tickd: refused, timed out, reset */
    CTL_INVALID_SIG = 4   /* listen: a callback's signature was invalid */
};

#define CTL_ANSWER_MAX (256u << 20)   /* bytes of one answer */
#define CTL_CONNECT_TIMEOUT_MS 5000
#define CTL_TIMEOUT_MS 60000           /* a whole request */

typedef struct ctl_api {
    const char *url;     /* the API's base, "http://127.0.0.1:8080", no trailing slash */
    const char *token;   /* sent as Authorization: Bearer; NULL or "": none */
} ctl_api;

typedef struct ctl_answer {
    long status;         /* HTTP status */
    char *body;          /* malloc'd, NUL-terminated (the API's JSON text) */
    size_t len;
    cJSON *json;         /* body parsed; NULL when empty or not JSON */
} ctl_answer;

/* Check the base URL: 0, or -1 with the reason in why. */
int ctl_api_check(const ctl_api *api, char *why, size_t whylen);

/* method path (below the base, query included, escaped) with body (NULL:
 * none; else sent as application/json). CTL_OK with a 2xx answer in *out;
 * else CTL_API or CTL_UNREACHABLE, said on stderr, and *out empty.
 * ctl_answer_free(out) in every case. */
int ctl_call(const ctl_api *api, const char *method, const char *path, const cJSON *body,
             ctl_answer *out);
void ctl_answer_free(ctl_answer *a);

/* s made fit for a path segment or a query value (percent-encoded);
 * malloc'd. */
char *ctl_escape(const char *s);

#endif
