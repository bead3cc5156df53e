#!/usr/bin/env python3
"""web/ -> a C file holding the console's assets, served by tickd at /ui/
(make builds it into build/gen/ui_assets.c; src/edge/ui.c serves it).

Every file but index.html gets its content hash in its name
(app.3f2a9c1d.js), so that it may be cached for ever: a reference to another
asset ("./api.js" in an import, "/ui/assets/app.css" in index.html) is
rewritten to the hashed name, leaves first, so that a change anywhere changes
the names of every file that leads to it. Each file is kept as is and
gzipped (level 9, no timestamp: the build is reproducible); the server sends
the gzipped one to a client that accepts it.

usage: ui_c.py WEB_DIR OUT.c"""
import gzip
import hashlib
import os
import re
import sys

web, out = sys.argv[1], sys.argv[2]
# served name -> source file; the libraries come from node_modules, pinned by
# web/package-lock.json. uPlot ships minified only as a classic script
# (var uPlot = ...): made a module by exporting that variable, half the size
# of its unminified ES module.
SOURCES = {
    "preact-htm.js": "node_modules/htm/preact/standalone.module.js",
    "uplot.js": "node_modules/uplot/dist/uPlot.iife.min.js",
    "uplot.css": "node_modules/uplot/dist/uPlot.min.css",
}
APPEND = {"uplot.js": b"\nexport default uPlot;\n"}
for name in sorted(os.listdir(os.path.join(web, "src"))):
    if name.endswith((".js", ".css", ".html", ".svg")):
        SOURCES[name] = os.path.join("src", name)
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml"}

text = {}
for name, rel in SOURCES.items():
    with open(os.path.join(web, rel), "rb") as f:
        text[name] = f.read() + APPEND.get(name, b"")

# a reference: "./name" (an import) or "/ui/assets/name" (index.html)
REF = re.compile(rb'(["\'])(\./|/ui/assets/)([A-Za-z0-9_.-]+)\1')


def refs(name):
    return {m.group(3).decode() for m in REF.finditer(text[name])} & set(SOURCES)


hashed = {}


def resolve(name, stack=()):
    if name in hashed:
        return
    if name in stack:
        sys.exit(f"ui_c.py: import cycle through {name}")
    for dep in refs(name):
        resolve(dep, stack + (name,))

    def sub(m):
        dep = m.group(3).decode()
        if dep not in SOURCES:
            return m.group(0)
        return m.group(1) + m.group(2) + hashed[dep].encode() + m.group(1)

    text[name] = REF.sub(sub, text[name])
    if name == "index.html":
        hashed[name] = name
    else:
        stem, ext = os.path.splitext(name)
        hashed[name] = f"{stem}.{hashlib.sha256(text[name]).hexdigest()[:10]}{ext}"


for n in SOURCES:
    resolve(n)
if "index.html" not in SOURCES:
    sys.exit("ui_c.py: no src/index.html")


def carray(ident, data):
    lines = [f"static const unsigned char {ident}[] = {{"]
    for i in range(0, len(data), 20):
        lines.append("    " + ",".join(str(b) for b in data[i:i + 20]) + ",")
    lines.append("    0};")
    return "\n".join(lines)


total_gz = 0
with open(out, "w") as f:
    f.write(f"/* generated from {web} by scripts/ui_c.py: do not edit */\n")
    f.write('#include "edge/ui_assets.h"\n\n')
    rows = []
    for i, name in enumerate(sorted(SOURCES)):
        data = text[name]
        gz = gzip.compress(data, compresslevel=9, mtime=0)
        total_gz += len(gz)
        f.write(carray(f"raw{i}", data) + "\n")
        f.write(carray(f"gz{i}", gz) + "\n")
        ctype = TYPES[os.path.splitext(name)[1]]
        rows.append(f'    {{"{hashed[name]}", "{ctype}", raw{i}, {len(data)}, gz{i}, {len(gz)}}},')
    f.write("\nconst ui_asset ui_assets[] = {\n" + "\n".join(rows) + "\n    {0}};\n")
    f.write(f"const size_t ui_assets_gzip_total = {total_gz};\n")
print(f"ui_c.py: {len(SOURCES)} files, {total_gz} bytes gzipped")
