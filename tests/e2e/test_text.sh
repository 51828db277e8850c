#!/usr/bin/env bash
# test_text.sh: text in and text out through the command line: `tokenize`
# with a model, a tokenizer.json or its reverse, and `run` with a text prompt.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN
SHARED=${RADIANCE_SHARED:-$RADIANCE_SRC/../shared}
Q="$FIXTURES/qwen3"

# Ids for a shared vocabulary (HF tokenizers gives 1,22557,1526 for Llama 2's).
if [ -d "$SHARED/tokenizers" ]; then
    got=$($R tokenize --tokenizer "$SHARED/tokenizers/llama2/tokenizer.json" "Hello world")
    [ "$got" = "1,22557,1526" ] && ok "tokenize with a tokenizer.json adds BOS" || not_ok "tokenize llama2: $got"
    got=$($R tokenize --tokenizer "$SHARED/tokenizers/llama2/tokenizer.json" --no-special "Hello world</s>")
    echo "$got" | grep -q '^22557,1526,' && ! echo "$got" | grep -q ',2$' && ok "--no-special: no BOS, </s> is text" \
        || not_ok "--no-special: $got"
elif [ "${CI:-}" = true ]; then
    not_ok "../shared/tokenizers is missing (CI must have it)"
else
    echo "SKIP shared tokenizers not found at $SHARED"
fi

$R convert "$Q" -o "$WORK/q.rad" --quant f32 2>/dev/null && ok "convert a checkpoint with a tokenizer" || not_ok "convert qwen3"
text="Hello world, this is radiance. 日本語も 🙂"
a=$($R tokenize -m "$WORK/q.rad" "$text")
b=$($R tokenize --tokenizer "$Q/tokenizer.json" "$text")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "the model's stored tokenizer equals its tokenizer.json" || not_ok "stored $a vs json $b"
back=$($R tokenize -m "$WORK/q.rad" --decode "$a")
[ "$back" = "$text" ] && ok "--decode undoes tokenize" || not_ok "decode gave '$back'"
$R tokenize -m "$WORK/q.rad" --json "$text" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d and all("id" in x and "piece" in x for x in d)' \
    && ok "--json is valid JSON with ids and pieces" || not_ok "--json"
c=$(printf '%s' "$text" | $R tokenize -m "$WORK/q.rad")
[ "$c" = "$a" ] && ok "tokenize reads standard input" || not_ok "stdin gave $c"

# Bytes that are not UTF-8, and NULs, are text like any other: no error.
printf 'ab\xff\xfe\xc3cd' | $R tokenize -m "$WORK/q.rad" >"$WORK/ids" 2>"$WORK/err" && [ -s "$WORK/ids" ] \
    && ok "invalid UTF-8 tokenizes (as U+FFFD)" || not_ok "invalid UTF-8: $(cat "$WORK/err")"
printf 'a\0b\0c' | $R tokenize -m "$WORK/q.rad" >"$WORK/ids" 2>"$WORK/err" && [ "$(tr ',' '\n' <"$WORK/ids" | wc -l)" -ge 3 ] \
    && ok "NUL bytes are characters" || not_ok "NUL bytes: $(cat "$WORK/ids") $(cat "$WORK/err")"

# A text prompt: the answer equals the decoded ids of the same greedy run
# (the repeat penalty off: the token-id path has none by default, text
# replies have the repetition guard, docs/SAMPLING.md).
ids=$($R run "$WORK/q.rad" --tokens "$a" -n 12 --temp 0 --ignore-eos)
want=$($R tokenize -m "$WORK/q.rad" --decode "$ids")
got=$($R run "$WORK/q.rad" --raw "$text" -n 12 --temp 0 --repeat-penalty 1 --ignore-eos)
[ "$got" = "$want" ] && ok "run with a text prompt streams the decoded continuation" || not_ok "run text: '$got' vs '$want'"
got2=$(printf '%s' "$text" | $R run "$WORK/q.rad" --raw -n 12 --temp 0 --repeat-penalty 1 --ignore-eos)
[ "$got2" = "$want" ] && ok "run reads a piped prompt" || not_ok "piped run: '$got2'"

expect_fail "a 50 MB prompt" 5 "context" bash -c "head -c 50000000 /dev/zero | tr '\\\\0' 'a' | $R run $WORK/q.rad -n 1"
expect_fail "text prompt to a model without a tokenizer" 3 "no tokenizer" \
    bash -c "$R convert $FIXTURES/mistral -o $WORK/m.rad --quant f32 2>/dev/null; $R run $WORK/m.rad hello -n 1"
expect_fail "an empty prompt" 2 "empty" bash -c "printf '' | $R run $WORK/q.rad -n 1"

python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
json.dump({"version": "1.0", "added_tokens": []}, open(w + "/nomodel.json", "w"))
json.dump({"version": "1.0", "added_tokens": [], "model": {"type": "Unigram", "vocab": [["a", 0.0]]}},
          open(w + "/unigram.json", "w"))
PY
expect_fail "tokenizer.json without a model section" 4 "nomodel.json.*model" $R tokenize --tokenizer "$WORK/nomodel.json" hi
expect_fail "tokenizer.json of an unsupported type" 4 "Unigram" $R tokenize --tokenizer "$WORK/unigram.json" hi

finish
