#!/bin/bash
# test_speculate.sh: `--draft` changes the speed, never the reply.  With the
# real SmolLM2 (tests/models/fetch.sh): a reply that edits a code file, greedy
# and sampled with a seed, is byte-identical with --draft ngram and with the
# model as its own draft (a second instance), and --json says what
# speculation did; a draft model of another vocabulary, --draft mtp on a model
# without MTP layers and a bad --draft-max are refused in one line.
. "$(dirname "$0")/lib.sh"
R="$RADIANCE_BIN"
DIR="${RADIANCE_MODELS_DIR:-$HOME/.cache/radiance/models}"
M="$DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$DIR/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$M" ]; then
    if [ "${CI:-}" = true ]; then
        not_ok "the SmolLM2 model is missing: $M (run tests/models/fetch.sh)"
        finish
        exit 1
    fi
    echo "SKIP test_speculate.sh: $M is missing (tests/models/fetch.sh fetches it)"
    exit 0
fi
export RADIANCE_CONFIG=/dev/null
unset RADIANCE_MODEL RADIANCE_CTX RADIANCE_THREADS RADIANCE_KERNELS RADIANCE_TEMP RADIANCE_SEED NO_COLOR

cat >"$WORK/code.py" <<'PY'
def scale(values, factor):
    result = []
    for value in values:
        result.append(value * factor)
    return result

def total(values):
    count = 0
    for value in values:
        count += value
    return count
PY
PROMPT="Rename the variable value to item in this code and reply with the whole code only.

$(cat "$WORK/code.py")"

for mode in "--temp 0" "--temp 0.8 --seed 7"; do
    $R run "$M" $mode -n 96 "$PROMPT" >"$WORK/plain" 2>"$WORK/err" || not_ok "plain run ($mode): $(cat "$WORK/err")"
    $R run "$M" $mode -n 96 --draft ngram "$PROMPT" >"$WORK/ngram" 2>"$WORK/err" || not_ok "--draft ngram ($mode): $(cat "$WORK/err")"
    $R run "$M" $mode -n 96 --draft "$M" --draft-max 4 "$PROMPT" >"$WORK/self" 2>"$WORK/err" \
        || not_ok "--draft itself ($mode): $(cat "$WORK/err")"
    [ -s "$WORK/plain" ] && cmp -s "$WORK/plain" "$WORK/ngram" && ok "--draft ngram ($mode): the same reply" \
        || not_ok "--draft ngram ($mode) changed the reply: $(diff "$WORK/plain" "$WORK/ngram" | head -5)"
    cmp -s "$WORK/plain" "$WORK/self" && ok "--draft (the model itself, $mode): the same reply" \
        || not_ok "--draft itself ($mode) changed the reply: $(diff "$WORK/plain" "$WORK/self" | head -5)"
done

$R run "$M" --temp 0 -n 96 --draft ngram --json "$PROMPT" >"$WORK/j" 2>"$WORK/err"
python3 - "$WORK/j" <<'PY' && ok "--json reports speculation: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['timings']['speculation'])" "$WORK/j")" || not_ok "--json speculation: $(head -c 300 "$WORK/j")"
import json, sys
s = json.load(open(sys.argv[1]))["timings"]["speculation"]
assert s["steps"] > 0 and 0 <= s["accepted"] <= s["proposed"], s
assert s["accepted"] > 0, "the edit repeats its input: n-gram guesses must be accepted"
PY

if [ -f "$GEMMA" ]; then
    expect_fail "a draft model of another vocabulary" 4 "vocabulary" $R run "$M" --draft "$GEMMA" "Hi"
fi
expect_fail "--draft mtp without MTP layers" 4 "multi-token-prediction" $R run "$M" --draft mtp "Hi"
expect_fail "--draft-max out of range" 2 "draft-max" $R run "$M" --draft ngram --draft-max 99 "Hi"
finish
