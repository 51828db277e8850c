#!/usr/bin/env bash
# test_cache_safety.sh: the Hugging Face cache and the model store are places
# other people (another user of a shared HF_HOME, a hostile download) may
# have written into.  For every file and folder a pull creates there, a
# symlink (or a hard link) is planted in its place, pointing outside; the
# pull must refuse, naming the planted path, and nothing outside may change.
# (The converter's own temporary, OUT.partial.RANDOM, has a name nobody can
# plant in advance and is made with O_EXCL.)  Then the XDG rules: a relative XDG_* is ignored (the spec says so), and a
# command that only reads (list, show, rm of nothing, sessions and logs with no database yet) creates no folder.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN
SRV="$WORK/srv"
mkdir -p "$SRV"
LOG="$SRV/log"
: >"$LOG"
: >"$SRV/control"
python3 "$RADIANCE_SRC/tests/e2e/hub_server.py" --fixtures "$FIXTURES" --dir "$SRV" --log "$LOG" \
    --control "$SRV/control" --lifetime 300 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$SRV/ports" ] && break; sleep 0.1; done
[ -s "$SRV/ports" ] || { not_ok "the fake hub did not start"; finish; exit 1; }
read -r HUB CDN <"$SRV/ports"
TINY=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['test/tiny-llama'])" "$SRV/commits.json")

unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_TOKEN_PATH HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HUB_OFFLINE \
    http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy XDG_CACHE_HOME RADIANCE_MODEL
export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
export HF_ENDPOINT="http://127.0.0.1:$HUB"
export RADIANCE_ALIASES="$WORK/models.tsv"
printf 'tiny\ttest/tiny-llama\tmain\tf32\ttest weights\n' >"$RADIANCE_ALIASES"
MODEL_SHA=$(sha256sum "$FIXTURES/llama/model.safetensors" | cut -d' ' -f1)
CONFIG_SHA1=$(python3 -c "import hashlib,sys; d=open(sys.argv[1],'rb').read(); print(hashlib.sha1(b'blob %d\0' % len(d) + d).hexdigest())" "$FIXTURES/llama/config.json")

# fresh: a new HOME with its caches; OUT: the folder a planted link points into.
fresh() {
    rm -rf "$WORK/root" "$WORK/outside"
    mkdir -p "$WORK/root/home" "$WORK/outside"
    printf 'precious\n' >"$WORK/outside/victim"
    export HOME="$WORK/root/home" HF_HOME="$WORK/root/hf" XDG_DATA_HOME="$WORK/root/data" XDG_CONFIG_HOME="$WORK/root/config"
}
outside_unchanged() {
    [ "$(ls -A "$WORK/outside")" = victim ] && [ "$(cat "$WORK/outside/victim")" = precious ]
}
HUBDIR='$HF_HOME/hub'
REPO="$HUBDIR/models--test--tiny-llama"
STORE='$XDG_DATA_HOME/radiance'

# plant KIND REL: put a link at REL (under the root named in it) pointing
# outside; KIND file links to the victim file, dir to the outside folder,
# hard hard-links the victim.  Then pull and check.
plant() {
    local kind=$1 rel=$2
    fresh
    local path
    path=$(eval echo "$rel")
    mkdir -p "$(dirname "$path")"
    case $kind in
    file) ln -s "$WORK/outside/victim" "$path" ;;
    dir) ln -s "$WORK/outside" "$path" ;;
    hard) ln "$WORK/outside/victim" "$path" ;;
    esac
    $R pull tiny >"$WORK/out" 2>"$WORK/err"
    local rc=$?
    if [ $rc -eq 0 ]; then
        not_ok "a $kind link at $rel: the pull succeeded"
    elif ! grep -qF -- "$path" "$WORK/err"; then
        not_ok "a $kind link at $rel: the message does not name it: $(tail -c 300 "$WORK/err")"
    elif ! outside_unchanged; then
        not_ok "a $kind link at $rel: something outside changed: $(ls -la "$WORK/outside")"
    else
        ok "a $kind link at $rel is refused by name (exit $rc), nothing outside changes"
    fi
}

fresh
$R pull tiny 2>"$WORK/err" && [ -f "$HF_HOME/hub/models--test--tiny-llama/blobs/$MODEL_SHA" ] \
    && ok "a clean pull (the files below exist after one)" || not_ok "clean pull: $(cat "$WORK/err")"
FILES=("$REPO/refs/main" "$REPO/trees/$TINY.json" "$REPO/blobs/$MODEL_SHA" "$REPO/blobs/$MODEL_SHA.incomplete"
    "$REPO/blobs/$CONFIG_SHA1" "$REPO/snapshots/$TINY/config.json" "$REPO/snapshots/$TINY/model.safetensors"
    "$HUBDIR/.locks/models--test--tiny-llama/$MODEL_SHA.lock" "$STORE/models/tiny.f32.rad" "$STORE/radiance.db"
    "$STORE/radiance.db-wal" "$STORE/radiance.db-shm" "$STORE/radiance.db-journal")
for rel in "${FILES[@]}"; do
    # gone after a clean pull, by design: the download's partial, and the
    # files SQLite keeps beside the database only while it is open
    case $rel in *.incomplete | *-wal | *-shm | *-journal) continue ;; esac
    [ -e "$(eval echo "$rel")" ] || not_ok "the clean pull made no $rel"
done
for rel in "${FILES[@]}"; do plant file "$rel"; done
for rel in "$REPO" "$REPO/refs" "$REPO/trees" "$REPO/blobs" "$REPO/snapshots" "$REPO/snapshots/$TINY" \
    "$HUBDIR/.locks" "$HUBDIR/.locks/models--test--tiny-llama" "$STORE/models"; do
    plant dir "$rel"
done
plant hard "$REPO/blobs/$MODEL_SHA.incomplete"
plant hard "$REPO/blobs/$MODEL_SHA"

# A snapshot link another tool left that points outside the cache is not
# taken for the file (or the model would be read from anywhere).
fresh
mkdir -p "$HF_HOME/hub/models--test--tiny-llama/snapshots/$TINY" "$HF_HOME/hub/models--test--tiny-llama/refs"
cp "$FIXTURES/llama/model.safetensors" "$WORK/outside/model.safetensors"
ln -s "$WORK/outside/model.safetensors" "$HF_HOME/hub/models--test--tiny-llama/snapshots/$TINY/model.safetensors"
HF_HUB_OFFLINE=1 $R pull "hf:test/tiny-llama@$TINY:f32" >"$WORK/out" 2>"$WORK/err"
[ $? -ne 0 ] && grep -qF "snapshots/$TINY/model.safetensors" "$WORK/err" \
    && ok "a snapshot link to a file outside the cache is refused by name" || not_ok "outside snapshot link: $(cat "$WORK/err")"

# ------------------------------------------------------------------ XDG
fresh
mkdir -p "$WORK/cwd/reldata" "$WORK/cwd/relconfig/radiance"
printf 'relalias\ttest/tiny-llama\tmain\tf32\tx\n' >"$WORK/cwd/relconfig/radiance/models.tsv"
(cd "$WORK/cwd" && env -u RADIANCE_ALIASES XDG_DATA_HOME=reldata XDG_CACHE_HOME=relcache XDG_CONFIG_HOME=relconfig \
    HF_HOME= "$R" pull hf:test/tiny-llama:f32 >/dev/null 2>"$WORK/err")
[ -z "$(ls -A "$WORK/cwd/reldata")" ] && [ ! -e "$WORK/cwd/relcache" ] && [ -d "$HOME/.local/share/radiance/models" ] \
    && [ -d "$HOME/.cache/huggingface/hub/models--test--tiny-llama" ] \
    && ok "relative XDG_DATA_HOME and XDG_CACHE_HOME are ignored (the defaults under HOME are used)" \
    || not_ok "relative XDG: $(cat "$WORK/err"); $(find "$WORK/cwd" | head)"
(cd "$WORK/cwd" && env -u RADIANCE_ALIASES XDG_CONFIG_HOME=relconfig "$R" pull --offline relalias >/dev/null 2>"$WORK/err")
grep -q "unknown model 'relalias'" "$WORK/err" && ok "a relative XDG_CONFIG_HOME is ignored (its models.tsv is not read)" \
    || not_ok "relative XDG_CONFIG_HOME: $(cat "$WORK/err")"

fresh
export HOME="$WORK/root/nohome" XDG_DATA_HOME="$WORK/root/nodata" HF_HOME="$WORK/root/nohf"
$R list >"$WORK/out" 2>"$WORK/err" && ok "list with no store at all succeeds" || not_ok "list: $(cat "$WORK/err")"
$R list --json | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if d['models']==[] and d['partial']==[] else 1)" \
    && ok "... and list --json says it is empty" || not_ok "list --json empty"
expect_fail "show of a model not in the store" 3 "not in the model store" $R show tiny
expect_fail "rm of a model not in the store" 3 "not in the model store" $R rm tiny
[ ! -e "$WORK/root/nohome" ] && [ ! -e "$WORK/root/nodata" ] && [ ! -e "$WORK/root/nohf" ] \
    && ok "list, show and rm created no HOME, data or cache folder" || not_ok "created: $(find "$WORK/root" | head)"
# The session database's readers too (they created HOME/.local/share/radiance
# and an empty radiance.db): an absent database reads as an empty one.
$R sessions list >"$WORK/out" 2>"$WORK/err" && grep -q "no saved sessions yet" "$WORK/err" \
    && ok "sessions list with no database says so" || not_ok "sessions list: $(cat "$WORK/err")"
[ "$($R sessions list --json)" = "[]" ] && ok "... and sessions list --json prints []" || not_ok "sessions list --json"
$R sessions search hello 2>"$WORK/err" && grep -q 'no message contains "hello"' "$WORK/err" \
    && ok "sessions search with no database finds nothing" || not_ok "sessions search: $(cat "$WORK/err")"
expect_fail "sessions show with no database" 3 "no saved sessions yet" $R sessions show 1a2b
expect_fail "sessions export with no database" 3 "no saved sessions yet" $R sessions export 1a2b --md -o "$WORK/root/x.md"
expect_fail "sessions rm with no database" 3 "no saved sessions yet" $R sessions rm 1a2b
$R logs >/dev/null 2>"$WORK/err" && grep -q "nothing logged yet" "$WORK/err" \
    && ok "logs with no database says so" || not_ok "logs: $(cat "$WORK/err")"
expect_fail "logs show with no database" 3 "nothing logged yet" $R logs show
[ ! -e "$WORK/root/nohome" ] && [ ! -e "$WORK/root/nodata" ] && [ ! -e "$WORK/root/x.md" ] \
    && ok "sessions and logs created no HOME, data folder, database or export" \
    || not_ok "created: $(find "$WORK/root" | head)"

finish
