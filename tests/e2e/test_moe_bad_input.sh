#!/usr/bin/env bash
# test_moe_bad_input.sh: a mixture-of-experts checkpoint that cannot make a
# model (more experts used per token than exist, an expert tensor of the
# wrong shape, one expert missing) gets one line naming the file, the tensor
# or key and the problem, a non-zero exit, no crash and no output file.
# Qwen2-MoE's shared expert likewise (its gate of the wrong shape, one of its
# projections missing), and a qwen2moe GGUF whose metadata contradicts its
# tensors is refused at open.  GLM-4.5 (glm4moe): its correction bias of the
# wrong shape or missing, an expert of the wrong shape, groups that do not
# split the experts, and in its GGUF a bias of the wrong shape, a missing
# expert stack, topk_group above n_group and a gating other than sigmoid.
# Expert counts past RAD_LIMIT_ROUTED_EXPERTS are refused at open, and stacks
# past RAD_LIMIT_EXPERTS are converted whole.
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

Q2=$FIXTURES/qwen2moe
fresh2() { rm -rf "$WORK/m" "$WORK/o.rad"; cp -r "$Q2" "$WORK/m"; }
fresh2; $CRAFT reshape-tensor "$Q2/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.1.mlp.shared_expert_gate.weight
expect_fail "a shared expert gate of the wrong shape" 4 \
    "shared_expert_gate.weight' has shape \[64, 1\].*blk.1.ffn_gate_inp_shexp.weight' is \[1, 64\]" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "a shared expert gate of the wrong shape"

fresh2; $CRAFT drop-tensor "$Q2/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.0.mlp.shared_expert.up_proj.weight
expect_fail "a checkpoint missing a shared expert projection" 4 \
    "shared_expert.up_proj.weight' is missing.*blk.0.ffn_up_shexp.weight'" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "a checkpoint missing a shared expert projection"

GG="$RADIANCE_SRC/tests/models/llamacpp/qwen2moe-tiny-f32.gguf"
EDIT="python3 $RADIANCE_SRC/tests/e2e/gguf_edit.py $GG $WORK/bad.gguf"
$EDIT qwen2moe.expert_used_count=u32:9
expect_fail "GGUF top-k larger than the expert count" 4 "bad.gguf: metadata qwen2moe.expert_used_count = 9: more than the experts" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2moe.expert_count=u32:6
expect_fail "GGUF expert count below its stacks" 4 "bad.gguf: tensor 'blk.0.ffn_gate_inp.weight' has shape \[8, 64\], the model's metadata needs \[6, 64\]" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2moe.expert_shared_feed_forward_length=u32:48
expect_fail "GGUF shared expert size against its tensors" 4 "bad.gguf: tensor 'blk.0.ffn_gate_shexp.weight' has shape \[32, 64\], the model's metadata needs \[48, 64\]" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1

G=$FIXTURES/glm4moe
fresh3() { rm -rf "$WORK/m" "$WORK/o.rad"; cp -r "$G" "$WORK/m"; }
fresh3; $CRAFT set-shape "$G/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.1.mlp.gate.e_score_correction_bias 2,4
expect_fail "a correction bias of the wrong shape" 4 \
    "e_score_correction_bias' has shape \[2, 4\].*'blk.1.exp_probs_b.bias' is \[8\]" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "a correction bias of the wrong shape"

fresh3; $CRAFT drop-tensor "$G/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.2.mlp.gate.e_score_correction_bias
expect_fail "a checkpoint missing a correction bias" 4 \
    "layers.2.mlp.gate.e_score_correction_bias' is missing.*'blk.2.exp_probs_b.bias'" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "a checkpoint missing a correction bias"

fresh3; $CRAFT reshape-tensor "$G/model.safetensors" "$WORK/m/model.safetensors" \
    model.layers.2.mlp.experts.4.down_proj.weight
expect_fail "a GLM expert tensor of the wrong shape" 4 \
    "experts.4.down_proj.weight' has shape \[16, 64\].*blk.2.ffn_down_exps.weight' is \[64, 16\]" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "a GLM expert tensor of the wrong shape"

fresh3; sed -i 's/"n_group": 4/"n_group": 3/' "$WORK/m/config.json"
grep -q '"n_group": 3' "$WORK/m/config.json" || not_ok "the glm4moe fixture's config changed shape"
expect_fail "expert groups that do not split the experts" 4 \
    "config.json.*n_group = 3, topk_group = 2 with 8 experts, 2 per token: the groups must split" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
no_output "expert groups that do not split the experts"

GG="$RADIANCE_SRC/tests/models/llamacpp/glm4moe-tiny-f32.gguf"
EDIT="python3 $RADIANCE_SRC/tests/e2e/gguf_edit.py $GG $WORK/bad.gguf"
# the bias and a [64] norm of a later layer swap names: the bias is [64]
$EDIT tensor:blk.1.exp_probs_b.bias=swap tensor:blk.2.attn_norm.weight=blk.1.exp_probs_b.bias \
    tensor:swap=blk.2.attn_norm.weight
expect_fail "GGUF correction bias of the wrong shape" 4 \
    "bad.gguf: tensor 'blk.1.exp_probs_b.bias' has shape \[64\], the model's metadata needs \[8\]" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT tensor:blk.2.ffn_up_exps.weight=blk.2.ffn_up_exps.gone
expect_fail "GGUF missing one expert stack" 4 "bad.gguf: tensor 'blk.2.ffn_up_exps.weight' is missing" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT glm4moe.expert_group_used_count=u32:5
expect_fail "GGUF topk_group above n_group" 4 "bad.gguf.*n_group = 4, topk_group = 5 with 8 experts" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT glm4moe.expert_gating_func=u32:1
expect_fail "GGUF gating other than sigmoid" 4 "bad.gguf.*glm4moe.expert_gating_func = 1: GLM-4.5 routes by sigmoid" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1

# Expert counts past the limits (gguf_edit.py experts=N tiles the qwen3moe
# fixture's 8 experts to N).  Past RAD_LIMIT_ROUTED_EXPERTS (1024) run and
# show refuse the file when they open it, by the limit's name (before: it
# opened, and the first step failed with "router_topk ... unsupported");
# 1024 still runs.  Past RAD_LIMIT_EXPERTS (4096) convert copies each stack
# whole instead of cutting it into one record per expert.
G3="$RADIANCE_SRC/tests/models/llamacpp/qwen3moe-tiny-f32.gguf"
python3 "$RADIANCE_SRC/tests/e2e/gguf_edit.py" "$G3" "$WORK/e1024.gguf" experts=1024
python3 "$RADIANCE_SRC/tests/e2e/gguf_edit.py" "$G3" "$WORK/e1025.gguf" experts=1025
timeout 60 $R run -m "$WORK/e1024.gguf" --tokens 1,2 -n 2 --temp 0 >"$WORK/out" 2>"$WORK/err" \
    && [ -s "$WORK/out" ] && ok "a GGUF with 1024 experts runs" || not_ok "1024 experts: $(cat "$WORK/err")"
ROUTED="metadata qwen3moe.expert_count = 1025, over the limit of 1024 experts \(RAD_LIMIT_ROUTED_EXPERTS\)"
expect_fail "GGUF with 1025 experts: run refuses it at open" 4 "e1025.gguf: $ROUTED" \
    timeout 60 $R run -m "$WORK/e1025.gguf" --tokens 1,2 -n 1
$R show "$WORK/e1025.gguf" >/dev/null 2>"$WORK/err"
st=$?
[ $st = 4 ] && grep -Eq "$ROUTED" "$WORK/err" && ok "... and show says it is invalid (exit 4)" || not_ok "show 1025: exit $st, $(cat "$WORK/err")"
rm -f "$WORK"/e102*.gguf
# rad_header FILE: the tensor names and shapes of a .rad, one per line.
rad_header() {
    python3 - "$1" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb")
pre = f.read(64)
off, size = struct.unpack("<QQ", pre[16:32])
f.seek(off)
for t in json.loads(f.read(size))["tensors"]:
    print(t["name"], "x".join(map(str, t["shape"])))
PY
}
$R convert "$G3" -o "$WORK/e8.rad" >/dev/null 2>&1
rad_header "$WORK/e8.rad" | grep -q "^blk.0.ffn_up_exps.weight@3 " \
    && ok "8 experts: convert cuts each stack into one record per expert" || not_ok "8 experts: $(rad_header "$WORK/e8.rad" | head)"
python3 "$RADIANCE_SRC/tests/e2e/gguf_edit.py" "$G3" "$WORK/e4097.gguf" experts=4097
$R convert "$WORK/e4097.gguf" -o "$WORK/e4097.rad" >/dev/null 2>"$WORK/err"
st=$?
hdr=$(rad_header "$WORK/e4097.rad" 2>/dev/null)
[ $st = 0 ] && grep -q "^blk.0.ffn_up_exps.weight 4097x16x64$" <<<"$hdr" && ! grep -q "@" <<<"$hdr" \
    && ok "4097 experts (past RAD_LIMIT_EXPERTS): convert copies each stack whole, no per-expert records" \
    || not_ok "4097 experts: exit $st, $(cat "$WORK/err"), $(head -5 <<<"$hdr")"
expect_fail "... and the converted file is refused at open by RAD_LIMIT_ROUTED_EXPERTS" 4 \
    "e4097.rad: metadata qwen3moe.expert_count = 4097, over the limit of 1024 experts \(RAD_LIMIT_ROUTED_EXPERTS\)" \
    timeout 60 $R run -m "$WORK/e4097.rad" --tokens 1,2 -n 1
rm -f "$WORK"/e4097.* "$WORK/e8.rad"

finish
