/* fuzz_trace: traceparent and tracestate (trace.h), as a request's headers
 * and a task's fields bring them. The input is a traceparent, then a
 * newline, then a tracestate. A traceparent taken must be version 00, 55
 * characters, and taken again as itself; a span made under it keeps its
 * trace id and flags, and is what OpenSSL's SipHash makes of it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/trace.h"
#include "../unit/span_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), out[TRACE_PARENT_LEN + 1], again[TRACE_PARENT_LEN + 1];
    char why[160], span[TRACE_PARENT_LEN + 1];
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char *nl = strchr(s, '\n');
    if (nl) *nl = '\0';
    if (trace_parent_parse(s, out, why, sizeof(why)) == 0) {
        if (strlen(out) != TRACE_PARENT_LEN || memcmp(out, "00-", 3) != 0) abort();
        if (trace_parent_parse(out, again, why, sizeof(why)) != 0 || strcmp(out, again) != 0)
            abort();
        trace_for_attempt(out, s, 3, 1795528511888, span);
        if (memcmp(span, out, 36) != 0 || memcmp(span + 52, out + 52, 3) != 0) abort();
        /* the span is OpenSSL's SipHash of what trace.h names */
        char want[17];
        if (span_oracle(out, s, 3, 1795528511888, want) != 0 || memcmp(span + 36, want, 16) != 0)
            abort();
        if (trace_parent_parse(span, again, why, sizeof(why)) != 0) abort();
    } else if (!why[0]) {
        abort();
    }
    if (nl && trace_state_check(nl + 1, why, sizeof(why)) == 0 && strlen(nl + 1) > TRACE_STATE_MAX)
        abort();
    free(s);
    return 0;
}
