#!/usr/bin/env bash
# test_gguf.sh: GGUF as a first-class model file.  A GGUF is recognised by
# its bytes, not its name (a Hugging Face cache blob, a copy without .gguf,
# an ollama blob, a symlink); a GGUF repository on the hub is pulled and run
# in place, split files included, with no conversion and no second copy; the
# QUANT of a spec picks the file as docs/HUB.md says; the model spellings
# people bring from ollama and llama.cpp are understood.  Also here: the
# tokenizer cache that makes a GGUF open fast, the loading line on a
# terminal, and the Q4_K_M recipe that pull makes from safetensors.
# Everything runs against tests/e2e/hub_server.py on 127.0.0.1.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN
G="$RADIANCE_SRC/tests/models/llamacpp"
SRV="$WORK/srv"
mkdir -p "$SRV"
LOG="$SRV/log"
CTL="$SRV/control"
: >"$LOG"
: >"$CTL"
python3 "$RADIANCE_SRC/tests/e2e/hub_server.py" --fixtures "$FIXTURES" --dir "$SRV" --log "$LOG" \
    --control "$CTL" --lifetime 300 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$SRV/ports" ] && break; sleep 0.1; done
[ -s "$SRV/ports" ] || { not_ok "the fake hub did not start"; finish; exit 1; }
read -r HUB CDN <"$SRV/ports"
commit_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$SRV/commits.json" "$1"; }
mark() { wc -l <"$LOG"; }
requests_since() { tail -n +"$(($1 + 1))" "$LOG" | wc -l; }

unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_TOKEN_PATH HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HUB_OFFLINE \
    http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy RADIANCE_MODEL
export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
export HF_ENDPOINT="http://127.0.0.1:$HUB"
export HOME="$WORK/home" XDG_DATA_HOME="$WORK/data" XDG_CONFIG_HOME="$WORK/config" \
    XDG_CACHE_HOME="$WORK/cache" HF_HOME="$WORK/hf"
export RADIANCE_ALIASES="$WORK/models.tsv"
printf 'tiny-gguf\ttest/qwen2-gguf\tmain\tQ8_0\ttest weights\n' >"$RADIANCE_ALIASES"
printf 'tiny-split\ttest/qwen2-gguf\tmain\tqwen2-tiny-F32-00001-of-00002.gguf\ttest weights\n' >>"$RADIANCE_ALIASES"
mkdir -p "$HOME"
RD="$HF_HOME/hub/models--test--qwen2-gguf"
Q8="$G/qwen2-tiny-q8_0.gguf"
F32="$G/qwen2-tiny-f32.gguf"
Q8_SIZE=$(stat -c %s "$Q8")
Q8_SHA=$(sha256sum "$Q8" | cut -d' ' -f1)
PROMPT="hello world"

# answer MODEL...: the greedy answer to PROMPT, 8 tokens, on stdout; stderr to $WORK/err.
answer() { "$R" run "$@" "$PROMPT" -n 8 --temp 0 2>"$WORK/err"; }
REF=$(answer "$Q8") && [ -n "$REF" ] && ok "the q8_0 fixture answers by its .gguf name" || not_ok "reference run: $(cat "$WORK/err")"
REF_F32=$(answer "$F32")

# ------------------------------------------------- recognised by content
mkdir -p "$WORK/files/ollama/models/blobs"
cp "$Q8" "$WORK/files/noext"
ln -s "$Q8" "$WORK/files/link"
ln -s "$WORK/files/noext" "$WORK/files/link-named.gguf"
cp "$Q8" "$WORK/files/ollama/models/blobs/sha256-$Q8_SHA"
[ "$(answer "$WORK/files/noext")" = "$REF" ] && ok "a copy without .gguf runs" || not_ok "noext: $(cat "$WORK/err")"
[ "$(answer "$WORK/files/link")" = "$REF" ] && ok "a symlink without .gguf runs" || not_ok "link: $(cat "$WORK/err")"
[ "$(answer "$WORK/files/link-named.gguf")" = "$REF" ] && ok "a .gguf symlink to a file without extension runs" \
    || not_ok "link-named: $(cat "$WORK/err")"
[ "$(answer "$WORK/files/ollama/models/blobs/sha256-$Q8_SHA")" = "$REF" ] && ok "an ollama blob (sha256-HEX) runs" \
    || not_ok "ollama blob: $(cat "$WORK/err")"
got=$(cd "$WORK/files/ollama/models/blobs" && "$R" run "sha256-$Q8_SHA" "$PROMPT" -n 8 --temp 0 2>"$WORK/err")
[ "$got" = "$REF" ] && ok "... also named without a folder, from its own folder" || not_ok "bare blob name: $(cat "$WORK/err")"
$R show "$WORK/files/noext" >"$WORK/out" 2>"$WORK/err" && grep -q "Qwen2ForCausalLM" "$WORK/out" \
    && ok "show reads a GGUF without extension" || not_ok "show noext: $(cat "$WORK/err")"
$R tokenize -m "$WORK/files/noext" "$PROMPT" >"$WORK/out" 2>"$WORK/err" && [ "$(cat "$WORK/out")" = "$($R tokenize -m "$Q8" "$PROMPT")" ] \
    && ok "tokenize -m takes a GGUF without extension" || not_ok "tokenize noext: $(cat "$WORK/err")"
$R convert "$WORK/files/noext" -o "$WORK/files/copy.rad" 2>"$WORK/err" && [ "$(answer "$WORK/files/copy.rad")" = "$REF" ] \
    && ok "convert copies a GGUF without extension into a .rad that answers the same" || not_ok "convert noext: $(cat "$WORK/err")"
printf 'neither kind of model\n' >"$WORK/files/text.gguf"
expect_fail "a file that is neither .rad nor GGUF is named as such" 4 "text.gguf: not a model: .*RADMODEL.*GGUF" \
    $R run "$WORK/files/text.gguf" hi
mkfifo "$WORK/files/fifo.gguf"
start=$(date +%s%N)
expect_fail "a FIFO named x.gguf is refused, not opened" 4 "fifo.gguf: not a regular file" \
    timeout 20 $R run "$WORK/files/fifo.gguf" hi
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$elapsed" -lt 10000 ] && ok "... at once (${elapsed} ms)" || not_ok "fifo took ${elapsed} ms"
expect_fail "show of a FIFO" 4 "fifo.gguf: not a regular file" timeout 20 $R show "$WORK/files/fifo.gguf"
expect_fail "convert of a FIFO" 4 "fifo.gguf: not a regular file" timeout 20 $R convert "$WORK/files/fifo.gguf" -o "$WORK/files/f.rad"
expect_fail "tokenize -m of a FIFO" 4 "fifo.gguf: not a regular file" timeout 20 $R tokenize -m "$WORK/files/fifo.gguf" hi

# ------------------------------------------------------ spellings of MODEL
expect_fail "a bare ORG/REPO gets a hint" 3 "test/qwen2-gguf: no such file or folder.*hf:test/qwen2-gguf" \
    $R run test/qwen2-gguf hi

# ------------------------------------------ a GGUF repository, run in place
m=$(mark)
got=$(answer hf:test/qwen2-gguf:Q8_0)
[ "$got" = "$REF" ] && ok "run hf:ORG/REPO:Q8_0 of a GGUF repository on a cold cache answers" || not_ok "run hub gguf: $(cat "$WORK/err")"
[ -z "$(find "$XDG_DATA_HOME" -name '*.rad' 2>/dev/null)" ] && ok "... with no conversion (no .rad in the store)" \
    || not_ok "a .rad was written: $(find "$XDG_DATA_HOME" -name '*.rad')"
copies=$(find "$WORK/home" "$WORK/data" "$WORK/hf" "$WORK/cache" -type f -size "${Q8_SIZE}c" 2>/dev/null | wc -l)
[ "$copies" = 1 ] && [ -f "$RD/blobs/$Q8_SHA" ] && ok "... and one copy on disk, the cache's blob" \
    || not_ok "copies of the file: $copies: $(find "$WORK/home" "$WORK/data" "$WORK/hf" "$WORK/cache" -type f -size "${Q8_SIZE}c")"
[ ! -e "$RD/snapshots/$(commit_of test/qwen2-gguf)/qwen2-tiny-F32-00001-of-00002.gguf" ] \
    && [ ! -e "$RD/snapshots/$(commit_of test/qwen2-gguf)/mmproj-qwen2-tiny-Q8_0.gguf" ] \
    && ok "... only the chosen file is fetched (no other quant, no mmproj)" || not_ok "fetched: $(ls "$RD/snapshots/"*)"
m=$(mark)
[ "$(answer hf:test/qwen2-gguf:Q8_0)" = "$REF" ] && [ "$(requests_since "$m")" = 0 ] \
    && ok "the second run makes no request" || not_ok "second run: $(requests_since "$m") requests, $(cat "$WORK/err")"
$R list >"$WORK/out" 2>&1 && grep -Eq "^hf:test/qwen2-gguf +test/qwen2-gguf@[0-9a-f]{7} +Q8_0 " "$WORK/out" \
    && ok "list shows the GGUF model and its quant" || not_ok "list: $(cat "$WORK/out")"
$R list --json | python3 -c "
import json,sys
m=[x for x in json.load(sys.stdin)['models'] if x['name']=='hf:test/qwen2-gguf'][0]
sys.exit(0 if m['path'].startswith('$RD/snapshots/') and m['size']==$Q8_SIZE and m['sha256']=='$Q8_SHA' and m['present'] else 1)" \
    && ok "list --json: the path is the cache's snapshot file, with its size and sha256" || not_ok "list --json: $($R list --json)"
$R show hf:test/qwen2-gguf >"$WORK/out" 2>&1 && grep -q "Qwen2ForCausalLM" "$WORK/out" && grep -q "q8_0" "$WORK/out" \
    && ok "show describes it" || not_ok "show: $(cat "$WORK/out")"
m=$(mark)
[ "$(answer hf.co/test/qwen2-gguf:q8_0)" = "$REF" ] && [ "$(requests_since "$m")" = 0 ] \
    && ok "hf.co/ORG/REPO:quant (ollama's spelling, any case) is the same model" || not_ok "hf.co: $(cat "$WORK/err")"
[ "$(answer huggingface.co/test/qwen2-gguf:Q8_0)" = "$REF" ] && ok "huggingface.co/ORG/REPO:QUANT too" \
    || not_ok "huggingface.co: $(cat "$WORK/err")"
m=$(mark)
$R pull hf:test/qwen2-gguf:Q8_0 2>"$WORK/err" && grep -q "up to date" "$WORK/err" && [ "$(requests_since "$m")" = 1 ] \
    && ok "pull of a branch already pulled asks only for the commit" || not_ok "pull again: $(cat "$WORK/err")"

# The default quant: Q4_K_M, else Q8_0 (as llama.cpp), else the only model.
export HF_HOME="$WORK/hf-default"
[ "$(answer hf:test/qwen2-gguf)" = "$REF" ] && [ -f "$WORK/hf-default/hub/models--test--qwen2-gguf/blobs/$Q8_SHA" ] \
    && ok "no quant in a repository without Q4_K_M takes Q8_0" || not_ok "default quant: $(cat "$WORK/err")"
[ "$(answer tiny-gguf)" = "$REF" ] && ok "an alias naming a GGUF quant runs" || not_ok "alias: $(cat "$WORK/err")"

# Split files: every part comes, and the model runs from the parts in place.
export HF_HOME="$WORK/hf-split"
[ "$(answer hf:test/qwen2-gguf:F32)" = "$REF_F32" ] && ok "a split GGUF (2 parts) pulled and run in place answers as the whole file" \
    || not_ok "split: $(cat "$WORK/err")"
n=$(ls "$WORK/hf-split/hub/models--test--qwen2-gguf/snapshots/"*/ | grep -c "F32-0000[12]-of-00002.gguf")
[ "$n" = 2 ] && ok "... both parts are in the snapshot" || not_ok "parts: $n"
[ "$(answer tiny-split)" = "$REF_F32" ] && ok "an alias naming the first part's file" || not_ok "alias file: $(cat "$WORK/err")"

# The shipped alias, against the fake hub (it serves Qwen/Qwen3-0.6B-GGUF).
env -u RADIANCE_ALIASES "$R" run qwen3:0.6b-gguf "$PROMPT" -n 8 --temp 0 >"$WORK/out" 2>"$WORK/err" \
    && [ "$(cat "$WORK/out")" = "$REF" ] && ok "the shipped alias qwen3:0.6b-gguf pulls and runs" || not_ok "qwen3:0.6b-gguf: $(cat "$WORK/err")"

# Choosing among files: what is refused, and how.
expect_fail "a quant that is not there lists what is" 3 "no GGUF file for Q4_K_M.*Q3_K_S.*Q5_K_M" \
    $R pull hf:test/many-gguf:Q4_K_M
expect_fail "Q4_XS does not pick IQ4_XS (whole tokens only)" 3 "no GGUF file for Q4_XS" $R pull hf:test/many-gguf:Q4_XS
expect_fail "the same quant in two folders is ambiguous" 3 "Q5_K_M matches several files: a/m-Q5_K_M.gguf, b/m-Q5_K_M.gguf.*:a/m-Q5_K_M.gguf" \
    $R pull hf:test/many-gguf:Q5_K_M
expect_fail "no quant, no Q4_K_M or Q8_0, several models" 3 "several GGUF models and none is Q4_K_M or Q8_0.*Q2_K" \
    $R pull hf:test/many-gguf

# rm of a GGUF model keeps the download unless --purge (the aliases'
# rows, from other caches of this test, go first: a purge keeps a snapshot
# another model still uses).
$R rm tiny-gguf 2>/dev/null
$R rm tiny-split 2>/dev/null
export HF_HOME="$WORK/hf"
$R rm hf:test/qwen2-gguf 2>"$WORK/err" && [ -f "$RD/blobs/$Q8_SHA" ] && grep -q "kept" "$WORK/err" \
    && ok "rm forgets a GGUF model and says the download stays" || not_ok "rm: $(cat "$WORK/err")"
$R pull hf:test/qwen2-gguf:Q8_0 2>/dev/null
$R rm hf:test/qwen2-gguf --purge 2>"$WORK/err" && [ ! -e "$RD/blobs/$Q8_SHA" ] \
    && ok "rm --purge removes its blob" || not_ok "rm --purge: $(cat "$WORK/err")"

# ------------------------------------------------------- the tokenizer cache
TOKC="$XDG_CACHE_HOME/radiance/tokenizers"
rm -rf "$TOKC"
GEM="$WORK/files/plain.gguf"
cp "$Q8" "$GEM"
[ "$(answer "$GEM")" = "$REF" ] && [ "$(ls "$TOKC" 2>/dev/null | wc -l)" = 1 ] \
    && ok "the first open of a GGUF caches its prepared tokenizer" || not_ok "cache: $(ls -la "$TOKC" 2>&1)"
entry=$(ls "$TOKC"/* 2>/dev/null | head -1)
if [ -z "$entry" ]; then
    not_ok "no tokenizer cache entry: the cache checks cannot run"
else
    sum1=$(sha256sum "$entry" | cut -d' ' -f1)
    [ "$(answer "$WORK/files/noext")" = "$REF" ] && [ "$(ls "$TOKC" | wc -l)" = 1 ] \
        && ok "... a copy of the same file shares the entry (keyed by content)" || not_ok "shared: $(ls "$TOKC")"
    python3 -c "
import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0xFF; b[100]^=0x55; open(p,'wb').write(b)" "$entry"
    [ "$(sha256sum "$entry" | cut -d' ' -f1)" != "$sum1" ] && [ "$(answer "$GEM")" = "$REF" ] \
        && [ "$(sha256sum "$entry" | cut -d' ' -f1)" = "$sum1" ] \
        && ok "a damaged entry is refused and written again; the answer is unchanged" || not_ok "damaged cache entry: $(cat "$WORK/err")"
    rm -f "$entry"
    printf 'outside\n' >"$WORK/victim"
    ln -s "$WORK/victim" "$entry"
    [ "$(answer "$GEM")" = "$REF" ] && [ "$(cat "$WORK/victim")" = outside ] && [ -L "$entry" ] \
        && ok "a symlink planted at the entry is neither read nor written through" || not_ok "planted cache link: $(cat "$WORK/victim")"
    rm -rf "$TOKC"
    printf 'not a folder\n' >"$TOKC"       # (root ignores modes: a file stands in the way instead)
    [ "$(answer "$GEM")" = "$REF" ] && [ ! -s "$WORK/err" ] && [ "$(cat "$TOKC")" = "not a folder" ] \
        && ok "a cache that cannot be written costs nothing but time" || not_ok "unusable cache: $(cat "$WORK/err")"
    rm -f "$TOKC"
    mkdir -p "$WORK/outside-tok"
    ln -s "$WORK/outside-tok" "$TOKC"
    [ "$(answer "$GEM")" = "$REF" ] && [ -z "$(ls -A "$WORK/outside-tok")" ] \
        && ok "a symlink planted at the cache folder: nothing is written through it" \
        || not_ok "planted cache folder link: $(ls -la "$WORK/outside-tok") $(cat "$WORK/err")"
    rm -f "$TOKC"
fi

rm -rf "$TOKC"
$R tokenize -m "$GEM" "$PROMPT" >"$WORK/out" 2>"$WORK/err" && [ "$(ls "$TOKC" 2>/dev/null | wc -l)" = 1 ] \
    && [ "$(cat "$WORK/out")" = "$($R tokenize -m "$GEM" "$PROMPT")" ] && [ "$(answer "$GEM")" = "$REF" ] \
    && [ "$(ls "$TOKC" | wc -l)" = 1 ] \
    && ok "tokenize -m of a GGUF fills and reads the tokenizer cache run uses" || not_ok "tokenize cache: $(ls -la "$TOKC" 2>&1) $(cat "$WORK/err")"

# ------------------------------------------------------ loading, on a terminal
python3 - "$R" "$GEM" "$WORK/tty.out" <<'PY' && ok "on a terminal, a loading line is drawn and erased" || not_ok "tty: $(od -c "$WORK/tty.out" | head -20)"
import os, pty, subprocess, sys
master, slave = pty.openpty()
p = subprocess.Popen([sys.argv[1], "run", sys.argv[2], "hello", "-n", "2", "--temp", "0"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
got = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    got += chunk
p.wait()
open(sys.argv[3], "wb").write(got)
sys.exit(0 if p.returncode == 0 and b"loading" in got and got.endswith(b"\r\x1b[K") else 1)
PY
"$R" run "$GEM" hello -n 2 --temp 0 >/dev/null 2>"$WORK/err"
[ ! -s "$WORK/err" ] && ok "... and nothing when stderr is not a terminal" || not_ok "piped stderr: $(cat "$WORK/err")"

# ------------------------------------- pull --quant: llama.cpp's mixed recipes
export HF_HOME="$WORK/hf-wide"
$R pull hf:test/wide-llama --quant Q4_K_M 2>"$WORK/err" && ok "pull --quant Q4_K_M of a safetensors repository" \
    || not_ok "pull Q4_K_M: $(cat "$WORK/err")"
$R show hf:test/wide-llama >"$WORK/out" 2>&1
kinds() { grep -Eq "^  $1 +$2 +$3 " "$WORK/out"; }
kinds attn_q.weight 8 q4_k && kinds attn_k.weight 8 q4_k && kinds attn_output.weight 8 q4_k \
    && kinds ffn_gate.weight 8 q4_k && kinds ffn_up.weight 8 q4_k \
    && ok "Q4_K_M: q, k, o, gate and up are q4_k" || not_ok "Q4_K_M q4_k kinds: $(cat "$WORK/out")"
kinds attn_v.weight 4 q6_k && kinds attn_v.weight 4 q4_k && kinds ffn_down.weight 4 q6_k && kinds ffn_down.weight 4 q4_k \
    && ok "... attn_v and ffn_down q6_k in the layers llama.cpp gives more bits (4 of 8)" || not_ok "Q4_K_M q6_k kinds: $(cat "$WORK/out")"
kinds output.weight 1 q6_k && kinds token_embd.weight 1 q4_k && kinds attn_norm.weight 8 f32 \
    && ok "... the head q6_k, the embedding q4_k, norms f32" || not_ok "Q4_K_M head: $(cat "$WORK/out")"
got=$($R run hf:test/wide-llama:Q4_K_M --tokens 1,5,9,200,301 -n 6 --temp 0 2>"$WORK/err")
[ "$(echo "$got" | tr ',' '\n' | grep -c .)" = 6 ] && ok "... and it runs" || not_ok "run Q4_K_M: $got $(cat "$WORK/err")"
$R pull hf:test/wide-llama:q6_k 2>/dev/null && $R show hf:test/wide-llama --quant q6_k >"$WORK/out" 2>&1 \
    && kinds attn_q.weight 8 q6_k && ok "pull also makes a pure q6_k" || not_ok "q6_k: $(cat "$WORK/out")"
expect_fail "an unknown --quant lists the choices" 2 "--quant q3_x.*f32, f16, bf16, q8_0, q6_k, q5_k_m, q5_k_s, q4_k_m, q4_k_s, q4_k, q4_0" \
    $R pull hf:test/wide-llama --quant q3_x
$R convert "$FIXTURES/llama" -o "$WORK/llama-q4km.rad" --quant Q4_K_M 2>"$WORK/err" \
    && $R show "$WORK/llama-q4km.rad" >"$WORK/out" && grep -Eq "^  attn_q.weight +[0-9]+ +q5_0 " "$WORK/out" \
    && ok "convert --quant Q4_K_M: rows of 64 fall back as llama.cpp's (q4_k -> q5_0)" || not_ok "convert Q4_K_M: $(cat "$WORK/err") $(cat "$WORK/out")"

# GLM-4.5's GGUF counts its MTP layer in block_count (4); show says 3 run and 1 does not,
# as does the .rad converted from the checkpoint (whose config counts 3 and names 1 MTP layer)
GLM="$RADIANCE_SRC/tests/models/llamacpp/glm4moe-tiny-f32.gguf"
$R show "$GLM" 2>&1 | grep -q "^size *3 layers (and 1 MTP layer, not run)," \
    && ok "show: a glm4moe GGUF's MTP layer is not counted as a decoder layer" || not_ok "show glm4moe: $($R show "$GLM" 2>&1 | grep size)"
$R convert "$FIXTURES/glm4moe" -o "$WORK/glm.rad" >/dev/null 2>&1 && $R show "$WORK/glm.rad" 2>&1 | grep -q "^size *3 layers (and 1 MTP layer, not run)," \
    && ok "show: the .rad of a GLM-4.5 checkpoint says so too" || not_ok "show glm.rad: $($R show "$WORK/glm.rad" 2>&1 | grep size)"

finish
