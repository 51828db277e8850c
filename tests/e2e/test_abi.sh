#!/bin/bash
# test_abi.sh: the binary's boundary.  `nm -D` of radiance lists exactly the
# functions engine/include/rad_core.h declares (what a plugin may call), and
# every one of them; nothing of the engine's own is exported.
. "$(dirname "$0")/lib.sh"
HEADER="$RADIANCE_SRC/engine/include/rad_core.h"

declared=$(sed -n 's/^[a-zA-Z_][a-zA-Z0-9_ *]*[ *]\(rad_[a-z0-9_]*\)(.*/\1/p' "$HEADER" | sort -u)
exported=$(nm -D --defined-only "$RADIANCE_BIN" | awk '$2 ~ /^[TtWwDdBbRr]$/ {print $3}' | grep -v '^_' | sort -u)
[ "$(echo "$declared" | wc -l)" -ge 20 ] && ok "rad_core.h declares $(echo "$declared" | wc -l) functions" \
    || not_ok "read only $(echo "$declared" | wc -l) functions from rad_core.h"
extra=$(comm -13 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')
missing=$(comm -23 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')
[ -z "$extra" ] && ok "nothing but the ABI is exported" || not_ok "exported but not in rad_core.h: $extra"
[ -z "$missing" ] && ok "every ABI function is exported" || not_ok "in rad_core.h but not exported: $missing"
finish
