/* api_reply.h -- what every handler of the API uses: a request waiting for
 * the store, its answer (JSON, or an error naming the field and the
 * reason), and what it sent (its JSON body, its query). */
#ifndef TICKD_API_REPLY_H
#define TICKD_API_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "edge/api_handler.h"

/* One API request waiting for the store. If its client went away, the
 * reply to `req` is dropped by the HTTP layer. */
typedef struct api_req {
    api *a;
    http_req *req;
    int waiting;              /* store answers still to come */
    /* batch */
    int n;
    char **results;           /* each result's JSON text, malloc'd */
} api_req;

/* A request waiting for the store: counted busy until api_finish*. */
api_req *api_req_new(api *a, http_req *req);
void api_req_free(api_req *r);

/* Answer with body as JSON (NULL: no body); body stays the caller's. */
void api_send_json(http_req *req, int code, const char *reason, cJSON *body);
/* {"error": {"code", "message"}}, the message cleaned to UTF-8. */
cJSON *api_error_body(const char *code, const char *msg);
void api_error(http_req *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Answer r with body (or the error) and free it. */
void api_finish(api_req *r, int status, const char *reason, cJSON *body);
void api_finish_error(api_req *r, int status, const char *code, const char *msg);

/* The request's JSON body, its text as sent (no NUL, no number cJSON would
 * not hold); on failure answered (400/415) and NULL. */
cJSON *api_body(http_req *req);
/* The same, parsed only: NULs and numbers are the caller's to look for
 * (a batch gives each task its own error). */
cJSON *api_body_parse(http_req *req);

/* The value of hex digit c, or -1. */
int api_hex(int c);
/* Query parameter `name`, percent-decoded, into out: 1 found, 0 absent. */
int api_query(const char *target, const char *name, char *out, size_t outlen);
/* A listing's limit (1..max; left as it is when not given) and cursor
 * ("" when not given) from the query, which may hold nothing else: 0, or
 * -1 when answered 400. */
int api_page_query(http_req *req, int64_t max, int64_t *limit, char *cursor, size_t cursorlen);

#endif
