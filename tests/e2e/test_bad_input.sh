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
