/* api_reply.c -- see api_reply.h. */
#include "edge/api_reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/jarena.h"
#include "base/util.h"
#include "edge/ui.h"
#include "model/task.h"

/* ---- replies ----------------------------------------------------------- */

api_req *api_req_new(api *a, http_req *req)
{
    api_req *r = util_pool_get(&a->req_pool, sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->a = a;
    r->req = req;
    a->busy++;
    return r;
}

void api_req_free(api_req *r)
{
    if (r->results) {
        for (int i = 0; i < r->n; i++) free(r->results[i]);
        free(r->results);
    }
    util_pool_put(&r->a->req_pool, r);
}

void api_send_json(http_req *req, int code, const char *reason, cJSON *body)
{
    ui_mask_for_browser(req, body);
    char *s = body ? cJSON_PrintUnformatted(body) : NULL;
    size_t n = s ? strlen(s) : 0;
    /* every answer is UTF-8 (RFC 8259): text from outside is checked or
     * cleaned where it comes in, and an answer quoting a record stored
     * before that was (by an older build) is cleaned here, its bad bytes
     * and DEL (cJSON escapes the other control bytes) becoming '?' */
    if (s && !util_utf8_valid(s, n, NULL)) util_text_clean(s, n);
    if (s) {
        s = xrealloc(s, n + 2);
        s[n++] = '\n';
        s[n] = '\0';
    }
    http_reply(req, code, reason, "application/json", s, n);
    free(s);
}

/* The message quotes what the client sent (a field's name, a value): it
 * goes out as valid UTF-8, an invalid byte shown as '?'. */
cJSON *api_error_body(const char *code, const char *msg)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char text[600];
    size_t n = strlen(msg) < sizeof(text) ? strlen(msg) : sizeof(text) - 1;
    memcpy(text, msg, n);
    text[n] = '\0';
    util_text_clean(text, n);
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", text);
    return o;
}

void api_error(http_req *req, int status, const char *code, const char *fmt, ...)
{
    static const struct { int status; const char *reason; } reasons[] = {
        {400, "Bad Request"}, {404, "Not Found"}, {405, "Method Not Allowed"},
        {409, "Conflict"}, {413, "Payload Too Large"}, {415, "Unsupported Media Type"},
        {500, "Internal Server Error"}, {503, "Service Unavailable"}};
    const char *reason = "Error";
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < sizeof(reasons) / sizeof(*reasons); i++)
        if (reasons[i].status == status) reason = reasons[i].reason;
    cJSON *body = api_error_body(code, msg);
    api_send_json(req, status, reason, body);
    cJSON_Delete(body);
}

/* Answer r (if its client is still there) and free it. */
void api_finish(api_req *r, int status, const char *reason, cJSON *body)
{
    api_send_json(r->req, status, reason, body);
    r->a->busy--;
    api_req_free(r);
}

void api_finish_error(api_req *r, int status, const char *code, const char *msg)
{
    api_error(r->req, status, code, "%s", msg);
    r->a->busy--;
    api_req_free(r);
}

/* ---- request bodies ---------------------------------------------------- */

/* api_body_parse, and *plain as jarena_parse sets it (the text is then
 * ASCII, the value and whitespace) */
static cJSON *api_body_read(http_req *req, int *plain)
{
    const char *ct = http_header(req, "Content-Type");
    if (ct && strncasecmp(ct, "application/json", 16) != 0) {
        api_error(req, 415, "unsupported_media_type",
                  "Content-Type: must be application/json, not %.100s", ct);
        return NULL;
    }
    /* the HTTP layer already refused a body over max_body with 413 */
    size_t len;
    const char *data = http_body(req, &len);
    const char *end = NULL, *nul = memchr(data, '\0', len);
    if (nul) {
        /* JSON has no raw NUL; cJSON would end a string, or the text, there */
        api_error(req, 400, "invalid_argument", "body: a NUL byte at byte %zu",
                  (size_t)(nul - data));
        return NULL;
    }
    cJSON *j = jarena_parse(data, len, &end, plain);
    if (!j) {
        size_t at = end ? (size_t)(end - data) : 0;
        api_error(req, 400, "invalid_argument", "body: not valid JSON (near byte %zu)", at);
        return NULL;
    }
    for (; end < data + len; end++)
        if (!strchr(" \t\r\n", *end)) {
            cJSON_Delete(j);
            api_error(req, 400, "invalid_argument", "body: trailing data after the JSON value");
            return NULL;
        }
    /* RFC 8259 section 8.1: a JSON text is UTF-8, and cJSON takes any bytes
     * in strings; every string is text that may be stored and printed, so a
     * body with one that is not UTF-8 is refused whole, naming it */
    if (!*plain && !util_utf8_valid(data, len, NULL)) {
        char err[400];
        if (task_json_check_utf8(data, len, err, sizeof(err)) == 0)
            snprintf(err, sizeof(err), "body: not valid UTF-8");
        cJSON_Delete(j);
        api_error(req, 400, "invalid_argument", "%s", err);
        return NULL;
    }
    return j;
}

cJSON *api_body_parse(http_req *req)
{
    int plain = 0;
    return api_body_read(req, &plain);
}

cJSON *api_body(http_req *req)
{
    int plain = 0;
    cJSON *j = api_body_read(req, &plain);
    size_t len;
    const char *data = http_body(req, &len);
    char err[400];
    /* cJSON has cut a string at its NUL and read 1e-400 as 0: what it holds
     * is not what was sent (a text read in jarena's one pass holds neither) */
    if (j && !plain && !task_json_plain(data, len) &&
        task_json_check(data, len, err, sizeof(err)) != 0) {
        cJSON_Delete(j);
        api_error(req, 400, "invalid_argument", "%s", err);
        return NULL;
    }
    return j;
}

int api_hex(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int api_query(const char *target, const char *name, char *out, size_t outlen)
{
    const char *q = strchr(target, '?');
    size_t nl = strlen(name);
    for (q = q ? q + 1 : NULL; q && *q; q = strchr(q, '&') ? strchr(q, '&') + 1 : NULL) {
        if (strncmp(q, name, nl) != 0 || q[nl] != '=') continue;
        const char *v = q + nl + 1, *end = v + strcspn(v, "&");
        size_t n = 0;
        while (v < end && n + 1 < outlen) {
            int hi, lo;
            if (*v == '%' && end - v >= 3 && (hi = api_hex(v[1])) >= 0 && (lo = api_hex(v[2])) >= 0) {
                out[n++] = (char)(hi * 16 + lo);
                v += 3;
            } else {
                out[n++] = *v == '+' ? ' ' : *v;
                v++;
            }
        }
        out[n] = '\0';
        return 1;
    }
    return 0;
}

int api_page_query(http_req *req, int64_t max, int64_t *limit, char *cursor, size_t cursorlen)
{
    const char *target = http_target(req), *q = strchr(target, '?');
    char v[32];
    /* every parameter must be one of ours */
    for (q = q ? q + 1 : NULL; q && *q; q = strchr(q, '&') ? strchr(q, '&') + 1 : NULL) {
        size_t n = strcspn(q, "=&");
        if (!((n == 5 && strncmp(q, "limit", 5) == 0) || (n == 6 && strncmp(q, "cursor", 6) == 0))) {
            api_error(req, 400, "invalid_argument", "%.*s: unknown parameter (limit, cursor)",
                      (int)(n > 100 ? 100 : n), q);
            return -1;
        }
    }
    if (api_query(target, "limit", v, sizeof(v))) {
        char *end;
        long long n = strtoll(v, &end, 10);
        if (!*v || *end || n < 1 || n > max) {
            api_error(req, 400, "invalid_argument", "limit: must be an integer from 1 to %lld",
                      (long long)max);
            return -1;
        }
        *limit = n;
    }
    cursor[0] = '\0';
    if (api_query(target, "cursor", cursor, cursorlen) && strlen(cursor) + 1 >= cursorlen) {
        api_error(req, 400, "invalid_argument", "cursor: malformed (pass next_cursor as given)");
        return -1;
    }
    return 0;
}
