#!/usr/bin/env bash
# test_speculate.sh: `radiance run --draft` on real GGUF files, as a user
# meets it: the reply is byte for byte the reply without it, for the n-gram
# drafter and for a draft model (the target itself, which guesses right
# every time), with the f16 and the f32 cache, on SmolLM2 (llama family) and
# Gemma 3 270M (gemma3 family, sliding-window layers); --json reports what
# the drafter did; a drafter the model cannot serve is one line, exit 4.
# Without the cached models (tests/models/fetch.sh) it skips, loudly; under
# CI=true it fails instead.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN
CACHE=${RADIANCE_MODELS:-$HOME/.cache/radiance/models}
SMOL=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA=$CACHE/gemma-3-270m-q4_k_m.gguf
for f in "$SMOL" "$GEMMA"; do
    if [ ! -r "$f" ]; then
        if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
            not_ok "$f is missing and CI is set: run tests/models/fetch.sh first"
        else
            echo "SKIPPED: $f is missing (run tests/models/fetch.sh to fetch it)"
        fi
        finish
        exit $?
    fi
done
export XDG_DATA_HOME=$WORK/data XDG_CONFIG_HOME=$WORK/config XDG_CACHE_HOME=$WORK/cache

# A task that repeats its input: the n-gram drafter's case.
PROMPT='Repeat this code exactly, with the variable total renamed to sum:
def add_all(values):
    total = 0
    for v in values:
        total = total + v
    return total

def mean(values):
    total = add_all(values)
    return total / len(values)'

# reply MODEL ARGS...: the --json result's content and speculation object.
reply() {
    local model=$1
    shift
    $R run "$model" "$PROMPT" --temp 0 -n 64 --no-log --json "$@" 2>"$WORK/err" | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["timings"].get("speculation") or {}
print(json.dumps({"content": d["content"], "tokens": d["usage"]["completion_tokens"],
                  "proposed": s.get("proposed", 0), "accepted": s.get("accepted", 0), "steps": s.get("steps", 0)}))'
}
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# same MODEL LABEL ARGS...: the reply with ARGS is the plain reply.
same() {
    local model=$1 label=$2 name
    name=$(basename "$model" .gguf)
    shift 2
    plain=$(reply "$model" "$@") || { not_ok "$name $label: plain run failed: $(head -c 300 "$WORK/err")"; return 1; }
    spec=$(reply "$model" "$@" --draft "$draft") || { not_ok "$name $label: run with the drafter failed: $(head -c 300 "$WORK/err")"; return 1; }
    if [ "$(field "$plain" content)" = "$(field "$spec" content)" ] && [ "$(field "$plain" tokens)" = "$(field "$spec" tokens)" ]; then
        ok "$name $label: the same $(field "$plain" tokens) tokens (proposed $(field "$spec" proposed), accepted $(field "$spec" accepted), $(field "$spec" steps) steps)"
    else
        not_ok "$name $label: the reply differs from plain decoding: $(field "$spec" content | head -c 200) ... vs $(field "$plain" content | head -c 200)"
        return 1
    fi
}

for model in "$SMOL" "$GEMMA"; do
    for kv in f16 f32; do
        draft=ngram same "$model" "kv $kv --draft ngram" --kv-dtype $kv
        draft=$model same "$model" "kv $kv --draft itself" --kv-dtype $kv
    done
    # Without a repeat penalty the target's greedy pick is its argmax, which
    # is what a draft model guesses: itself as draft model is right every time.
    draft=$model
    if same "$model" "--draft itself, no repeat penalty" --repeat-penalty 1; then
        [ "$(field "$spec" proposed)" -gt 0 ] && [ "$(field "$spec" proposed)" = "$(field "$spec" accepted)" ] \
            && ok "$(basename "$model" .gguf): itself as draft model: all $(field "$spec" proposed) guesses accepted" \
            || not_ok "$(basename "$model" .gguf): itself as draft model accepted $(field "$spec" accepted) of $(field "$spec" proposed)"
    fi
done

# Text that repeats is what n-gram lookup is for: a file's functions, then
# the start of the same functions again, continued raw.
PROMPT='def add_all(values):
    total = 0
    for v in values:
        total = total + v
    return total

def mean(values):
    total = add_all(values)
    return total / len(values)

# the same two functions again, unchanged:
def add_all(values):
'
draft=ngram
if same "$SMOL" "raw, a repeating text, --draft ngram" --raw --repeat-penalty 1; then
    [ "$(field "$spec" accepted)" -gt 10 ] && ok "SmolLM2 --draft ngram on a repeating text: $(field "$spec" accepted) guesses accepted" \
        || not_ok "SmolLM2 --draft ngram on a repeating text accepted only $(field "$spec" accepted) guesses"
fi

expect_fail "--draft mtp on a model without MTP layers: one line, exit 4" 4 "no multi-token-prediction layers" \
    $R run "$SMOL" "hi" -n 4 --no-log --draft mtp
expect_fail "a draft model with another vocabulary: one line, exit 4" 4 "vocabulary .* token for token" \
    $R run "$SMOL" "hi" -n 4 --no-log --draft "$GEMMA"
expect_fail "--draft-max past 16: one line, exit 2" 2 "draft-max" \
    $R run "$SMOL" "hi" -n 4 --no-log --draft ngram --draft-max 17
finish
