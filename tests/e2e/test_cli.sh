#!/usr/bin/env bash
# test_cli.sh: the command-line paths a user takes with a converted model:
# convert, run from token ids, dump logits, inspect the graph and plan.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN

$R --help | grep -q "usage: radiance" && ok "--help prints usage" || not_ok "--help"
$R --version | grep -Eq "^radiance [0-9]" && ok "--version" || not_ok "--version"
$R frobnicate >/dev/null 2>&1; [ $? -eq 2 ] && ok "unknown command exits 2" || not_ok "unknown command exit status"

for case in llama qwen3; do
    $R convert "$FIXTURES/$case" -o "$WORK/$case.rad" --quant f32 2>"$WORK/log" && ok "convert $case" || not_ok "convert $case: $(cat "$WORK/log")"
    prompt=$(cut -d, -f1-8 "$FIXTURES/$case/tokens.txt")
    got=$($R run -m "$WORK/$case.rad" --tokens "$prompt" -n 16 --temp 0 --kv-dtype f32)
    [ "$got" = "$(cat "$FIXTURES/$case/greedy.txt")" ] && ok "run $case: greedy ids equal HF's" || not_ok "run $case: got $got"
done

# The same seed gives the same sample; the positional form of MODEL works.
a=$($R run "$WORK/llama.rad" --tokens 1,2,3 -n 12 --temp 1.0 --seed 7)
b=$($R run "$WORK/llama.rad" --tokens 1,2,3 -n 12 --temp 1.0 --seed 7)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "sampling is deterministic for a seed" || not_ok "seeded runs differ: $a / $b"

# --dump-logits writes [n_tokens, vocab] f32 and nothing else.
$R run -m "$WORK/llama.rad" --tokens 1,2,3,4,5 -n 0 --dump-logits "$WORK/l.f32" >/dev/null
[ "$(stat -c %s "$WORK/l.f32")" -eq $((5 * 1024 * 4)) ] && ok "--dump-logits size" || not_ok "--dump-logits size"
ls "$WORK"/l.f32.partial* >/dev/null 2>&1 && not_ok "--dump-logits left a temporary" || ok "--dump-logits atomic"

# Chunked prefill gives the same logits as one chunk.
$R run -m "$WORK/llama.rad" --tokens "$(cat "$FIXTURES/llama/tokens.txt")" -n 0 --kv-dtype f32 --batch 7 --dump-logits "$WORK/a.f32" >/dev/null
$R run -m "$WORK/llama.rad" --tokens "$(cat "$FIXTURES/llama/tokens.txt")" -n 0 --kv-dtype f32 --batch 96 --dump-logits "$WORK/b.f32" >/dev/null
python3 - "$WORK/a.f32" "$WORK/b.f32" <<'PY' && ok "prefill chunk size does not change logits" || not_ok "chunked logits differ"
import struct, sys
a = open(sys.argv[1], "rb").read(); b = open(sys.argv[2], "rb").read()
x = struct.unpack(f"{len(a)//4}f", a); y = struct.unpack(f"{len(b)//4}f", b)
sys.exit(0 if len(x) == len(y) and max(abs(p - q) for p, q in zip(x, y)) < 1e-5 else 1)
PY

$R info --plugins | grep -q "llama_q8_0" && ok "info --plugins lists the q8_0 plugin" || not_ok "info --plugins"
$R info --kernels | grep -q "attn_paged" && ok "info --kernels lists ref rows" || not_ok "info --kernels"
$R info --graph "$WORK/qwen3.rad" >"$WORK/graph" && grep -q "qk_norm" "$WORK/graph" && grep -Eq "band 1..256 -> (cpu|ref):" "$WORK/graph" \
    && grep -q "activation arena" "$WORK/graph" && ok "info --graph shows ops, kernels per band and the plan" \
    || not_ok "info --graph: $(head -5 "$WORK/graph")"
$R run -m "$WORK/llama.rad" --tokens 1,2 -n 1 --debug-graph 2>&1 >/dev/null | grep -q "gemm_nt" && ok "--debug-graph" || not_ok "--debug-graph"

# --quant q4_k: rows of 64 elements cannot hold 256-element blocks, so those
# matrices fall back to q8_0 (as llama.cpp's quantizer does), named in show.
$R convert "$FIXTURES/qwen3" -o "$WORK/q4k.rad" --quant q4_k 2>/dev/null \
    && $R show "$WORK/q4k.rad" | grep -Eq "attn_q.weight +3 +q8_0" \
    && ok "q4_k falls back to q8_0 where rows are not whole 256-blocks" || not_ok "q4_k fallback"
$R convert "$FIXTURES/qwen3" -o "$WORK/q40.rad" --quant q4_0 2>/dev/null \
    && $R show "$WORK/q40.rad" | grep -Eq "attn_q.weight +3 +q4_0" \
    && [ -n "$($R run "$WORK/q40.rad" --tokens 1,2,3 -n 4 --temp 0)" ] && ok "convert --quant q4_0 runs" || not_ok "q4_0"

# Every flag a command's --help names is documented in the man page.
missing=""
for cmd in run convert info tokenize perplexity; do
    for flag in $($R $cmd --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
        grep -q -- "$(echo "$flag" | sed 's/-/\\\\-/g')" "$RADIANCE_SRC/man/radiance.1" || missing="$missing $cmd:$flag"
    done
done
[ -z "$missing" ] && ok "every --help flag is in radiance(1)" || not_ok "flags missing from radiance(1):$missing"

finish
