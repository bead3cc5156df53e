#!/usr/bin/env python3
"""doc/openapi.yaml -> a C file holding it as compact JSON, served by tickd
at GET /v1/openapi.json (make builds it into build/gen/openapi.c)."""
import json
import sys

import yaml

src, out = sys.argv[1], sys.argv[2]
with open(src) as f:
    doc = yaml.safe_load(f)
data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
with open(out, "w") as f:
    f.write(f"/* generated from {src} by scripts/openapi_c.py: do not edit */\n")
    f.write('#include "edge/openapi.h"\n\n')
    f.write("const char openapi_json[] = {\n")
    for i in range(0, len(data), 16):
        f.write("    " + ", ".join(str(b) for b in data[i:i + 16]) + ",\n")
    f.write("    0};\n")
    f.write(f"const size_t openapi_json_len = {len(data)};\n")
