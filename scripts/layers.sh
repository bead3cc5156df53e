#!/bin/sh
# The layering rule of src/ (src/README.md), checked over folders: a file in
# src/<layer>/ includes only headers of the layers it may use, named with
# their folder ("base/util.h"). cmd/tickd may use every layer; cmd/tickctl
# the ones it shares with tickd. Exits 1 naming each include that breaks it.
cd "$(dirname "$0")/.." || exit 1

may_use() {
    case $1 in
        base)      echo "base" ;;
        model)     echo "base model" ;;
        store)     echo "base model store" ;;
        delivery)  echo "base model delivery" ;;
        core)      echo "base model store delivery core" ;;
        edge)      echo "base model store core edge" ;;
        tickd)     echo "base model store delivery core edge" ;;
        tickctl)   echo "base model delivery" ;;
        *)         return 1 ;;
    esac
}

rc=0
for f in src/*/*.[ch] cmd/*/*.[ch]; do
    layer=$(basename "$(dirname "$f")")
    allowed=$(may_use "$layer") || { echo "$f: $layer is not a layer (src/README.md)"; rc=1; continue; }
    grep -n '^#include "' "$f" | while IFS= read -r line; do
        inc=${line#*\"}; inc=${inc%%\"*}
        case $inc in
            */*) dir=${inc%%/*} ;;
            *)   # a header beside the file (cmd/tickctl's own)
                 [ -f "$(dirname "$f")/$inc" ] && [ "${f#cmd/}" != "$f" ] && continue
                 echo "$f:${line%%:*}: \"$inc\" names no layer"; exit 1 ;;
        esac
        ok=0
        for a in $allowed; do [ "$a" = "$dir" ] && ok=1; done
        [ $ok = 1 ] || { echo "$f:${line%%:*}: $layer may not include \"$inc\" ($layer uses: $allowed)"; exit 1; }
    done || rc=1
done
exit $rc
