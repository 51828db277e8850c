#!/usr/bin/env python3
"""Generate the golden-logit fixtures under tests/golden/fixtures/.

This script is run BY HAND, never by CI.  CI only consumes the files it
writes (they are committed).  Regenerate with:

    /work/venv/bin/python tests/golden/make_fixtures.py

(any Python with torch, transformers and safetensors works; run it from the
repository root or from anywhere, paths are relative to this file).
Optional arguments: case names to regenerate only those, e.g.
    /work/venv/bin/python tests/golden/make_fixtures.py llama qwen3

For every case a tiny, randomly initialised Hugging Face model is built (no
download), its weights are re-initialised so that the logits have a real
spread, and the folder tests/golden/fixtures/<case>/ receives:

  config.json, model.safetensors (or model-0000i-of-0000n.safetensors +
      model.safetensors.index.json), generation_config.json
                  exactly as HF save_pretrained writes them (float32 weights)
  tokens.txt      one line, comma-separated ids of the 96-token teacher-forced
                  sequence (fixed seed, ids in [0, vocab), first id 1)
  logits.f32      raw little-endian float32, row-major [96, vocab]: HF's logits
                  at every position of tokens.txt (float32, CPU, eager attention)
  greedy.txt      one line, comma-separated ids of the 16 new tokens of HF greedy
                  generation (do_sample=False) from the first 8 tokens
  meta.json       case, architecture, vocab, n_tokens, top2_min_gap,
                  logit_range, greedy_top2_min_gap, seed, transformers_version,
                  torch_version

The seed of a case is retried (seed, seed+1, ...) until the smallest gap
between the top-1 and top-2 logit is >= MIN_GAP at every teacher-forced
position and at every greedy step, every mixture-of-experts router's k-th
chosen expert beats the best expert left out by >= ROUTE_GAP in logit at
every token of every layer (so no routing tie can flip a choice), greedy generation yields 16 tokens
without hitting EOS, and those contain at least 8 distinct ids (random tiny
models otherwise tend to repeat one token forever, which tests little), so
that an f32 reimplementation can match every argmax.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import (
    AutoModelForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    Glm4MoeConfig,
    Glm4MoeForCausalLM,
    GptOssConfig,
    GptOssForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    OlmoeConfig,
    OlmoeForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")

N_TOKENS = 96
PROMPT_LEN = 8
N_NEW = 16
MIN_GAP = 1e-3
MAX_DIR_BYTES = 2 * 1024 * 1024
MAX_TRIES = 50

MIN_DISTINCT_GREEDY = 8  # reject degenerate "same token forever" greedy runs
ROUTE_GAP = 2e-3         # a chosen expert's least margin over the best one left out (logits)

# Weight init (after HF's own init), std = gain / sqrt(fan_in):
#   q/k/v/gate/up projections: IN_GAIN; o/down projections: OUT_GAIN, large
#   enough that the layers dominate the residual stream (otherwise tied-
#   embedding models just repeat the last token under greedy decoding);
#   embed_tokens and lm_head (tied or not): HEAD_GAIN / sqrt(hidden), which
#   puts the logit standard deviation at about 2;
#   biases ~ N(0, 0.1); every norm weight (q_norm/k_norm too) ~ 1 + N(0, 0.1);
#   MoE routers: ROUTER_GAIN / sqrt(hidden), which spreads the router logits
#   (std about ROUTER_GAIN) so choices win by real margins; experts as the
#   dense projections (their fan-in is the last dim of the stacked tensors).
IN_GAIN = 1.5
ROUTER_GAIN = 4.0
OUT_GAIN = 2.0
HEAD_GAIN = 2.0
BIAS_STD = 0.1
NORM_STD = 0.1
POST_NORM_CENTER = 4.0   # gemma3's post-attention/post-feed-forward norms: scale 5 + N(0, 0.1)

COMMON = dict(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=160,
    num_hidden_layers=3,
    max_position_embeddings=512,
)

CASES = {
    "llama": dict(
        seed=1001,
        cls=(LlamaConfig, LlamaForCausalLM),
        config=dict(
            COMMON,
            vocab_size=1024,
            rope_theta=10000.0,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
        ),
    ),
    "llama3_scaled": dict(
        seed=2001,
        cls=(LlamaConfig, LlamaForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=4,
            vocab_size=1024,
            rms_norm_eps=1e-5,
            tie_word_embeddings=True,
            rope_theta=500000.0,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        ),
        max_shard_size="300KB",
    ),
    "qwen2": dict(
        seed=3001,
        cls=(Qwen2Config, Qwen2ForCausalLM),
        config=dict(
            COMMON,
            vocab_size=1100,
            tie_word_embeddings=True,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
        ),
    ),
    "qwen3": dict(
        seed=4001,
        cls=(Qwen3Config, Qwen3ForCausalLM),
        config=dict(
            COMMON,
            head_dim=32,
            vocab_size=1024,
            tie_word_embeddings=True,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
        ),
    ),
    # Qwen3 with use_sliding_window: the layers from max_window_layers on
    # (here 1 and 2) attend through a window of 16, layer 0 to everything, as
    # transformers derives layer_types from the two keys.
    "qwen3_window": dict(
        seed=4101,
        cls=(Qwen3Config, Qwen3ForCausalLM),
        config=dict(
            COMMON,
            head_dim=32,
            vocab_size=1024,
            tie_word_embeddings=True,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            use_sliding_window=True,
            sliding_window=16,
            max_window_layers=1,
        ),
    ),
    # Qwen3 with YaRN RoPE scaling (factor 4 over an original context of 32),
    # as Qwen3's long-context configs write it: the 96 positions reach past
    # the original context, where the interpolated frequencies matter.
    "qwen3_yarn": dict(
        seed=4201,
        cls=(Qwen3Config, Qwen3ForCausalLM),
        config=dict(
            COMMON,
            head_dim=32,
            vocab_size=1024,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
            max_position_embeddings=128,
            rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                             "original_max_position_embeddings": 32},
        ),
    ),
    "mistral": dict(
        seed=5001,
        cls=(MistralConfig, MistralForCausalLM),
        config=dict(
            COMMON,
            num_key_value_heads=1,
            intermediate_size=128,
            vocab_size=1000,
            tie_word_embeddings=False,
            sliding_window=None,
            rope_theta=10000.0,
        ),
    ),
    # A window much shorter than the sequence: positions past 20 see only the
    # last 20 keys, so the engine's WINDOW KV group (and its block recycling)
    # is checked against HF's sliding-window mask.
    "mistral_window": dict(
        seed=6001,
        cls=(MistralConfig, MistralForCausalLM),
        config=dict(
            COMMON,
            num_key_value_heads=1,
            intermediate_size=128,
            vocab_size=1000,
            tie_word_embeddings=False,
            sliding_window=20,
            rope_theta=10000.0,
        ),
    ),
    # Gemma 3: (1 + w) norms with post-attention and post-feed-forward norms,
    # GeGLU, embeddings scaled by sqrt(hidden), q/k norms, a score scale from
    # query_pre_attn_scalar (48, not head_dim 32), five sliding-window layers
    # (window 16, RoPE theta 1e4) and one global layer (theta 1e6 with linear
    # scaling x8, as the 4B+ models have), final logit soft-capping at 30.
    # Norm weights are centred on 0 (HF's Gemma init), a scale of
    # 1 + N(0, 0.1), except the post-attention and post-feed-forward norms,
    # centred on POST_NORM_CENTER: the embedding enters the residual stream
    # scaled by sqrt(hidden) and, with the tied lm_head, a model whose layers
    # add less than it does just repeats its last token.
    "gemma3": dict(
        seed=7001,
        cls=(Gemma3TextConfig, Gemma3ForCausalLM),
        norm_center=0.0,
        post_norm_center=POST_NORM_CENTER,
        config=dict(
            COMMON,
            num_hidden_layers=6,
            head_dim=32,
            intermediate_size=128,
            vocab_size=1000,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            query_pre_attn_scalar=48,
            sliding_window=16,
            layer_types=["sliding_attention"] * 5 + ["full_attention"],
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            },
            final_logit_softcapping=30.0,
            hidden_activation="gelu_pytorch_tanh",
        ),
    ),
    # The mixture-of-experts cases are smaller (2 layers, vocabulary ~500,
    # experts of 16) to keep each fixture under a megabyte.
    # Qwen3-MoE: 8 experts, 2 per token, renormalised (norm_topk_prob);
    # layer 1 is dense (mlp_only_layers), with the dense intermediate_size.
    "qwen3moe": dict(
        seed=8001,
        cls=(Qwen3MoeConfig, Qwen3MoeForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=2,
            head_dim=32,
            vocab_size=512,
            tie_word_embeddings=True,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[1],
        ),
    ),
    # Qwen3-MoE with experts on every layer: the form llama.cpp's qwen3moe
    # runs (it has no dense layers), so that llama.cpp's converter takes it
    # (tests/models/llamacpp/make_tiny_ggufs.py); otherwise as qwen3moe.
    "qwen3moe_all_sparse": dict(
        seed=8051,
        cls=(Qwen3MoeConfig, Qwen3MoeForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=2,
            head_dim=32,
            vocab_size=512,
            tie_word_embeddings=True,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[],
        ),
    ),
    # Qwen3-MoE without the renormalisation, 3 of 8 experts, and
    # decoder_sparse_step 2: only layer 1 routes, layer 0 is dense.
    "qwen3moe_sparse_step": dict(
        seed=8101,
        cls=(Qwen3MoeConfig, Qwen3MoeForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=2,
            vocab_size=512,
            tie_word_embeddings=False,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            num_experts=8,
            num_experts_per_tok=3,
            moe_intermediate_size=16,
            norm_topk_prob=False,
            decoder_sparse_step=2,
        ),
    ),
    # Qwen2-MoE: Qwen2's q/k/v biases, 8 experts, 3 per token, without the
    # renormalisation (its default), and on every layer a shared expert of
    # 32 whose output is scaled by sigmoid(shared_expert_gate(h)).  Its
    # vocabulary is 1024, the borrowed tokenizer's, so llama.cpp's converter
    # takes it (tests/models/llamacpp/make_tiny_ggufs.py), and lm_head is
    # its own, as in the released models (llama.cpp's qwen2moe requires an
    # output.weight: it does not fall back to the embedding).
    "qwen2moe": dict(
        seed=8601,
        cls=(Qwen2MoeConfig, Qwen2MoeForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=2,
            vocab_size=1024,
            tie_word_embeddings=False,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            num_experts=8,
            num_experts_per_tok=3,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=32,
            norm_topk_prob=False,
            decoder_sparse_step=1,
            qkv_bias=True,
        ),
    ),
    # OLMoE: q/k RMSNorm over the whole projection, clip_qkv (tight enough
    # that some q, k and v values are clipped), 8 experts, 2 per token, no
    # renormalisation.
    "olmoe": dict(
        seed=8201,
        cls=(OlmoeConfig, OlmoeForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=2,
            intermediate_size=16,
            vocab_size=512,
            tie_word_embeddings=False,
            rope_theta=10000.0,
            rms_norm_eps=1e-5,
            num_experts=8,
            num_experts_per_tok=2,
            clip_qkv=2.0,
            pad_token_id=None,
            eos_token_id=None,
        ),
    ),
    # OLMoE in OLMoE-1B-7B's own form: as many KV heads as query heads and
    # no clip_qkv.  llama.cpp's olmoe assumes both (its k norm has n_embd
    # weights, its converter writes no clamp), so this is the checkpoint its
    # converter takes (tests/models/llamacpp/make_tiny_ggufs.py).
    "olmoe_mha": dict(
        seed=8251,
        cls=(OlmoeConfig, OlmoeForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=2,
            num_key_value_heads=4,
            intermediate_size=16,
            vocab_size=512,
            tie_word_embeddings=False,
            rope_theta=10000.0,
            rms_norm_eps=1e-5,
            num_experts=8,
            num_experts_per_tok=2,
            clip_qkv=None,
            pad_token_id=None,
            eos_token_id=None,
        ),
    ),
    # Mixtral: experts block_sparse_moe.experts.N.w1/w2/w3 on disk, always
    # renormalised, with a sliding window shorter than the sequence.
    "mixtral": dict(
        seed=8301,
        cls=(MixtralConfig, MixtralForCausalLM),
        config=dict(
            COMMON,
            num_hidden_layers=2,
            num_key_value_heads=1,
            intermediate_size=16,
            vocab_size=500,
            tie_word_embeddings=False,
            rope_theta=1e6,
            sliding_window=24,
            num_local_experts=8,
            num_experts_per_tok=2,
        ),
    ),
    # gpt-oss: attention sinks, q/k/v/o biases, layers alternating between a
    # sliding window of 16 and full attention, YaRN (factor 4 over an
    # original 32 positions, truncate false, as gpt-oss sets it), a router
    # with a bias (top 2 of 8 logits, then a softmax over the two), experts
    # with biases stored as gate_up_proj [E, hidden, 2 n_ff] (gate and up
    # interleaved) and down_proj [E, n_ff, hidden], and the clamped SwiGLU
    # with a limit of 2 so that the clamps take effect on these weights.
    # head_dim 32 differs from hidden / heads; n_ff 32 is one MXFP4 block.
    "gpt_oss": dict(
        seed=8401,
        cls=(GptOssConfig, GptOssForCausalLM),
        transposed_experts=True,
        config=dict(
            COMMON,
            num_hidden_layers=2,
            head_dim=32,
            intermediate_size=32,
            vocab_size=512,
            tie_word_embeddings=False,
            rms_norm_eps=1e-5,
            max_position_embeddings=128,
            sliding_window=16,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0,
                             "original_max_position_embeddings": 32, "beta_fast": 32.0,
                             "beta_slow": 1.0, "truncate": False},
            num_local_experts=8,
            num_experts_per_tok=2,
            swiglu_limit=2.0,
            pad_token_id=None,
            eos_token_id=None,
        ),
    ),
    # The same gpt-oss in the released checkpoints' form: every expert matrix
    # MXFP4 (experts.gate_up_proj_blocks + _scales, down_proj_blocks +
    # _scales: u8, HF's nibble order, quantized by ggml's rule) and a
    # quantization_config naming mxfp4.  The logits are HF's from the
    # dequantized experts, and the reload check loads the folder through
    # transformers' own MXFP4 reader (Mxfp4Config(dequantize=True)).
    "gpt_oss_mxfp4": dict(
        seed=8501,
        cls=(GptOssConfig, GptOssForCausalLM),
        transposed_experts=True,
        mxfp4_experts=True,
        config=None,   # gpt_oss's, filled in below
    ),
}
CASES["gpt_oss_mxfp4"]["config"] = CASES["gpt_oss"]["config"]

# GLM-4.5 (Glm4MoeForCausalLM): q/k/v biases with per-head q/k norms,
# partial rotary (the first half of each 32-dim head turns, rotate_half
# layout), layer 0 dense (first_k_dense_replace), layers 1 and 2 routed:
# sigmoid scores plus a per-expert correction bias choose 2 of 8 experts
# within the best 2 of 4 groups, the chosen sigmoids renormalised and
# scaled by 2.5 (routed_scaling_factor), plus an ungated shared expert of
# 2 x 16.  The checkpoint also carries one MTP (next-token prediction)
# layer, model.layers.3.*, as GLM-4.5's releases do: not part of the main
# forward (transformers ignores it; radiance skips it at load).  Vocabulary
# 1024 (the borrowed tokenizer's, for llama.cpp's converter), lm_head untied.
CASES["glm4moe"] = dict(
    seed=8801,
    cls=(Glm4MoeConfig, Glm4MoeForCausalLM),
    mtp_layers=1,
    config=dict(
        COMMON,
        head_dim=32,
        vocab_size=1024,
        tie_word_embeddings=False,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        attention_bias=True,
        use_qk_norm=True,
        n_routed_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        n_shared_experts=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        norm_topk_prob=True,
        routed_scaling_factor=2.5,
        num_nextn_predict_layers=1,
        pad_token_id=None,
        eos_token_id=None,
    ),
)
# GLM-4.5-Air's form: no q/k norms (use_qk_norm false), one expert group
# (no group limit), and here also the chosen sigmoids not renormalised and
# no routed scaling, 3 of 8 experts, one shared expert of 16; 2 layers
# (layer 0 dense), no MTP layer, vocabulary 512.  Its GGUF is the one whose
# q/k norms are absent, which radiance reads from the tensors as llama.cpp does.
CASES["glm4moe_air"] = dict(
    seed=8901,
    cls=(Glm4MoeConfig, Glm4MoeForCausalLM),
    config=dict(
        COMMON,
        num_hidden_layers=2,
        head_dim=32,
        vocab_size=512,
        tie_word_embeddings=False,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5},
        attention_bias=True,
        use_qk_norm=False,
        n_routed_experts=8,
        num_experts_per_tok=3,
        moe_intermediate_size=16,
        n_shared_experts=1,
        n_group=1,
        topk_group=1,
        first_k_dense_replace=1,
        norm_topk_prob=False,
        routed_scaling_factor=1.0,
        num_nextn_predict_layers=0,
        pad_token_id=None,
        eos_token_id=None,
    ),
)
SCORE_BIAS_STD = 0.1     # GLM-4.5's e_score_correction_bias ~ N(0, 0.1), against sigmoid scores

SINK_STD = 1.0           # gpt-oss's attention sinks, logits ~ N(0, 1)


def reinit(model, config, norm_center=1.0, post_norm_center=None, transposed_experts=False):
    """Re-initialise every parameter (deterministic given the torch seed)."""
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith((".bias", "_proj_bias")):   # gpt-oss's experts: gate_up_proj_bias, down_proj_bias
                p.normal_(0.0, BIAS_STD)
            elif name.endswith("self_attn.sinks"):
                p.normal_(0.0, SINK_STD)
            elif transposed_experts and name.endswith(("experts.gate_up_proj", "experts.down_proj")):
                # gpt-oss keeps experts as [n_expert, in, out]: fan_in is dim 1
                gain = IN_GAIN if name.endswith("gate_up_proj") else OUT_GAIN
                p.normal_(0.0, gain / p.shape[1] ** 0.5)
            elif name.endswith(".router.weight"):   # gpt-oss's router [n_expert, hidden]
                p.normal_(0.0, ROUTER_GAIN / p.shape[1] ** 0.5)
            elif post_norm_center is not None and (
                    "post_attention_layernorm" in name or "post_feedforward_layernorm" in name):
                p.normal_(0.0, NORM_STD).add_(post_norm_center)   # Gemma's norms after a sublayer
            elif "norm" in name:  # input/post_attention/final norm, q_norm, k_norm
                p.normal_(0.0, NORM_STD).add_(norm_center)
            elif name.endswith("embed_tokens.weight") or name.endswith("lm_head.weight"):
                # Embedding rows feed an RMSNorm, lm_head (or the tied
                # embedding) sets the logit scale: std = HEAD_GAIN/sqrt(hidden).
                p.normal_(0.0, HEAD_GAIN / config.hidden_size ** 0.5)
            elif name.endswith(".shared_expert_gate.weight"):   # Qwen2-MoE's [1, hidden] gate
                p.normal_(0.0, IN_GAIN / p.shape[1] ** 0.5)      # logits ~ N(0, 1.5): sigmoids 0.1..0.9
            elif name.endswith(".gate.weight"):   # a MoE router [n_expert, hidden]
                p.normal_(0.0, ROUTER_GAIN / p.shape[1] ** 0.5)
            elif name.endswith("experts.down_proj"):   # [n_expert, hidden, n_ff]
                p.normal_(0.0, OUT_GAIN / p.shape[-1] ** 0.5)
            elif name.endswith("experts.gate_up_proj"):   # [n_expert, 2 n_ff, hidden]
                p.normal_(0.0, IN_GAIN / p.shape[-1] ** 0.5)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                p.normal_(0.0, OUT_GAIN / p.shape[1] ** 0.5)  # fan_in = in_features
            elif name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight",
                                "gate_proj.weight", "up_proj.weight")):
                p.normal_(0.0, IN_GAIN / p.shape[1] ** 0.5)
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
        for name, buf in sorted(model.named_buffers()):
            if name.endswith("e_score_correction_bias"):   # a buffer, not a parameter
                buf.normal_(0.0, SCORE_BIAS_STD)


FP4_VALUES = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def mxfp4_quantize(w):
    """w [..., rows, cols] (cols a multiple of 32) as Hugging Face's MXFP4
    tensors: blocks u8 [..., rows, cols/32, 16] (element 2i in the low
    nibble of byte i, 2i+1 in the high one) and scales u8 [..., rows,
    cols/32] (E8M0, 2^(s-127)).  The scale and code choice are ggml's
    (quantize_row_mxfp4_ref): s = floor(log2(amax)) - 2 + 127, then the
    nearest of the 16 values, the lower code on a tie."""
    w = w.detach().float().numpy()
    *pre, rows, cols = w.shape
    b = w.reshape(*pre, rows, cols // 32, 32)
    amax = np.abs(b).max(-1)
    e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2 + 127, 0)
    e = np.clip(e, 0, 254).astype(np.int32)
    step = np.ldexp(np.float32(1), e - 127).astype(np.float32)
    err = np.abs(FP4_VALUES * step[..., None, None] - b[..., None])
    codes = err.argmin(-1).astype(np.uint8)          # argmin: the first (lower) code on a tie
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return (torch.from_numpy(np.ascontiguousarray(blocks)),
            torch.from_numpy(np.ascontiguousarray(e.astype(np.uint8))))


def mxfp4_experts(model):
    """Quantize every gpt-oss expert matrix to MXFP4 and put back the values
    transformers' own dequantizer gives for it; returns the packed tensors
    by checkpoint name."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    packed = {}
    for name, p in model.named_parameters():
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            blocks, scales = mxfp4_quantize(p.transpose(1, 2))   # stored [E, out, in]
            with torch.no_grad():
                p.copy_(convert_moe_packed_tensors(blocks, scales, dtype=torch.float32))
            packed[name + "_blocks"] = blocks
            packed[name + "_scales"] = scales
    return packed


def add_mtp_layers(d, config, n, seed):
    """Append n MTP (multi-token prediction, "nextn") layers to the saved
    checkpoint as GLM-4.5's releases carry them: model.layers.L.* for L from
    num_hidden_layers on, a whole MoE decoder layer (random, shaped as the
    last layer) plus eh_proj [hidden, 2 hidden], enorm, hnorm and
    shared_head.norm.  They are not part of the main forward: transformers
    does not build them, an engine must skip them."""
    from safetensors.torch import load_file, save_file
    path = os.path.join(d, "model.safetensors")
    tensors = load_file(path)
    last = config.num_hidden_layers - 1
    g = torch.Generator().manual_seed(seed)
    h = config.hidden_size
    for i in range(n):
        L = config.num_hidden_layers + i
        src = f"model.layers.{last}."
        for k in sorted(tensors):
            if k.startswith(src):
                t = tensors[k]
                tensors[f"model.layers.{L}." + k[len(src):]] = torch.randn(t.shape, generator=g) * t.std()
        tensors[f"model.layers.{L}.eh_proj.weight"] = torch.randn(h, 2 * h, generator=g) / (2 * h) ** 0.5
        for norm in ("enorm", "hnorm", "shared_head.norm"):
            tensors[f"model.layers.{L}.{norm}.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
    save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata={"format": "pt"})


def top2_gaps(logits):
    top2 = torch.topk(logits, 2, dim=-1).values
    return top2[..., 0] - top2[..., 1]


def build(case, spec, seed):
    cfg_cls, model_cls = spec["cls"]
    config = cfg_cls(**spec["config"])
    torch.manual_seed(seed)
    model = model_cls._from_config(config, attn_implementation="eager")
    model.to(torch.float32)
    reinit(model, config, spec.get("norm_center", 1.0), spec.get("post_norm_center"),
           spec.get("transposed_experts", False))
    model.packed = mxfp4_experts(model) if spec.get("mxfp4_experts") else None
    model.eval()
    return model


class RouteMargins:
    """Records, over every forward pass, the least margin by which a MoE
    router's k-th choice beat the best expert it left out."""

    def __init__(self, model):
        self.least = float("inf")
        self.hooks = []
        k = getattr(model.config, "num_experts_per_tok", 0)
        for name, mod in model.named_modules():
            if type(mod).__name__.endswith("TopKRouter"):
                self.hooks.append(mod.register_forward_hook(self.hook(k)))
            elif type(mod).__name__ == "Glm4MoeTopkRouter":
                self.hooks.append(mod.register_forward_hook(self.grouped_hook(mod)))

    def hook(self, k):
        def record(mod, args, out):
            logits = out[0] if isinstance(out, tuple) else out
            top = torch.topk(logits.float(), k + 1, dim=-1).values
            self.least = min(self.least, (top[..., k - 1] - top[..., k]).min().item())
        return record

    def grouped_hook(self, mod):
        """Sigmoid scores plus the correction bias, group-limited (GLM-4.5,
        DeepSeek-V3): the least margin of the topk_group-th group over the
        best group left out, and of the k-th expert over the best eligible
        one left out, both in choice scores."""
        def record(m, args, out):
            logits = out[0].double()
            choice = logits.sigmoid() + m.e_score_correction_bias.double()
            n_group, per = m.num_group, m.num_experts // m.num_group
            groups = choice.view(-1, n_group, per).topk(2, dim=-1).values.sum(-1)
            least = float("inf")
            if m.topk_group < n_group:
                top = torch.topk(groups, m.topk_group + 1, dim=-1).values
                least = (top[..., m.topk_group - 1] - top[..., m.topk_group]).min().item()
            idx = torch.topk(groups, m.topk_group, dim=-1).indices
            mask = torch.zeros_like(groups).scatter_(1, idx, 1).bool()
            mask = mask.unsqueeze(-1).expand(-1, n_group, per).reshape(-1, m.num_experts)
            eligible = choice.masked_fill(~mask, float("-inf"))
            top = torch.topk(eligible, m.top_k + 1, dim=-1).values
            least = min(least, (top[..., m.top_k - 1] - top[..., m.top_k]).min().item())
            self.least = min(self.least, least)
        return record

    def close(self):
        for h in self.hooks:
            h.remove()


def try_seed(case, spec, seed):
    model = build(case, spec, seed)
    routes = RouteMargins(model)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (N_TOKENS,), generator=g)
    tokens[0] = 1
    with torch.no_grad():
        logits = model(tokens[None]).logits[0].float()  # [N, vocab]
    gap = top2_gaps(logits).min().item()

    prompt = tokens[None, :PROMPT_LEN]
    with torch.no_grad():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=N_NEW,
            pad_token_id=model.config.eos_token_id,
        )
    new = out[0, PROMPT_LEN:]
    # Gaps along the greedy path (full recompute, no KV cache).
    with torch.no_grad():
        glog = model(out[:, : PROMPT_LEN + N_NEW - 1]).logits[0, PROMPT_LEN - 1 :]
    ggap = top2_gaps(glog).min().item()
    greedy_consistent = bool((glog.argmax(-1) == new).all()) if len(new) == N_NEW else False
    routes.close()
    model.route_gap = routes.least if routes.hooks else None
    ok = (
        (model.route_gap is None or model.route_gap >= ROUTE_GAP)
        and gap >= MIN_GAP
        and ggap >= MIN_GAP
        and len(new) == N_NEW
        and greedy_consistent
        and len(set(new.tolist())) >= MIN_DISTINCT_GREEDY
    )
    return ok, model, tokens, logits, new, gap, ggap


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def make(case, spec):
    for k in range(MAX_TRIES):
        seed = spec["seed"] + k
        ok, model, tokens, logits, new, gap, ggap = try_seed(case, spec, seed)
        rg = "" if model.route_gap is None else f"route_gap={model.route_gap:.3g} "
        print(f"[{case}] seed {seed}: top2_min_gap={gap:.3g} greedy_gap={ggap:.3g} {rg}"
              f"logit std={logits.std().item():.3f} n_new={len(new)} "
              f"distinct={len(set(new.tolist()))} -> {'ok' if ok else 'retry'}")
        if ok:
            break
    else:
        raise SystemExit(f"[{case}] no seed in {MAX_TRIES} tries satisfies the gap constraint")

    d = os.path.join(OUT, case)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    save_kw = {}
    if "max_shard_size" in spec:
        save_kw["max_shard_size"] = spec["max_shard_size"]
    model.save_pretrained(d, **save_kw)
    if spec.get("mtp_layers"):
        add_mtp_layers(d, model.config, spec["mtp_layers"], seed)
    if model.packed:
        # the experts as MXFP4 tensors, in place of the float ones
        from safetensors.torch import load_file, save_file
        path = os.path.join(d, "model.safetensors")
        tensors = {k: v for k, v in load_file(path).items()
                   if not k.endswith(("experts.gate_up_proj", "experts.down_proj"))}
        tensors.update(model.packed)
        save_file(tensors, path, metadata={"format": "pt"})
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        cfg["quantization_config"] = {
            "quant_method": "mxfp4",
            "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                       "model.embed_tokens", "lm_head"]}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")

    with open(os.path.join(d, "tokens.txt"), "w") as f:
        f.write(",".join(str(int(t)) for t in tokens) + "\n")
    logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
    with open(os.path.join(d, "greedy.txt"), "w") as f:
        f.write(",".join(str(int(t)) for t in new) + "\n")
    meta = {
        "case": case,
        "architecture": type(model).__name__,
        "vocab": model.config.vocab_size,
        "n_tokens": N_TOKENS,
        "top2_min_gap": gap,
        "logit_range": (logits.max() - logits.min()).item(),
        "greedy_top2_min_gap": ggap,
        "route_min_gap": model.route_gap,
        "seed": seed,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")

    # Checks: sharding, size, and that the saved checkpoint reproduces the logits.
    files = sorted(os.listdir(d))
    if "max_shard_size" in spec:
        shards = [f for f in files if f.startswith("model-") and f.endswith(".safetensors")]
        assert len(shards) >= 2 and "model.safetensors.index.json" in files, files
    size = dir_bytes(d)
    assert size < MAX_DIR_BYTES, f"{case}: {size} bytes >= {MAX_DIR_BYTES}"
    extra = {}
    if model.packed:   # through transformers' own MXFP4 reader
        extra["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    reloaded = AutoModelForCausalLM.from_pretrained(
        d, attn_implementation="eager", dtype=torch.float32, **extra
    ).eval()
    with torch.no_grad():
        rl = reloaded(tokens[None]).logits[0].float()
    saved = torch.from_numpy(np.fromfile(os.path.join(d, "logits.f32"), dtype="<f4"))
    saved = saved.reshape(N_TOKENS, -1)
    err = (rl - saved).abs().max().item()
    assert err <= 1e-6, f"{case}: reloaded logits differ by {err}"
    print(f"[{case}] wrote {d} ({size} bytes): {files}; reload max err {err:g}")


def main(argv):
    torch.set_num_threads(1)  # reproducible reduction order
    transformers.utils.logging.disable_progress_bar()
    names = argv or list(CASES)
    for name in names:
        if name not in CASES:
            raise SystemExit(f"unknown case {name}; known: {', '.join(CASES)}")
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        make(name, CASES[name])


if __name__ == "__main__":
    main(sys.argv[1:])
