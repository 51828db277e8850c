#!/usr/bin/env bash
# test_stream_experts.sh: `--stream-experts` reads a MoE model's routed
# experts from the file as routing picks them (engine/experts.c) and gives
# the tokens of the model held in memory; the plan says how they are read.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN

for m in "gpt_oss q8_0" "qwen3moe f32" "olmoe q8_0" "qwen2moe q8_0"; do
    set -- $m
    $R convert "$FIXTURES/$1" -o "$WORK/$1.rad" --quant "$2" >/dev/null 2>&1 || not_ok "$1: convert failed"
    held=$($R run "$WORK/$1.rad" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 2>/dev/null)
    streamed=$($R run "$WORK/$1.rad" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --stream-experts 2>/dev/null)
    [ -n "$held" ] && [ "$held" = "$streamed" ] && ok "$1 $2: streamed experts give the held model's tokens" \
        || not_ok "$1 $2: held '$held', streamed '$streamed'"
done

plan=$($R run "$WORK/gpt_oss.rad" --tokens 1,2 -n 1 --stream-experts --expert-cache 1M --debug-plan 2>&1 >/dev/null)
echo "$plan" | grep -q "streamed experts: 16 runs .* a cache of 16 slots" \
    && ok "--expert-cache sizes the cache (16 slots: every run of the model), --debug-plan says so" \
    || not_ok "plan: $(echo "$plan" | grep streamed)"

# A GGUF stores each expert stack whole: refused by name, with the way out;
# `convert FILE.gguf` writes its experts one record each, and that streams.
G="$RADIANCE_SRC/tests/models/llamacpp"
expect_fail "--stream-experts on a GGUF" 4 "ffn_.*_exps.weight' is one stacked tensor.*radiance convert FILE.gguf" \
    $R run "$G/qwen3moe-tiny-q8_0.gguf" --tokens 1,2 -n 1 --stream-experts
for f in qwen3moe-tiny-q8_0 mixtral-tiny-f32 gpt-oss-tiny-f32; do
    $R convert "$G/$f.gguf" -o "$WORK/$f.rad" >/dev/null 2>&1 || not_ok "$f: convert of the GGUF failed"
    direct=$($R run "$G/$f.gguf" --tokens 1,2,3,4,5 -n 10 --temp 0 2>/dev/null)
    streamed=$($R run "$WORK/$f.rad" --tokens 1,2,3,4,5 -n 10 --temp 0 --stream-experts 2>/dev/null)
    [ -n "$direct" ] && [ "$direct" = "$streamed" ] && ok "$f: the GGUF's .rad streams its experts, same tokens" \
        || not_ok "$f: GGUF '$direct', its .rad streamed '$streamed'"
done

finish
