/* ui.h -- tickd's web console at /ui/ (doc/console.md): the files built into
 * tickd from web/ (ui_assets.h), served with strict security headers, and
 * what the API does for it (a token's scope; secrets kept from browsers). */
#ifndef TICKD_UI_H
#define TICKD_UI_H

#include <cjson/cJSON.h>

#include "edge/http_server.h"

/* Answers req and returns 1 when path ("/ui", "/ui/...") is the console's;
 * returns 0 (req untouched) otherwise. GET and HEAD only (405 otherwise):
 * /ui/assets/<name> is a built-in file (404 when unknown), cached for ever
 * (its name holds its hash); any other /ui/ path is the app's index.html,
 * never cached, so that every view has a URL. gzip when accepted. */
int ui_route(http_req *req, const char *path);

/* GET /v1/whoami: {"scope": scope} ("admin", "read" or "open"), so that the
 * console shows a viewer only the actions its token may take. */
void ui_whoami(http_req *req, const char *scope);

/* For an answer going to a browser (a request carrying the Sec-Fetch-* or
 * Origin headers that browsers add and scripts cannot remove): the values of
 * tasks' secret-looking headers (Authorization, Cookie, names holding
 * "token", "secret", "key", "auth", "pass", "signature", "session",
 * "credential") become "***" and their URLs are redacted as listings show
 * them (task_redact_urls), at any depth of body but inside "req". Other
 * clients get body untouched. */
void ui_mask_for_browser(const http_req *req, cJSON *body);

/* Whether a header's name looks as if its value were a secret. */
int ui_secret_header(const char *name);

#endif
