#!/usr/bin/env bash
# test_moe_bad_input.sh: a mixture-of-experts checkpoint that cannot make a
# model (more experts used per token than exist, an expert tensor of the
# wrong shape, one expert missing) gets one line naming the file, the tensor
# or key and the problem, a non-zero exit, no crash and no output file.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN

fresh() { rm -rf "$WORK/m" "$WORK/o.rad"; cp -r "$FIXTURES/qwen3moe" "$WORK/m"; }
no_output() { [ ! -e "$WORK/o.rad" ] && ! ls "$WORK"/o.rad.partial* >/dev/null 2>&1 && ok "$1 leaves no output" || not_ok "$1: output left behind"; }

fresh; sed -i 's/"num_experts_per_tok": 2/"num_experts_per_tok": 9/' "$WORK/m/config.json"
grep -q '"num_experts_per_tok": 9' "$WORK/m/config.json" || not_ok "the fixture's config changed shape"
expect_fail "top-k larger than the expert count" 4 "config.json.*num_experts_per_tok.* = 9.*experts" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "top-k larger than the expert count"

fresh; $CRAFT reshape-tensor "$FIXTURES/qwen3moe/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.0.mlp.experts.3.up_proj.weight
expect_fail "an expert tensor of the wrong shape" 4 \
    "experts.3.up_proj.weight' has shape \[64, 16\].*blk.0.ffn_up_exps.weight' is \[16, 64\]" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "an expert tensor of the wrong shape"

fresh; $CRAFT drop-tensor "$FIXTURES/qwen3moe/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.0.mlp.experts.5.gate_proj.weight
expect_fail "a checkpoint missing one expert" 4 \
    "experts.5.gate_proj.weight' is missing.*blk.0.ffn_gate_exps.weight', which stacks 8" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "a checkpoint missing one expert"

finish
