/* openapi.h -- doc/openapi.yaml as JSON, built into tickd (build/gen/openapi.c,
 * made by scripts/openapi_c.py), for GET /v1/openapi.json. */
#ifndef TICKD_OPENAPI_H
#define TICKD_OPENAPI_H

#include <stddef.h>

extern const char openapi_json[];
extern const size_t openapi_json_len;

#endif
