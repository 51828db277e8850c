#!/bin/bash
# test_pipe.sh: the pipe contract of `radiance run` (radiance(1), RUN) with a
# real model: SmolLM2-135M-Instruct (ChatML), Q4_1 GGUF, from the model cache
# (tests/models/fetch.sh).  Prompt joining, chat format versus --raw, --json
# and --jsonl, exit statuses, SIGINT, escape codes, NO_COLOR, and the
# precedence flag > environment > config file > default.
. "$(dirname "$0")/lib.sh"
R="$RADIANCE_BIN"
M="${RADIANCE_MODELS_DIR:-$HOME/.cache/radiance/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$M" ]; then
    if [ "${CI:-}" = true ]; then
        not_ok "the SmolLM2 model is missing: $M (run tests/models/fetch.sh)"
        finish
        exit 1
    fi
    echo "SKIP test_pipe.sh: $M is missing (tests/models/fetch.sh fetches it)"
    exit 0
fi
# No user config leaks in; each check that wants one makes its own.
export RADIANCE_CONFIG=/dev/null
unset RADIANCE_MODEL RADIANCE_CTX RADIANCE_THREADS RADIANCE_KERNELS RADIANCE_TEMP RADIANCE_SEED NO_COLOR
PY=python3
# Greedy and short, so runs are quick and repeatable.
G="--temp 0 -n 40"

# json FILE EXPR: evaluate a Python expression over the JSON object in FILE (as j).
json() { $PY -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ------------------------------------------------------------ prompt joining
# Arguments first, then a blank line, then stdin: the raw prompt tokenizes to
# exactly the ids of that text.
printf 'stdin line one\nstdin line two\n' | $R run "$M" --raw -n 0 --json first second >"$WORK/j" 2>"$WORK/err"
want=$(printf 'first second\n\nstdin line one\nstdin line two\n' | $R tokenize -m "$M" | tr ',' '\n' | wc -l)
got=$(json "$WORK/j" "j['usage']['prompt_tokens']" 2>/dev/null)
[ "$got" = "$want" ] && ok "args then a blank line then stdin ($got tokens)" \
    || not_ok "prompt joining: prompt_tokens $got, expected $want; $(cat "$WORK/err")"
got_args=$($R run "$M" --raw -n 0 --json first second </dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['prompt_tokens'])")
want_args=$($R tokenize -m "$M" "first second" | tr ',' '\n' | wc -l)
[ "$got_args" = "$want_args" ] && ok "args alone (stdin empty, not a terminal)" || not_ok "args alone: $got_args vs $want_args"
got_in=$(printf 'only stdin' | $R run "$M" --raw -n 0 --json | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['prompt_tokens'])")
want_in=$($R tokenize -m "$M" "only stdin" | tr ',' '\n' | wc -l)
[ "$got_in" = "$want_in" ] && ok "stdin alone" || not_ok "stdin alone: $got_in vs $want_in"

# ------------------------------------------------------------ chat vs raw
$R run "$M" $G --json "What is 2+2?" >"$WORK/chat.json" 2>"$WORK/err"
$R run "$M" $G --json --raw "What is 2+2?" >"$WORK/raw.json" 2>>"$WORK/err"
fmt=$(json "$WORK/chat.json" "j['format']" 2>/dev/null)
[ -n "$fmt" ] && [ "$fmt" != raw ] && ok "the model's chat format is used ($fmt)" \
    || not_ok "chat format: format '$fmt' (the plugin exports no chat format for SmolLM2?) $(cat "$WORK/err")"
[ "$(json "$WORK/raw.json" "j['format']" 2>/dev/null)" = raw ] && ok "--raw sends the prompt as is" || not_ok "--raw format"
pc=$(json "$WORK/chat.json" "j['usage']['prompt_tokens']" 2>/dev/null)
pr=$(json "$WORK/raw.json" "j['usage']['prompt_tokens']" 2>/dev/null)
[ -n "$pc" ] && [ -n "$pr" ] && [ "$pc" -gt "$pr" ] && ok "the chat prompt carries the template's markup ($pc > $pr tokens)" \
    || not_ok "chat prompt tokens $pc vs raw $pr"
if json "$WORK/chat.json" "j['content']" | grep -q '<|im_'; then not_ok "markup leaked into the answer"; else ok "no markup in the answer"; fi
# ChatML ends the reply with <|im_end|>: SmolLM2's greedy answer to this
# ("The answer to this classic math problem is 4.") stops by itself.
[ "$(json "$WORK/chat.json" "j['finish_reason']")" = stop ] && ok "the chat reply ends at the stop token" \
    || not_ok "chat finish_reason $(json "$WORK/chat.json" "j['finish_reason']")"
# A system prompt is rendered: a longer one makes a longer prompt.
ps1=$($R run "$M" -n 0 --json -s "Be terse." "Hi" | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['prompt_tokens'])")
ps2=$($R run "$M" -n 0 --json -s "Be terse, polite and precise, and answer in French." "Hi" | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['prompt_tokens'])")
[ -n "$ps1" ] && [ -n "$ps2" ] && [ "$ps2" -gt "$ps1" ] && ok "--system is rendered ($ps1 < $ps2 tokens)" || not_ok "--system: $ps1 vs $ps2"

# ------------------------------------------------------------ --json
$R run "$M" --temp 0 -n 5 --json --raw "The capital of France is" >"$WORK/j" 2>"$WORK/err"
if $PY - "$WORK/j" <<'PY'; then ok "--json parses and has every field"; else not_ok "--json fields: $(head -c 400 "$WORK/j")"; fi
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("content", "reasoning", "tool_calls", "tokens", "usage", "timings", "finish_reason"):
    assert k in j, k
assert isinstance(j["content"], str) and j["content"], j
assert isinstance(j["tool_calls"], list)
assert j["usage"]["completion_tokens"] == len(j["tokens"]) == 5, j
assert j["usage"]["prompt_tokens"] > 0
for k in ("ttft_ms", "prefill_tps", "decode_tps"):
    assert isinstance(j["timings"][k], (int, float)) and j["timings"][k] > 0, k
assert j["finish_reason"] == "length", j["finish_reason"]
PY
# The streamed text equals the JSON content (same greedy run).
$R run "$M" --temp 0 -n 5 --raw "The capital of France is" >"$WORK/plain" 2>/dev/null
$PY -c "import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))['content'] + '\n')" "$WORK/j" >"$WORK/want"
cmp -s "$WORK/plain" "$WORK/want" && ok "stdout is the answer alone, newline-terminated" \
    || not_ok "plain vs json: '$(cat "$WORK/plain")' vs '$(cat "$WORK/want")'"
# The token ids decode to the content.
ids=$(json "$WORK/j" "','.join(map(str, j['tokens']))")
[ "$($R tokenize -m "$M" --decode "$ids")" = "$(json "$WORK/j" "j['content']")" ] && ok "--json tokens decode to the content" \
    || not_ok "tokens $ids do not decode to the content"

# ------------------------------------------------------------ --jsonl
$R run "$M" $G --jsonl "What is 2+2?" >"$WORK/jl" 2>"$WORK/err"
if $PY - "$WORK/jl" "$WORK/chat.json" <<'PY'; then ok "--jsonl: content events then one done event"; else not_ok "--jsonl: $(head -c 400 "$WORK/jl")"; fi
import json, sys
lines = open(sys.argv[1]).read().splitlines()
events = [json.loads(l) for l in lines]
assert len(events) >= 2
assert all(e["type"] in ("content", "reasoning", "tool_call") for e in events[:-1]), events
done = events[-1]
assert done["type"] == "done" and "usage" in done and "timings" in done and "finish_reason" in done, done
text = "".join(e["text"] for e in events if e["type"] == "content")
assert text == json.load(open(sys.argv[2]))["content"], (text,)
assert done["usage"]["completion_tokens"] == len(done["tokens"])
PY

# ------------------------------------------------------------ exit statuses
expect_fail "a missing model is status 3" 3 "nope" $R run "$WORK/nope.gguf" hello
$R run "$M" --no-such-flag hello >"$WORK/out" 2>"$WORK/err"
[ $? = 2 ] && [ ! -s "$WORK/out" ] && ok "a bad flag is status 2" || not_ok "bad flag: $(head -2 "$WORK/err")"
expect_fail "a bad value is status 2" 2 "top-p" $R run "$M" --top-p 7 hello
expect_fail "a prompt over --ctx is status 5" 5 "context" $R run "$M" --ctx 16 "$(printf 'word %.0s' $(seq 40))"
expect_fail "--context-policy refuse is status 5" 5 "refuse" $R run "$M" --ctx 64 -n 60 --context-policy refuse hello
expect_fail "an empty prompt is status 2" 2 "empty" bash -c "printf '' | $R run '$M'"
# Never interactive: a terminal on stdin and no prompt is a usage error, at once.
if command -v script >/dev/null; then
    timeout 20 script -qec "$R run '$M' </dev/tty; echo status=\$?" /dev/null >"$WORK/tty" 2>&1
    grep -q "status=2" "$WORK/tty" && grep -q "prompt is required" "$WORK/tty" \
        && ok "no prompt and a terminal on stdin: status 2, nothing asked" || not_ok "terminal stdin: $(tr -d '\r' <"$WORK/tty")"
else
    echo "skip terminal-stdin check (no script(1))"
fi

# SIGINT mid-reply: the partial answer is kept and flushed, status 130.
$R run "$M" --raw --ignore-eos -n 100000 "Once upon a time" >"$WORK/int.out" 2>"$WORK/int.err" &
pid=$!
for _ in $(seq 600); do [ -s "$WORK/int.out" ] && break; sleep 0.05; done
sleep 0.3
kill -INT $pid
wait $pid
st=$?
[ "$st" = 130 ] && [ -s "$WORK/int.out" ] && grep -q interrupted "$WORK/int.err" \
    && ok "SIGINT mid-reply: status 130, the partial answer kept ($(wc -c <"$WORK/int.out") bytes)" \
    || not_ok "SIGINT: status $st, out '$(head -c 100 "$WORK/int.out")', err '$(cat "$WORK/int.err")'"
# ... and with --json the object still comes, marked interrupted.
$R run "$M" --raw --ignore-eos -n 100000 --jsonl "Once upon a time" >"$WORK/int.jl" 2>/dev/null &
pid=$!
for _ in $(seq 600); do [ -s "$WORK/int.jl" ] && break; sleep 0.05; done
kill -INT $pid
wait $pid
st=$?
[ "$st" = 130 ] && [ "$(tail -1 "$WORK/int.jl" | $PY -c "import json,sys; print(json.load(sys.stdin)['finish_reason'])")" = interrupted ] \
    && ok "SIGINT with --jsonl: the done event says interrupted, status 130" || not_ok "SIGINT jsonl: status $st, $(tail -1 "$WORK/int.jl")"

# ------------------------------------------------------------ escape codes
# Piped output never carries escape codes; --color always does on stderr (a
# context notice), unless NO_COLOR is set.
esc=$(printf '\033')
$R run "$M" $G --show-thinking "Say hello." >"$WORK/o" 2>"$WORK/e"
if grep -q "$esc" "$WORK/o" "$WORK/e"; then not_ok "escape bytes in piped output"; else ok "no escape bytes when piped"; fi
$R run "$M" --temp 0 -n 8 --ctx 8 --raw --color always "hello there" >/dev/null 2>"$WORK/e"
grep -q "$esc" "$WORK/e" && ok "--color always colours the notice" || not_ok "--color always: $(cat -v "$WORK/e")"
NO_COLOR=1 $R run "$M" --temp 0 -n 8 --ctx 8 --raw --color always "hello there" >/dev/null 2>"$WORK/e"
if grep -q "$esc" "$WORK/e"; then not_ok "NO_COLOR: $(cat -v "$WORK/e")"; else ok "NO_COLOR wins over --color always"; fi

# ------------------------------------------------------------ config file
unset RADIANCE_CONFIG
export XDG_CONFIG_HOME="$WORK/xdg"
mkdir -p "$XDG_CONFIG_HOME/radiance"
CF="$XDG_CONFIG_HOME/radiance/config"
printf '# a comment\n\ntemp = 0\nn_predict = 3\nmodel = %s\n' "$M" >"$CF"
n=$(printf 'Hi' | $R run --raw --json | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['completion_tokens'])")
[ "$n" = 3 ] && ok "config: n_predict and the default model are used" || not_ok "config n_predict: $n"
n=$(printf 'Hi' | $R run --raw --json -n 2 | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['completion_tokens'])")
[ "$n" = 2 ] && ok "a flag beats the config" || not_ok "flag over config: $n"
# flag > environment > config, with the model and the context.
printf 'model = %s\nctx = 8\n' "$WORK/from-config.gguf" >"$CF"
expect_fail "config: the model key is used" 3 "from-config" bash -c "echo hello | $R run"
echo hello | RADIANCE_MODEL="$WORK/from-env.gguf" $R run >/dev/null 2>"$WORK/err"
grep -q "from-env" "$WORK/err" && ok "the environment beats the config" || not_ok "env over config: $(cat "$WORK/err")"
RADIANCE_MODEL="$WORK/from-env.gguf" $R run -m "$M" -n 1 --ctx 64 hello >/dev/null 2>"$WORK/err" \
    && ok "a flag beats the environment" || not_ok "flag over env: $(cat "$WORK/err")"
expect_fail "config: ctx = 8 applies" 5 "context" $R run -m "$M" --raw "$(printf 'word %.0s' $(seq 20))"
RADIANCE_CTX=256 $R run -m "$M" --raw -n 1 "$(printf 'word %.0s' $(seq 20))" >/dev/null 2>"$WORK/err" \
    && ok "RADIANCE_CTX beats ctx in the config" || not_ok "RADIANCE_CTX: $(cat "$WORK/err")"
expect_fail "--ctx beats RADIANCE_CTX" 5 "context" env RADIANCE_CTX=256 $R run -m "$M" --ctx 8 --raw "$(printf 'word %.0s' $(seq 20))"
# Mistakes name file:line and the key, status 2.
printf 'temp = 0\ntmep = 0.5\n' >"$CF"
expect_fail "an unknown key: file:line and the key, status 2" 2 "config:2: tmep: unknown key" $R run -m "$M" hello
printf 'top_p = lots\n' >"$CF"
expect_fail "a bad value: file:line and the key, status 2" 2 "config:1: top_p" $R run -m "$M" hello
printf 'no equals sign here\n' >"$CF"
expect_fail "a line without '=': status 2" 2 "config:1" $R run -m "$M" hello
printf 'temp = 0\n' >"$CF"
expect_fail "a bad environment value names the variable" 2 "RADIANCE_TEMP" env RADIANCE_TEMP=warm $R run -m "$M" hello
expect_fail "RADIANCE_CONFIG naming no file is status 3" 3 "nothere" env RADIANCE_CONFIG="$WORK/nothere" $R run -m "$M" hello
# A quoted value keeps its escapes: a two-line system prompt renders longer
# than a one-line one.
printf 'system = "Be terse.\\nAnswer in French."\n' >"$CF"
a=$($R run -m "$M" -n 0 --json hello | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['prompt_tokens'])")
printf 'system = Be terse.\n' >"$CF"
b=$($R run -m "$M" -n 0 --json hello | $PY -c "import json,sys; print(json.load(sys.stdin)['usage']['prompt_tokens'])")
[ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt "$b" ] && ok "a quoted system prompt with \\n is read" || not_ok "quoted system: $a vs $b"

# ------------------------------------------------------------ relayout and memory
# The cpu library copies q4_1 / q8_0 weights into its own layout at load
# (--debug-plan counts the bytes); when the model does not fit the memory
# budget (docs/RESIDENCY.md) the copies are skipped and the model still
# answers from its mapping; a budget that holds the weights but not every
# copy makes some of them.
$R run "$M" --raw $G --debug-plan "Hello" >"$WORK/out" 2>"$WORK/plan"
grep -Eq "relayouted weights +[1-9][0-9]* bytes +\([0-9]+ kernel layouts\)" "$WORK/plan" && [ -s "$WORK/out" ] \
    && ok "relayout copies made and counted: $(grep -o 'relayouted weights *[0-9]*' "$WORK/plan" | tr -s ' ')" \
    || not_ok "no relayout copies in the plan: $(grep relayout "$WORK/plan")"
RADIANCE_MEM_AVAILABLE=150000000 $R run "$M" --raw $G --debug-plan "Hello" >"$WORK/out" 2>"$WORK/plan"
grep -Eq "relayouted weights +0 bytes +\(0 kernel layouts; .* exceed the budget of 0.07 GB" "$WORK/plan" && [ -s "$WORK/out" ] \
    && ok "relayout skipped when memory is short, the model still answers" \
    || not_ok "relayout with 150 MB available: $(grep relayout "$WORK/plan"); $(head -c 200 "$WORK/out")"
$R run "$M" --raw $G --debug-plan --mem-budget 215M "Hello" >"$WORK/out" 2>"$WORK/plan"
grep -Eq "relayouted weights +[1-9][0-9]* bytes +\([1-9][0-9]* kernel layouts; [0-9]+ of 211 copies .* left out: the budget of 0.23 GB is full" "$WORK/plan" \
    && [ -s "$WORK/out" ] && ok "--mem-budget 215M: $(grep -o '[0-9]* of 211 copies' "$WORK/plan") left out" \
    || not_ok "--mem-budget 215M: $(grep -E 'budget|relayout' "$WORK/plan")"

# The layout never changes an answer (docs/OPS.md, batch and placement
# invariance): the greedy tokens with the relayout skipped
# (RADIANCE_MEM_AVAILABLE=1000) are those with it, in the chat format and raw.
same=1
for mode in "" "--raw"; do
    with=$($R run "$M" $mode $G --json "Write a haiku about the sea." 2>"$WORK/err" | $PY -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
    without=$(RADIANCE_MEM_AVAILABLE=1000 $R run "$M" $mode $G --json "Write a haiku about the sea." 2>>"$WORK/err" | $PY -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
    [ -n "$with" ] && [ "$with" = "$without" ] || same=0
done
[ "$same" = 1 ] && ok "greedy tokens identical with the relayout skipped (RADIANCE_MEM_AVAILABLE=1000) and made" \
    || not_ok "greedy tokens change with the layout: $(head -2 "$WORK/err")"

# ------------------------------------------------------------ thread counts
# Greedy output with the cpu kernels is the same at any -t (docs/OPS.md,
# determinism): a short prompt (decode products) and a prompt of a few
# hundred tokens (prefill tiles, split differently per thread count).
long=$(for i in $(seq 1 40); do printf 'Line %d of a long prompt about tides, harbours and ships. ' "$i"; done)
same=1
for p in "Write a haiku about the sea." "$long"; do
    first=""
    for t in 1 2 3; do
        out=$($R run "$M" --raw $G -t $t --kernels cpu,ref --json "$p" 2>"$WORK/err" | $PY -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
        [ -n "$out" ] || { same=0; break; }
        [ -z "$first" ] && first=$out
        [ "$out" = "$first" ] || same=0
    done
done
[ "$same" = 1 ] && ok "greedy tokens identical at -t 1, 2 and 3 (short and long prompt)" \
    || not_ok "greedy tokens differ across thread counts: $(head -2 "$WORK/err")"

# The same for a mixture-of-experts model: GLM-4.5's q8_0 GGUF (sigmoid routing
# in groups, a shared expert), a 200-token prompt (prefill rows grouped by
# expert) and 16 decode steps.
GLM="$RADIANCE_SRC/tests/models/llamacpp/glm4moe-tiny-q8_0.gguf"
ids=$(seq -s, 1 200)
same=1 first=""
for t in 1 2 3; do
    out=$($R run "$GLM" --tokens "$ids" -n 16 --temp 0 -t $t 2>"$WORK/err")
    [ -n "$out" ] || { same=0; break; }
    [ -z "$first" ] && first=$out
    [ "$out" = "$first" ] || same=0
done
[ "$same" = 1 ] && ok "MoE (glm4moe q8_0): greedy tokens identical at -t 1, 2 and 3" \
    || not_ok "glm4moe greedy tokens differ across thread counts: $(head -2 "$WORK/err")"

finish
