/* ui.c -- the web console's files and headers (ui.h). */
#include "edge/ui.h"

#include <string.h>
#include <strings.h>

#include "edge/ui_assets.h"
#include "model/task.h"

/* Every console answer: nothing but tickd's own files run (default-src
 * covers scripts, styles, images, fonts and fetch: no inline script or
 * style, no eval), never inside a frame; no sniffing, no referrer leaving.
 * The HTTP layer keeps 256 bytes of added headers per answer, and the
 * longest answer (a gzipped asset) adds about 250: keep them short. */
#define UI_CSP "default-src 'self'; base-uri 'none'; frame-ancestors 'none'"

static void ui_headers(http_req *req)
{
    http_add_header(req, "Content-Security-Policy", UI_CSP);
    http_add_header(req, "X-Content-Type-Options", "nosniff");
    http_add_header(req, "Referrer-Policy", "no-referrer");
}

static void ui_text(http_req *req, int status, const char *reason, const char *msg)
{
    http_add_header(req, "Cache-Control", "no-store");
    http_reply(req, status, reason, "text/plain; charset=utf-8", msg, strlen(msg));
}

static const ui_asset *ui_find(const char *name)
{
    for (const ui_asset *a = ui_assets; a->name; a++)
        if (strcmp(a->name, name) == 0) return a;
    return NULL;
}

/* Whether the client takes gzip: a "gzip" coding in Accept-Encoding not
 * refused with q=0. */
static int ui_accepts_gzip(const http_req *req)
{
    const char *h = http_header(req, "Accept-Encoding");
    while (h && *h) {
        h += strspn(h, " \t,");
        size_t n = strcspn(h, ",;");
        const char *item = h;
        h += strcspn(h, ",");
        if (!((n == 4 && strncasecmp(item, "gzip", 4) == 0) ||
              (n == 6 && strncasecmp(item, "x-gzip", 6) == 0)))
            continue;
        const char *q = strchr(item, ';');
        if (q && q < h) {
            q += strspn(q, "; \t");
            if (strncasecmp(q, "q=0", 3) == 0 && strspn(q + 3, ".0") == strcspn(q + 3, ", \t"))
                return 0;
        }
        return 1;
    }
    return 0;
}

static void ui_send(http_req *req, const ui_asset *a, int immutable)
{
    ui_headers(req);
    http_add_header(req, "Cache-Control",
                    immutable ? "public, max-age=31536000, immutable" : "no-cache");
    http_add_header(req, "Vary", "Accept-Encoding");
    if (ui_accepts_gzip(req)) {
        http_add_header(req, "Content-Encoding", "gzip");
        http_reply(req, 200, "OK", a->type, (const char *)a->gz, a->gzlen);
    } else {
        http_reply(req, 200, "OK", a->type, (const char *)a->data, a->len);
    }
}

int ui_route(http_req *req, const char *path)
{
    if (strncmp(path, "/ui", 3) != 0 || (path[3] != '\0' && path[3] != '/')) return 0;
    /* the HTTP layer hands a HEAD over as GET (and leaves its body out) */
    if (strcmp(http_method(req), "GET") != 0) {
        ui_headers(req);
        http_add_header(req, "Allow", "GET, HEAD");
        ui_text(req, 405, "Method Not Allowed", "method: the console takes GET and HEAD\n");
        return 1;
    }
    if (path[3] == '\0') {
        ui_headers(req);
        http_add_header(req, "Location", "/ui/");
        ui_text(req, 308, "Permanent Redirect", "/ui/\n");
        return 1;
    }
    if (strncmp(path, "/ui/assets/", 11) == 0) {
        const ui_asset *a = strcmp(path + 11, "index.html") ? ui_find(path + 11) : NULL;
        if (a) {
            ui_send(req, a, 1);
        } else {
            ui_headers(req);
            ui_text(req, 404, "Not Found", "no such file in this build of the console\n");
        }
        return 1;
    }
    const ui_asset *index = ui_find("index.html");
    if (!index) {
        ui_headers(req);
        ui_text(req, 500, "Internal Server Error", "console: no index.html built in\n");
        return 1;
    }
    ui_send(req, index, 0);
    return 1;
}

void ui_whoami(http_req *req, const char *scope)
{
    if (strcmp(http_method(req), "GET") != 0) {
        http_add_header(req, "Allow", "GET, HEAD");
        http_reply(req, 405, "Method Not Allowed", "application/json",
                   "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"method: use GET\"}}\n",
                   strlen("{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"method: use GET\"}}\n"));
        return;
    }
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "scope", scope);
    char *s = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    http_add_header(req, "Cache-Control", "no-store");
    http_reply(req, 200, "OK", "application/json", s, s ? strlen(s) : 0);
    cJSON_free(s);
}

int ui_secret_header(const char *name)
{
    static const char *const exact[] = {"authorization", "proxy-authorization", "cookie",
                                        "set-cookie"};
    static const char *const part[] = {"token", "secret", "key", "auth", "pass",
                                       "signature", "session", "credential"};
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (strcasecmp(name, exact[i]) == 0) return 1;
    for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++)
        if (strcasestr(name, part[i])) return 1;
    return 0;
}

static void ui_mask(cJSON *node, int depth)
{
    if (depth > 8 || !node) return;
    if (cJSON_IsObject(node)) {
        const cJSON *url = cJSON_GetObjectItemCaseSensitive(node, "callback_url");
        if (cJSON_IsString(url)) task_redact_urls(node);
        cJSON *hdr = cJSON_GetObjectItemCaseSensitive(node, "header");
        if (cJSON_IsObject(hdr)) {
            for (cJSON *h = hdr->child; h; h = h->next)
                if (h->string && ui_secret_header(h->string) && cJSON_IsString(h))
                    cJSON_SetValuestring(h, "***");
        }
    }
    if (cJSON_IsObject(node) || cJSON_IsArray(node)) {
        for (cJSON *c = node->child; c; c = c->next) {
            if (c->string && (strcmp(c->string, "req") == 0 || strcmp(c->string, "header") == 0))
                continue;
            ui_mask(c, depth + 1);
        }
    }
}

void ui_mask_for_browser(const http_req *req, cJSON *body)
{
    if (!body) return;
    if (!http_header(req, "Sec-Fetch-Mode") && !http_header(req, "Sec-Fetch-Site") &&
        !http_header(req, "Sec-Fetch-Dest") && !http_header(req, "Origin"))
        return;
    ui_mask(body, 0);
}
