#!/usr/bin/env bash
# test_bad_input.sh: every kind of broken model gets one line naming the file
# and the problem, a documented non-zero exit, no crash, and no output file.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN

# A good folder to damage, one piece at a time.
fresh() { rm -rf "$WORK/m"; cp -r "$FIXTURES/llama" "$WORK/m"; }

fresh; rm "$WORK/m/config.json"
expect_fail "missing config.json" 3 "config.json.*not found" $R convert "$WORK/m" -o "$WORK/o.rad"
[ ! -e "$WORK/o.rad" ] && ok "missing config.json leaves no output" || not_ok "output left behind"

fresh; printf '{"architectures": ["LlamaForCausalLM"],\n "hidden_size": 64,,}' >"$WORK/m/config.json"
expect_fail "malformed config.json" 4 "config.json.*line 2" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh; sed -i 's/LlamaForCausalLM/GPT2LMHeadModel/' "$WORK/m/config.json"
expect_fail "unsupported architecture" 4 "GPT2LMHeadModel.*LlamaForCausalLM" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh; sed -i 's/"hidden_size": 64/"hidden_size": "wide"/' "$WORK/m/config.json"
expect_fail "config key of the wrong type" 4 "hidden_size" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh; $CRAFT drop-tensor "$FIXTURES/llama/model.safetensors" "$WORK/m/model.safetensors" model.layers.1.mlp.up_proj.weight
expect_fail "missing tensor" 4 "model.layers.1.mlp.up_proj.weight.*missing" $R convert "$WORK/m" -o "$WORK/o.rad"
[ ! -e "$WORK/o.rad" ] && ok "missing tensor leaves no output" || not_ok "output left behind"
ls "$WORK"/o.rad.partial* >/dev/null 2>&1 && not_ok "temporary file left behind" || ok "no temporary file left"

fresh; $CRAFT reshape-tensor "$FIXTURES/llama/model.safetensors" "$WORK/m/model.safetensors" model.layers.0.mlp.down_proj.weight
expect_fail "mis-shaped tensor" 4 "down_proj.weight.*shape" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh; $CRAFT header-len "$FIXTURES/llama/model.safetensors" "$WORK/m/model.safetensors" 99999999999
expect_fail "safetensors header larger than the file" 4 "model.safetensors" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh; $CRAFT header-len "$FIXTURES/llama/model.safetensors" "$WORK/m/model.safetensors" 18446744073709551615
expect_fail "safetensors header length near 2^64" 4 "model.safetensors" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh; $CRAFT truncate "$WORK/m/model.safetensors" 300
expect_fail "truncated safetensors" 4 "model.safetensors" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh; $CRAFT truncate "$WORK/m/model.safetensors" 500000
expect_fail "safetensors with data cut short" 4 "model.safetensors" $R convert "$WORK/m" -o "$WORK/o.rad"

fresh
expect_fail "-o into a missing directory" 1 "no/such/dir" $R convert "$WORK/m" -o "$WORK/no/such/dir/o.rad"
[ ! -e "$WORK/no" ] && ok "nothing created for a missing directory" || not_ok "directory created"

expect_fail "unknown --quant" 2 "quant" $R convert "$WORK/m" -o "$WORK/o.rad" --quant q3_x

# ---- issue 12, item 3: a layer count the file holds no tensors for is
# refused at once, naming the field and the file (it used to take minutes:
# the builder listed a problem per missing tensor and de-duplicated them in
# quadratic time).  `timeout` turns the old hang into a failure.
fresh; sed -i 's/"num_hidden_layers": 3/"num_hidden_layers": 100000/' "$WORK/m/config.json"
expect_fail "config.json with 100,000 layers" 4 "m/config.json.*num_hidden_layers.* = 100000.*RAD_LIMIT_LAYERS" \
    timeout 10 $R convert "$WORK/m" -o "$WORK/o.rad"
fresh; sed -i 's/"num_hidden_layers": 3/"num_hidden_layers": 4000/' "$WORK/m/config.json"
expect_fail "config.json with 4,000 layers over a checkpoint of 3" 4 "m/config.json: num_hidden_layers = 4000.*at most 3 layers" \
    timeout 10 $R convert "$WORK/m" -o "$WORK/o.rad"

# ---- item 8: every metadata value checked before the model is built, with
# the "malformed model" code (4), at convert time and at open time.
fresh; sed -i 's/"num_hidden_layers": 3/"num_hidden_layers": 1.5/' "$WORK/m/config.json"
expect_fail "1.5 layers" 4 "config.json: key 'num_hidden_layers' = 1.5 is not a whole number" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
fresh; sed -i 's/"num_hidden_layers": 3/"num_hidden_layers": 2/' "$WORK/m/config.json"
expect_fail "config with fewer layers than the checkpoint" 4 "model.layers.2.*left out.*num_hidden_layers" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
[ ! -e "$WORK/o.rad" ] && ok "fewer layers leave no output" || not_ok "output left behind"
fresh; sed -i 's/"rope_theta": 10000.0/"rope_theta": 0.0/' "$WORK/m/config.json"
expect_fail "rope_theta 0" 4 "config.json: metadata model.rope_theta.* = 0: RoPE" $R convert "$WORK/m" -o "$WORK/o.rad"
fresh; sed -i 's/"rope_type": "default"/"rope_type": "linear", "factor": -2.0/' "$WORK/m/config.json"
expect_fail "a RoPE factor below 0" 4 "config.json: metadata rope_parameters.factor = -2" $R convert "$WORK/m" -o "$WORK/o.rad"
fresh; sed -i 's/"rms_norm_eps": 1e-05/"rms_norm_eps": 1e308/' "$WORK/m/config.json"
expect_fail "rms_norm_eps 1e308" 4 "config.json: metadata model.rms_eps.*rms_norm_eps.*RAD_LIMIT_RMS_EPS_MAX" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
fresh; python3 - "$WORK/m/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["added_tokens"].append({"id": 1500, "content": "<|far|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
json.dump(t, open(sys.argv[1], "w"))
PY
expect_fail "a tokenizer larger than the embedding" 4 "tokenizer.json: the tokenizer has 1501 tokens.*vocab_size is 1024" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
fresh; rm "$WORK/m/tokenizer.json"
$R convert "$WORK/m" -o "$WORK/notok.rad" --quant f32 >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc -eq 0 ] && grep -q "no tokenizer.json: the model will take token ids only" "$WORK/err" \
    && ok "a folder with no tokenizer converts, and says so" \
    || not_ok "no tokenizer: exit $rc, stderr: $(head -c 300 "$WORK/err")"

# The same checks at open, on a GGUF (gguf_edit.py sets one key).
GG="$RADIANCE_SRC/tests/models/llamacpp/qwen2-tiny-f32.gguf"
EDIT="python3 $RADIANCE_SRC/tests/e2e/gguf_edit.py $GG $WORK/bad.gguf"
$EDIT qwen2.block_count=u32:100000
expect_fail "GGUF with 100,000 layers" 4 "bad.gguf: metadata qwen2.block_count = 100000" timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2.block_count=u32:4000
expect_fail "GGUF with 4,000 layers over tensors for 3" 4 "bad.gguf: metadata qwen2.block_count = 4000, but the file holds tensors for 3 layers" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2.block_count=u32:1000000000
expect_fail "GGUF with a layer count no plugin can allocate" 4 "bad.gguf: metadata qwen2.block_count = 1000000000" \
    timeout 10 $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2.block_count=u32:2
expect_fail "GGUF with fewer layers than its tensors" 4 "bad.gguf: metadata qwen2.block_count = 2.*tensors for 3 layers.*ignored" \
    $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2.rope.freq_base=f32:0
expect_fail "GGUF rope.freq_base 0" 4 "bad.gguf: metadata qwen2.rope.freq_base = 0" $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2.rope.scaling.type=str:linear qwen2.rope.scaling.factor=f32:-1
expect_fail "GGUF rope factor -1" 4 "bad.gguf: metadata (qwen2.rope.scaling.factor|rope_scaling.factor) = -1" $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2.attention.layer_norm_rms_epsilon=f32:1e30
expect_fail "GGUF rms epsilon 1e30" 4 "bad.gguf: metadata qwen2.attention.layer_norm_rms_epsilon.*RAD_LIMIT_RMS_EPS_MAX" \
    $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT qwen2.context_length=u32:0
expect_fail "GGUF context_length 0" 4 "bad.gguf: metadata qwen2.context_length = 0" $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
# A size one past RAD_LIMIT_META_INT (2^30) is refused by the limit's name,
# in a GGUF at open and in a config.json at convert.
$EDIT qwen2.embedding_length=u32:1073741825
expect_fail "GGUF embedding_length past RAD_LIMIT_META_INT" 4 "bad.gguf: metadata key 'model.n_embd' = 1073741825 is over the limit of 1073741824 \(RAD_LIMIT_META_INT\)" \
    $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
fresh; sed -i 's/"hidden_size": 64/"hidden_size": 1073741825/' "$WORK/m/config.json"
expect_fail "config.json hidden_size past RAD_LIMIT_META_INT" 4 "config.json: key 'hidden_size' = 1073741825 is not a plausible size \(1 to 1073741824, RAD_LIMIT_META_INT\)" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
$EDIT qwen2.block_count=u32:4000
$R show "$WORK/bad.gguf" >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc -eq 4 ] && grep -q "bad.gguf: metadata qwen2.block_count = 4000" "$WORK/err" \
    && ok "show says a file run refuses is invalid (exit 4)" || not_ok "show on an invalid file: exit $rc, $(head -c 300 "$WORK/err")"

# A tokenizer with more tokens than the embedding has rows is refused when the
# model is opened, by run and by show (ids past the rows cannot be run), not
# at the first step that meets such an id ("outside the vocabulary").
$EDIT 'tokenizer.ggml.tokens[1100]=str:extra' 'tokenizer.ggml.token_type[1100]=i32:1'
VOCAB="bad.gguf: the tokenizer has 1101 tokens, but the model's embedding has 1100 rows"
expect_fail "GGUF tokenizer larger than its embedding: run" 4 "$VOCAB" $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
expect_show_refuses "GGUF tokenizer larger than its embedding: show" 4 "$VOCAB" "$WORK/bad.gguf" "^tokenizer .*1101 tokens"

# ---- item 9: a long string is refused where it is read, by the limit's name.
$EDIT tokenizer.chat_template=repeat:1100000:x
expect_fail "GGUF chat template over 1 MiB" 4 "bad.gguf: key 'tokenizer.chat_template'.*RAD_LIMIT_CHAT_TEMPLATE_BYTES" \
    $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
$EDIT general.description=repeat:1100000:x
expect_fail "GGUF metadata string over 1 MiB" 4 "bad.gguf: key 'general.description'.*RAD_LIMIT_META_STRING_BYTES" \
    $R run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
fresh; python3 - "$WORK/m/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["description"] = "x" * 1100000
json.dump(c, open(sys.argv[1], "w"))
PY
expect_fail "config.json string over 1 MiB" 4 "config.json.*description.*RAD_LIMIT_META_STRING_BYTES" \
    $R convert "$WORK/m" -o "$WORK/o.rad"
fresh; python3 -c "import sys; open(sys.argv[1], 'w').write('x' * 1100000)" "$WORK/m/chat_template.jinja"
expect_fail "chat_template.jinja over 1 MiB" 4 "chat_template.jinja: 1100000 bytes.*RAD_LIMIT_CHAT_TEMPLATE_BYTES" \
    $R convert "$WORK/m" -o "$WORK/o.rad"

# A good container, then damaged copies of it.
$R convert "$FIXTURES/llama" -o "$WORK/good.rad" --quant f32 2>/dev/null || not_ok "convert the good fixture"
IDS=1,2,3

cp "$WORK/good.rad" "$WORK/bad.rad"; $CRAFT rad-magic "$WORK/bad.rad"
expect_fail ".rad with a bad magic" 4 "bad.rad.*magic" $R run -m "$WORK/bad.rad" --tokens $IDS -n 1

cp "$WORK/good.rad" "$WORK/bad.rad"; $CRAFT rad-version "$WORK/bad.rad" 7
expect_fail ".rad of an unknown version" 4 "bad.rad.*version 7" $R run -m "$WORK/bad.rad" --tokens $IDS -n 1

size=$(stat -c %s "$WORK/good.rad")
for cut in 10 100 5000 $((size / 2)) $((size - 1)); do
    cp "$WORK/good.rad" "$WORK/bad.rad"; $CRAFT truncate "$WORK/bad.rad" $cut
    expect_fail ".rad truncated to $cut bytes" 4 "bad.rad" $R run -m "$WORK/bad.rad" --tokens $IDS -n 1
done

cp "$WORK/good.rad" "$WORK/bad.rad"; $CRAFT rad-offset "$WORK/bad.rad"
expect_fail ".rad tensor offset past the end" 4 "bad.rad.*token_embd.weight" $R run -m "$WORK/bad.rad" --tokens $IDS -n 1

expect_fail "model file that does not exist" 3 "nope.rad" $R run -m "$WORK/nope.rad" --tokens $IDS
expect_fail "token id outside the vocabulary" 5 "token id 5000" $R run -m "$WORK/good.rad" --tokens 1,5000 -n 1
expect_fail "prompt longer than the context" 5 "context" $R run -m "$WORK/good.rad" --tokens 1,2,3,4,5,6,7,8,9 --ctx 8 -n 1
expect_fail "malformed --tokens" 2 "tokens" $R run -m "$WORK/good.rad" --tokens 1,x,3
expect_fail "bad sampler flag" 2 "top-p" $R run -m "$WORK/good.rad" --tokens $IDS --top-p 1.5
expect_fail "unknown --kernels library" 3 "kernels.*nosuch" $R run -m "$WORK/good.rad" --tokens $IDS --kernels nosuch

finish
