#!/usr/bin/env bash
# test_gptoss_bad_input.sh: a gpt-oss checkpoint that cannot make a model (a
# fused expert tensor of the wrong shape, an MXFP4 scale tensor that does
# not fit its blocks, one that holds E8M0's NaN, blocks without their
# scales, experts per token past the expert count) gets one line naming the
# tensor or key and the problem, a non-zero exit, no crash and no output.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN

fresh() { rm -rf "$WORK/m" "$WORK/o.rad"; cp -r "$FIXTURES/$1" "$WORK/m"; }
no_output() { [ ! -e "$WORK/o.rad" ] && ! ls "$WORK"/o.rad.partial* >/dev/null 2>&1 && ok "$1 leaves no output" || not_ok "$1: output left behind"; }

fresh gpt_oss; $CRAFT reshape-tensor "$FIXTURES/gpt_oss/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.1.mlp.experts.gate_up_proj
expect_fail "a fused gate_up_proj of the wrong shape" 4 \
    "experts.gate_up_proj' has shape \[64, 64, 8\]; the config makes 'blk.1.ffn_gate_exps.weight' \[8, 32, 64\], read from a tensor of shape \[8, 64, 64\] \(stored \[in, out\]\)" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "a fused gate_up_proj of the wrong shape"

fresh gpt_oss; $CRAFT reshape-tensor "$FIXTURES/gpt_oss/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.0.mlp.experts.down_proj_bias
expect_fail "an expert bias of the wrong shape" 4 \
    "experts.down_proj_bias' has shape \[64, 8\]; the config says 'blk.0.ffn_down_exps.bias' is \[8, 64\]" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "an expert bias of the wrong shape"

fresh gpt_oss_mxfp4; $CRAFT reshape-tensor "$FIXTURES/gpt_oss_mxfp4/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.0.mlp.experts.down_proj_scales
expect_fail "an MXFP4 scale tensor that does not fit its blocks" 4 \
    "MXFP4 tensor 'model.layers.0.mlp.experts.down_proj_blocks' has shape \[8, 64, 1, 16\].*'model.layers.0.mlp.experts.down_proj_scales' has \[1, 64, 8\]" \
    $R convert "$WORK/m" -o "$WORK/o.rad" --quant mxfp4
no_output "an MXFP4 scale tensor that does not fit its blocks"

fresh gpt_oss_mxfp4; $CRAFT set-byte "$FIXTURES/gpt_oss_mxfp4/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.1.mlp.experts.gate_up_proj_scales 5 255
expect_fail "an MXFP4 scale of 0xFF (NaN)" 4 \
    "MXFP4 scale tensor 'model.layers.1.mlp.experts.gate_up_proj_scales' holds 0xFF \(NaN\) at element 5" \
    $R convert "$WORK/m" -o "$WORK/o.rad" --quant f32
no_output "an MXFP4 scale of 0xFF (NaN)"

fresh gpt_oss_mxfp4; $CRAFT drop-tensor "$FIXTURES/gpt_oss_mxfp4/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.0.mlp.experts.gate_up_proj_scales
expect_fail "MXFP4 blocks without their scales" 4 \
    "gate_up_proj_blocks' has no 'model.layers.0.mlp.experts.gate_up_proj_scales' beside it" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "MXFP4 blocks without their scales"

fresh gpt_oss; sed -i 's/"num_experts_per_tok": 2/"num_experts_per_tok": 9/' "$WORK/m/config.json"
grep -q '"num_experts_per_tok": 9' "$WORK/m/config.json" || not_ok "the fixture's config changed shape"
expect_fail "top-k larger than the expert count" 4 "num_experts_per_tok.* = 9.*experts" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "top-k larger than the expert count"

finish
