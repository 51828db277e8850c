#!/usr/bin/env bash
# test_bench.sh: `radiance bench` end to end: a tiny pp and tg run on the
# real SmolLM2-135M model in each output format (json parsed, numbers
# checked for sense, never for speed), and the one-line errors.  The model
# comes from tests/models/fetch.sh; without it the model checks are skipped
# with a visible line, or fail under CI=true.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN
MODELS=${RADIANCE_MODELS:-$HOME/.cache/radiance/models}
M="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
SMALL=(-p 16 -n 4 -r 1 -t 2)

# Errors need no model.
expect_fail "bench: a missing model is one line, exit 3" 3 "nope\.gguf" $R bench -m "$WORK/nope.gguf" "${SMALL[@]}"
expect_fail "bench: an unknown flag is one line, exit 2" 2 "unknown option '--frobnicate'" $R bench -m "$M" --frobnicate
expect_fail "bench: a bad -o is one line, exit 2" 2 "choose md, csv or json" $R bench -m "$M" -o xml
expect_fail "bench: a flag without its value, exit 2" 2 "-p needs a value" $R bench -m "$M" -p
expect_fail "bench: no model, exit 2" 2 "a model is required" $R bench -p 4
expect_fail "bench: nothing to measure, exit 2" 2 "nothing to measure" $R bench -m "$M" -p 0 -n 0

# Every flag bench --help names is documented in the man page.
missing=""
for flag in $($R bench --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
    grep -q -- "$(echo "$flag" | sed 's/-/\\\\-/g')" "$RADIANCE_SRC/man/radiance.1" || missing="$missing $flag"
done
[ -z "$missing" ] && ok "every bench --help flag is in radiance(1)" || not_ok "bench flags missing from radiance(1):$missing"

if [ ! -f "$M" ]; then
    if [ "${CI:-}" = true ]; then
        not_ok "bench: $M is missing (CI must run tests/models/fetch.sh first)"
    else
        echo "SKIP bench on a real model: $M not found (run tests/models/fetch.sh)"
    fi
    finish
    exit $?
fi

# md: the table's header, one pp16 and one tg4 row with numbers, the notes.
if $R bench -m "$M" "${SMALL[@]}" >"$WORK/md" 2>"$WORK/err"; then
    grep -q '^| model | size | params | threads | kernels | test | t/s |' "$WORK/md" \
        && grep -Eq '^\| SmolLM2-135M-Instruct\.Q4_1\.gguf .*\| 2 \| [a-z]+:[0-9]+.* \| pp16 \| [0-9]+\.[0-9]+ ± [0-9]+\.[0-9]+ \|' "$WORK/md" \
        && grep -Eq '\| tg4 \| [0-9]+\.[0-9]+ ± [0-9.]+ \| [0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \|$' "$WORK/md" \
        && grep -q 'tied to the token embedding' "$WORK/md" \
        && ok "bench -o md: pp16 and tg4 rows with t/s and decode GB/s" || not_ok "bench md: $(cat "$WORK/md")"
else
    not_ok "bench md failed: $(head -c 400 "$WORK/err")"
fi

# csv: a header and two rows of the same field count.
if $R bench -m "$M" "${SMALL[@]}" -o csv >"$WORK/csv" 2>"$WORK/err"; then
    python3 - "$WORK/csv" <<'PY' && ok "bench -o csv: header and a pp16 and a tg4 row" || not_ok "bench csv: $(cat "$WORK/csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["test"] for r in rows] == ["pp16", "tg4"], rows
for r in rows:
    assert float(r["ts_median"]) > 0 and int(r["threads"]) == 2 and int(r["reps"]) == 1
assert rows[0]["decode_gbs"] == "" and float(rows[1]["decode_gbs"]) > 0
PY
else
    not_ok "bench csv failed: $(head -c 400 "$WORK/err")"
fi

# Each repetition feeds the same ids again: all of them must be computed,
# none served from the blocks the last one left in the prefix cache (the
# second pp repetition once ran in a tenth of the first's time).
if $R bench -m "$M" -p 64 -n 2 -r 3 -t 2 -o json >"$WORK/reps" 2>"$WORK/err"; then
    python3 - "$WORK/reps" <<'PY' && ok "bench: every repetition computes every row (no prefix cache)" \
        || not_ok "bench repetitions: $(cat "$WORK/reps")"
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["rows_computed"] for r in d] == [64, 2], d
PY
else
    not_ok "bench -r 3 failed: $(head -c 400 "$WORK/err")"
fi

# json: parsed, the numbers agree with each other (t/s = tokens / time,
# GB/s = decode bytes x median t/s, the tied embedding counted).
if $R bench -m "$M" "${SMALL[@]}" -o json >"$WORK/json" 2>"$WORK/err"; then
    python3 - "$WORK/json" <<'PY' && ok "bench -o json: parses, t/s and GB/s consistent" || not_ok "bench json: $(cat "$WORK/json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["test"] for r in d] == ["pp16", "tg4"], d
pp, tg = d
for r in d:
    n = r["n_prompt"] + r["n_gen"]
    assert len(r["samples_ns"]) == 1 and r["ts_median"] > 0
    assert abs(n * 1e9 / r["samples_ns"][0] - r["ts_mean"]) <= 1e-3 * r["ts_mean"] + 1e-3, r
    assert sum(r["kernel_detail"].values()) > 0 and r["threads"] == 2
assert pp["rows_per_step"] == 16 and tg["rows_per_step"] == 1
# SmolLM2 ties lm_head to the embedding: every tensor is read per token.
assert tg["tied_embedding"] is True and tg["decode_bytes"] == tg["tensor_bytes"]
assert abs(tg["decode_gbs"] - tg["decode_bytes"] * tg["ts_median"] / 1e9) < 1e-3
assert pp["decode_gbs"] is None
PY
else
    not_ok "bench json failed: $(head -c 400 "$WORK/err")"
fi

# A prompt past the trained context is refused at once, not prefilled for minutes.
$R bench -m "$M" -p 100000 -n 1 -r 1 >/dev/null 2>"$WORK/err"; rc=$?
[ $rc = 5 ] && grep -q "trained context" "$WORK/err" && ok "bench -p past the trained context: exit 5, one line" \
    || not_ok "bench -p 100000: exit $rc, $(head -c 300 "$WORK/err")"

finish
