/* fuzz_flow.c -- flow control's parsers of outside bytes: a PUT body of
 * /v1/queues or /v1/destinations (flow_settings_parse), with the stored JSON
 * read back; a destination named in a path (flow_dest_valid, and its one
 * form, flow_dest_canon, which is its own form); a callback URL's
 * destination (flow_dest_of_url); a receiver's Retry-After value
 * (h1_retry_after).
 *
 * Input: "<body JSON>\n<destination>\n<Retry-After>" (parts may be missing). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/flow.h"
#include "delivery/h1_answer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char *dest = strchr(s, '\n');
    if (dest) *dest++ = '\0';
    else dest = s + strlen(s);
    char *ra = strchr(dest, '\n');
    if (ra) *ra++ = '\0';
    else ra = dest + strlen(dest);

    char err[256], out[FLOW_DEST_MAX];
    cJSON *body = cJSON_Parse(s);
    for (int queue = 0; queue < 2; queue++) {
        flow_settings fs, back;
        if (flow_settings_parse(body, queue, &fs, err, sizeof(err)) != 0) continue;
        /* what is stored reads back the same */
        char *json = flow_settings_json(&fs, queue);
        cJSON *again = cJSON_Parse(json);
        if (flow_settings_parse(again, queue, &back, err, sizeof(err)) != 0 ||
            back.rate != fs.rate || back.max_concurrency != fs.max_concurrency ||
            back.paused != fs.paused)
            abort();
        /* a rate is bounded and reads back from 14 digits (Lua's JSON) */
        char r14[32];
        snprintf(r14, sizeof(r14), "%.14g", fs.rate);
        if ((fs.rate && (fs.rate < FLOW_RATE_MIN || fs.rate > FLOW_RATE_MAX)) ||
            strtod(r14, NULL) != fs.rate)
            abort();
        cJSON *o = cJSON_CreateObject();
        flow_settings_render(json, queue, o);
        cJSON_Delete(o);
        cJSON_Delete(again);
        free(json);
    }
    cJSON_Delete(body);
    if (flow_dest_valid(dest) && strlen(dest) >= FLOW_DEST_MAX) abort();
    if (flow_dest_of_url(dest, out) == 0 && strlen(out) >= FLOW_DEST_MAX) abort();
    char again[FLOW_DEST_MAX];
    if (flow_dest_canon(dest, out) == 0 &&
        (strlen(out) >= FLOW_DEST_MAX || flow_dest_canon(out, again) != 0 || strcmp(out, again) != 0))
        abort();
    int64_t ms = h1_retry_after(ra, strlen(ra), 1700000000);
    if (ms < -1 || ms > H1_RETRY_AFTER_MAX_S * 1000) abort();
    /* delay-seconds of any length are a delay, saturated */
    if (*ra && strspn(ra, "0123456789") == strlen(ra) && ms < 0) abort();
    free(s);
    return 0;
}
