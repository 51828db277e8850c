#!/usr/bin/env bash
# test_output.sh: what radiance writes, when the destination fails and when
# what it prints is hostile (issue 12, items 4, 5 and 7).
#
#   - A failed write is exit status 1 with the reason, never 0: stdout on
#     /dev/full or closed, for run, run --json, sessions export, list
#     --json, tokenize, logs; `sessions export -o`, `convert -o` and `run
#     --dump-logits` on a full disk say so in one line and leave no file;
#     an output that is a device or a FIFO is written through (or, for
#     convert, refused), never replaced by a renamed temporary.
#   - An interrupted conversion removes its partial output (SIGINT 130,
#     SIGTERM 143); after SIGKILL the next conversion of the same output
#     sweeps the stale partial and says so.
#   - Text from model files, from a model, from a hub and from the database
#     reaches the terminal as visible escapes: a GGUF whose strings hold
#     ESC, OSC, BEL, CR and C1 bytes, a GGUF whose tokens decode to them
#     (so the model's own reply holds them), a hub file name with C1
#     controls and a bidirectional override, shown by every command that
#     prints file or model text under tmux (show, info, run, chat --plain,
#     the full-screen chat, tokenize, pull, list, sessions, logs), leave
#     the terminal's title and screen as they were.
. "$(dirname "$0")/lib.sh"
R="$RADIANCE_BIN"
MODELS="${RADIANCE_MODELS_DIR:-$HOME/.cache/radiance/models}"
# The conversions to interrupt: the largest model fetched, so a signal lands
# while the partial file is being written.
M="$MODELS/gemma-3-270m-q4_k_m.gguf"
[ -f "$M" ] || M="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
# Without a fetched model: the fake hub's wide llama checkpoint (bf16, 10 MB,
# made here by tests/e2e/hub_server.py's wide_llama), whose conversion at
# Q4_K_M takes about half a second, its partial on disk for most of it.
CONV_ARGS=()
if [ ! -f "$M" ]; then
    M="$WORK/wide"
    mkdir -p "$M"
    python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import hub_server as h
for k, v in h.wide_llama().items(): open(sys.argv[2] + '/' + k, 'wb').write(v)" "$RADIANCE_SRC/tests/e2e" "$M"
    CONV_ARGS=(--quant Q4_K_M)
fi
TINY="$RADIANCE_SRC/tests/models/llamacpp/qwen2-tiny-q8_0.gguf"
EDIT="python3 $RADIANCE_SRC/tests/e2e/gguf_edit.py"
export RADIANCE_CONFIG=/dev/null XDG_DATA_HOME="$WORK/data" XDG_STATE_HOME="$WORK/state" LANG=C.UTF-8
unset RADIANCE_MODEL NO_COLOR

# fails_with NAME PATTERN CMD...: CMD exits 1 and says PATTERN on stderr.
fails_with() {
    local name=$1 pattern=$2
    shift 2
    "$@" 2>"$WORK/err"
    local st=$?
    if [ $st = 1 ] && grep -Eq -- "$pattern" "$WORK/err"; then ok "$name: exit 1, '$(head -c 120 "$WORK/err" | tr '\n' ' ')'"
    else not_ok "$name: exit $st, stderr '$(head -c 300 "$WORK/err")'"; fi
}

# ------------------------------------------------------------ failed writes
fails_with "run to /dev/full" "No space left" bash -c "$R run '$TINY' -n 8 --ignore-eos hello >/dev/full"
fails_with "run --json to /dev/full" "No space left" bash -c "$R run '$TINY' -n 4 --json hello >/dev/full"
fails_with "run to a closed stdout" "Bad file descriptor" bash -c "$R run '$TINY' -n 4 hello >&-"
fails_with "tokenize to /dev/full" "No space left" bash -c "$R tokenize -m '$TINY' hello >/dev/full"
fails_with "tokenize to a closed stdout" "Bad file descriptor" bash -c "$R tokenize -m '$TINY' hello >&-"
fails_with "list --json to /dev/full" "No space left" bash -c "$R list --json >/dev/full"
$R run "$TINY" -n 2 "a logged exchange" >/dev/null 2>&1
sid=$($R logs list 2>/dev/null | awk 'NR == 2 { print $1 }')
[ -n "$sid" ] || not_ok "no logged exchange to export: $($R logs list 2>&1)"
fails_with "sessions export to /dev/full" "No space left" bash -c "$R sessions export '$sid' --md >/dev/full"
fails_with "sessions export --json to /dev/full" "No space left" bash -c "$R sessions export '$sid' --json >/dev/full"
fails_with "logs list to /dev/full" "No space left" bash -c "$R logs list >/dev/full"
fails_with "logs list --json to /dev/full" "No space left" bash -c "$R logs list --json >/dev/full"
fails_with "logs show to /dev/full" "No space left" bash -c "$R logs show '$sid' >/dev/full"
fails_with "logs search to /dev/full" "No space left" bash -c "$R logs search logged >/dev/full"
fails_with "logs export to /dev/full" "No space left" bash -c "$R logs export '$sid' --md >/dev/full"
# A full disk for -o: a tiny tmpfs as root, else a file-size limit (EFBIG).
FULL=$WORK/full
mkdir -p "$FULL"
if mount -t tmpfs -o size=8k tmpfs "$FULL" 2>/dev/null; then
    head -c 8192 /dev/zero >"$FULL/filler" 2>/dev/null
    fails_with "sessions export -o on a full disk" "$FULL/out.md.*(No space left|File too large)" \
        $R sessions export "$sid" --md -o "$FULL/out.md"
else
    fails_with "sessions export -o past a file-size limit" "File too large" \
        bash -c "trap '' XFSZ; ulimit -f 0; $R sessions export '$sid' --md -o '$FULL/out.md'"
fi
ls "$FULL"/out.md* >/dev/null 2>&1 && not_ok "export -o left a file: $(ls "$FULL")" \
    || ok "export -o on a full disk leaves no file, not even an empty one"
# convert -o and run --dump-logits onto the same full disk: exit 1, one line
# naming the file and the reason, nothing left behind (no output, no partial).
# (ulimit -f 0 stands in for the full disk when not root.)
if mountpoint -q "$FULL"; then FULLCMD=""; else FULLCMD="trap '' XFSZ; ulimit -f 0;"; fi
NOROOM="(No space left|File too large)"
fails_with "convert -o on a full disk" "$FULL/out.rad.*$NOROOM" \
    bash -c "$FULLCMD $R convert '$TINY' -o '$FULL/out.rad'"
[ "$(wc -l <"$WORK/err")" = 1 ] && ok "convert -o on a full disk: one line" || not_ok "convert -o: $(cat "$WORK/err")"
ls "$FULL"/out.rad* >/dev/null 2>&1 && not_ok "convert -o left a file: $(ls "$FULL")" \
    || ok "convert -o on a full disk leaves no file and no partial"
fails_with "run --dump-logits on a full disk" "dump-logits $FULL/l.f32.*$NOROOM" \
    bash -c "$FULLCMD $R run -m '$TINY' --tokens 1,2,3 -n 0 --dump-logits '$FULL/l.f32' >/dev/null"
[ "$(wc -l <"$WORK/err")" = 1 ] && ok "run --dump-logits on a full disk: one line" \
    || not_ok "run --dump-logits: $(cat "$WORK/err")"
ls "$FULL"/l.f32* >/dev/null 2>&1 && not_ok "run --dump-logits left a file: $(ls "$FULL")" \
    || ok "run --dump-logits on a full disk leaves no file and no partial"
# The chat's /export FILE likewise (it used fopen: an empty file was left).
if mountpoint -q "$FULL"; then
    printf 'hello\n/export %s\n/export %s\n' "$FULL/c.md" "$WORK/c.md" \
        | $R chat --plain -m "$TINY" -n 2 --temp 0 >/dev/null 2>"$WORK/err"
    grep -q "/export: writing $FULL/c.md: No space left" "$WORK/err" && ! ls "$FULL"/c.md* >/dev/null 2>&1 \
        && grep -q "^## user" "$WORK/c.md" \
        && ok "chat /export on a full disk says so and leaves no file; with room it writes the file" \
        || not_ok "chat /export: $(cat "$WORK/err"), $(ls "$FULL")"
else
    echo "SKIP chat /export on a full disk: no tmpfs (not root)"
fi
mountpoint -q "$FULL" && umount "$FULL"
# An output that is a device or a FIFO is written in place (--dump-logits,
# sessions export -o) or refused (convert -o), never renamed over: the
# temporary beside it used to replace it (as root, `--dump-logits /dev/full`
# turned /dev/full into a regular file and exited 0).  A private device node
# (mknod, as root) and a FIFO stand in for /dev/full and /dev/stdout.
$R run -m "$TINY" --tokens 1,2,3 -n 0 --dump-logits "$WORK/l3.f32" >/dev/null
want=$(stat -c %s "$WORK/l3.f32")
mkfifo "$WORK/fifo"
timeout 30 cat "$WORK/fifo" >"$WORK/fifo.out" &
reader=$!
timeout 30 $R run -m "$TINY" --tokens 1,2,3 -n 0 --dump-logits "$WORK/fifo" >/dev/null 2>"$WORK/err"
st=$?
wait $reader
[ $st = 0 ] && [ -p "$WORK/fifo" ] && cmp -s "$WORK/fifo.out" "$WORK/l3.f32" \
    && ok "--dump-logits into a FIFO: its reader gets the $want bytes, the FIFO stays a FIFO" \
    || not_ok "--dump-logits FIFO: exit $st, $(ls -la "$WORK/fifo" "$WORK/fifo.out"), $(cat "$WORK/err")"
timeout 30 cat "$WORK/fifo" >"$WORK/fifo.md" &
reader=$!
timeout 30 $R sessions export "$sid" --md -o "$WORK/fifo" 2>"$WORK/err"
st=$?
wait $reader
[ $st = 0 ] && [ -p "$WORK/fifo" ] && grep -q "a logged exchange" "$WORK/fifo.md" \
    && ok "sessions export -o into a FIFO: written through, the FIFO stays a FIFO" \
    || not_ok "export -o FIFO: exit $st, $(ls -la "$WORK/fifo"), $(cat "$WORK/err")"
st=$(timeout 30 $R convert "$TINY" -o "$WORK/fifo" 2>"$WORK/err"; echo $?)
[ "$st" != 0 ] && [ "$st" != 124 ] && [ -p "$WORK/fifo" ] && grep -q "$WORK/fifo: exists and is not a regular file (a FIFO)" "$WORK/err" \
    && ok "convert -o onto a FIFO is refused by name; the FIFO stays: $(head -c 120 "$WORK/err")" \
    || not_ok "convert -o FIFO: exit $st, $(ls -la "$WORK/fifo"), $(cat "$WORK/err")"
if mknod -m 666 "$WORK/devfull" c 1 7 2>/dev/null; then
    fails_with "run --dump-logits onto a device (a copy of /dev/full)" "dump-logits $WORK/devfull: .*No space left" \
        bash -c "$R run -m '$TINY' --tokens 1,2,3 -n 0 --dump-logits '$WORK/devfull' >/dev/null"
    [ -c "$WORK/devfull" ] && ok "the device is still a device" || not_ok "the device became: $(ls -la "$WORK/devfull")"
    fails_with "sessions export -o onto a device" "$WORK/devfull.*No space left" \
        $R sessions export "$sid" --md -o "$WORK/devfull"
    st=$($R convert "$TINY" -o "$WORK/devfull" 2>"$WORK/err"; echo $?)
    [ "$st" != 0 ] && [ -c "$WORK/devfull" ] && grep -q "is not a regular file (a device)" "$WORK/err" \
        && ok "convert -o onto a device is refused; the device stays" \
        || not_ok "convert -o device: exit $st, $(ls -la "$WORK/devfull"), $(cat "$WORK/err")"
    ls "$WORK"/devfull.* "$WORK"/fifo.partial* >/dev/null 2>&1 && not_ok "a temporary was left: $(ls "$WORK")" \
        || ok "no temporary left beside the device or the FIFO"
else
    echo "SKIP device outputs: mknod needs root"
fi
$R sessions export "$sid" --md -o "$WORK/good.md" && grep -q "a logged exchange" "$WORK/good.md" \
    && ok "export -o writes the file when there is room" || not_ok "export -o: $(ls -la "$WORK")"

# ------------------------------------------------------------ interrupted conversions
if [ -e "$M/config.json" ] || [ -f "$M" ]; then
    echo "     (interrupting conversions of $M ${CONV_ARGS[*]})"
    for sig in INT TERM; do
        rm -f "$WORK/conv.rad"*
        $R convert "$M" "${CONV_ARGS[@]}" -o "$WORK/conv.rad" >/dev/null 2>"$WORK/conv.err" &
        pid=$!
        for _ in $(seq 400); do ls "$WORK"/conv.rad.partial.* >/dev/null 2>&1 && break; sleep 0.01; done
        kill -$sig $pid
        wait $pid
        st=$?
        want=$([ $sig = INT ] && echo 130 || echo 143)
        left=$(ls "$WORK"/conv.rad* 2>/dev/null)
        [ $st = "$want" ] && [ -z "$left" ] && ok "convert stopped by SIG$sig: exit $st, no partial file left" \
            || not_ok "convert SIG$sig: exit $st, left: $left $(cat "$WORK/conv.err")"
    done
    rm -f "$WORK/conv.rad"*
    $R convert "$M" "${CONV_ARGS[@]}" -o "$WORK/conv.rad" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 400); do ls "$WORK"/conv.rad.partial.* >/dev/null 2>&1 && break; sleep 0.01; done
    kill -KILL $pid
    wait $pid 2>/dev/null
    stale=$(ls "$WORK"/conv.rad.partial.* 2>/dev/null)
    [ -n "$stale" ] || not_ok "SIGKILL left no partial to sweep (the conversion finished first?)"
    touch -d '1 minute ago' $stale 2>/dev/null
    $R convert "$TINY" -o "$WORK/conv.rad" >/dev/null 2>"$WORK/sweep.err"
    st=$?
    [ $st = 0 ] && [ -f "$WORK/conv.rad" ] && ! ls "$WORK"/conv.rad.partial.* >/dev/null 2>&1 \
        && grep -q "removed .*conv.rad.partial" "$WORK/sweep.err" \
        && ok "after SIGKILL the next conversion sweeps the stale partial: $(grep removed "$WORK/sweep.err" | head -c 150)" \
        || not_ok "sweep: exit $st, $(ls "$WORK"/conv.rad*), $(cat "$WORK/sweep.err")"
    # A partial whose writer is alive (it holds the lock) is not swept.
    rm -f "$WORK/conv.rad"*
    $R convert "$M" "${CONV_ARGS[@]}" -o "$WORK/conv.rad" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 400); do ls "$WORK"/conv.rad.partial.* >/dev/null 2>&1 && break; sleep 0.01; done
    live=$(ls "$WORK"/conv.rad.partial.* 2>/dev/null)
    touch -d '1 minute ago' $live 2>/dev/null
    $R convert "$TINY" -o "$WORK/conv2.rad" >/dev/null 2>&1      # another output: nothing to sweep
    $R convert "$TINY" -o "$WORK/conv.rad" >/dev/null 2>"$WORK/sweep2.err"
    if kill -0 $pid 2>/dev/null && [ -n "$live" ] && [ -e "$live" ]; then
        ok "a partial being written (its lock held) is left alone"
    else
        echo "     (the first conversion ended before the check; the live-lock case not checked)"
    fi
    wait $pid 2>/dev/null
else
    not_ok "no model to convert: $M (the wide llama checkpoint was not made)"
fi

# ------------------------------------------------------------ hostile text on a terminal
if ! command -v tmux >/dev/null; then
    [ "${CI:-}" = true ] && not_ok "tmux is not installed" || echo "SKIP terminal safety: no tmux"
    finish
    exit $?
fi
EVIL='\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\rCR\u009b31mC1\u009d0;C1TITLE\x07end'
$EDIT "$TINY" "$WORK/evil.gguf" "general.name=str:name $EVIL" "tokenizer.chat_template=str:{{ bos }}$EVIL" \
    "general.license=str:lic $EVIL" "general.sampling.temp=f32:0.5"
$EDIT "$TINY" "$WORK/evil-arch.gguf" "general.architecture=str:arch$EVIL"
$EDIT "$TINY" "$WORK/evil-tensor.gguf" "tensor:output_norm.weight=output_norm.weight$EVIL"
# A model whose reply holds the bytes: the two tokens the tiny model answers
# "hello" with first (733, 300 at --temp 0) decode to them.  The merges that
# make those tokens go too, so the vocabulary stays whole; nothing else
# changes, so the model answers with the same ids.
$EDIT "$TINY" "$WORK/evil-out.gguf" 'tokenizer.ggml.tokens[733]=bpe:\x1b]0;PWNED\x07\x1b[2J' \
    'tokenizer.ggml.tokens[300]=bpe:\x1b[31mRED\rCR\u009b31mC1\u009d0;C1TITLE\x07' \
    'tokenizer.ggml.merges[474]=drop' 'tokenizer.ggml.merges[41]=drop' 'tokenizer.ggml.merges[111]=drop'
$R run "$WORK/evil-out.gguf" hello -n 8 --temp 0 >"$WORK/evil-out.txt" 2>"$WORK/err"
grep -q 'PWNED' "$WORK/evil-out.txt" && grep -q $'\033\\[31m' "$WORK/evil-out.txt" \
    && ok "piped, run writes the model's bytes as they are (the pipe contract)" \
    || not_ok "the evil-output model did not answer with its escapes: $(od -c "$WORK/evil-out.txt" | head -3) $(cat "$WORK/err")"
# A stored exchange and a chat whose texts hold the same bytes.
python3 -c "import sys; sys.stdout.write('prompt ' + sys.argv[1].encode().decode('unicode_escape'))" "$EVIL" >"$WORK/evil.txt"
$R run "$TINY" -n 2 "$(cat "$WORK/evil.txt")" >/dev/null 2>&1
printf '%s\n/quit\n' "$(cat "$WORK/evil.txt")" | $R chat --plain "$TINY" -n 2 >/dev/null 2>&1
chat_id=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
evil_ids=$($R tokenize -m "$TINY" --no-special "$(cat "$WORK/evil.txt")")
log_id=$($R logs list 2>/dev/null | awk 'NR == 2 { print $1 }')
printf 'hello\n' >"$WORK/hello.txt"

# A hub whose file names hold C1 controls and a right-to-left override
# (tests/e2e/hub_server.py's test/evil-names); a partial download of it for
# `list` to show.
SRV="$WORK/srv"
mkdir -p "$SRV"
: >"$SRV/log"
: >"$SRV/control"
python3 "$RADIANCE_SRC/tests/e2e/hub_server.py" --fixtures "$FIXTURES" --dir "$SRV" --log "$SRV/log" \
    --control "$SRV/control" --lifetime 600 &
SERVER_PID=$!
for _ in $(seq 100); do [ -s "$SRV/ports" ] && break; sleep 0.1; done
read -r HUB _ <"$SRV/ports"
export HF_HOME="$WORK/hf" HF_ENDPOINT="http://127.0.0.1:$HUB" NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
unset HF_TOKEN HF_HUB_OFFLINE http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy

SOCK="$WORK/tmux.sock"
T() { tmux -S "$SOCK" "$@"; }
trap 'tmux -S "$SOCK" kill-server >/dev/null 2>&1; kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; rm -rf "$WORK"' EXIT
T -f /dev/null new-session -d -s safe -x 160 -y 50 "sleep 600"
T set-option -t safe allow-rename on 2>/dev/null
T set-window-option -t safe allow-rename on 2>/dev/null
T set-option -t safe set-titles on 2>/dev/null
T select-pane -t safe -T clean
PANE_ENV="env XDG_DATA_HOME='$XDG_DATA_HOME' XDG_STATE_HOME='$XDG_STATE_HOME' HF_HOME='$HF_HOME' HF_ENDPOINT='$HF_ENDPOINT' NO_PROXY=127.0.0.1 RADIANCE_CONFIG=/dev/null LANG=C.UTF-8 TERM=screen"
run_in_pane() {
    T respawn-pane -k -t safe "$PANE_ENV $1; echo __done__; sleep 600"
    for _ in $(seq 300); do T capture-pane -p -t safe | grep -q __done__ && return 0; sleep 0.1; done
    return 1
}
# check_pane NAME SHOWN: the pane's title is still "clean", nothing on screen
# is red or starts at a carriage return's column 0, and (SHOWN 1) the
# hostile bytes are on screen as visible escapes.
check_pane() {
    local name=$1 want_shown=$2
    local title screen plain shown
    title=$(T display-message -p -t safe '#{pane_title}')
    screen=$(T capture-pane -p -e -t safe)
    plain=$(T capture-pane -p -t safe)
    shown=$(grep -c '\\x1b\|\\u009b' <<<"$plain")
    if [ "$title" = clean ] && ! grep -q $'\033\[31m' <<<"$screen" && grep -q '__done__' <<<"$plain" \
        && ! grep -q '^CR' <<<"$plain" && { [ "$want_shown" = 0 ] || [ "$shown" -gt 0 ]; }; then
        ok "radiance $(cut -c1-48 <<<"$name"): title and screen unchanged ($shown lines show the escapes)"
    else
        not_ok "radiance $name: title '$title'; screen: $(head -c 600 <<<"$plain")"
    fi
}
pane_cmd() {   # pane_cmd SHOWN ARGS: radiance ARGS in the pane, then check_pane
    local want=$1
    shift
    T select-pane -t safe -T clean
    if ! run_in_pane "$R $*"; then not_ok "$* did not finish under tmux"; return; fi
    check_pane "$*" "$want"
}
for cmd in "show $WORK/evil.gguf" "show $WORK/evil-tensor.gguf" "run $WORK/evil-arch.gguf hi" "sessions show $chat_id" "sessions list" \
    "sessions search prompt" "logs show $log_id" "logs list" "logs search prompt" "sessions export $chat_id --md" \
    "chat --plain --resume $chat_id $TINY </dev/null" "tokenize -m $WORK/evil.gguf --decode $evil_ids" \
    "run $WORK/evil-out.gguf hello -n 8 --temp 0" "chat --plain $WORK/evil-out.gguf -n 8 --temp 0 <$WORK/hello.txt" \
    "pull hf:test/evil-names:Q8_0" "show hf:test/evil-names"; do
    pane_cmd 1 "$cmd"
done
# info prints what the plugins name (ops, weights, kernels), none of the
# file's strings: nothing to show, and nothing may reach the terminal.
pane_cmd 0 "info --graph $WORK/evil.gguf"
# A partial download of the hostile name, for list.
blob=$(find "$HF_HOME/hub/models--test--evil-names/blobs" -type f | head -1)
if [ -n "$blob" ]; then
    head -c 1000 "$blob" >"$blob.incomplete"
    pane_cmd 1 "list"
else
    not_ok "the pull of hf:test/evil-names left no blob: $(ls -R "$HF_HOME" | head)"
fi
pane_cmd 1 "rm hf:test/evil-names --purge"
# The full-screen chat: the model's reply, drawn by the TUI.
T select-pane -t safe -T clean
T respawn-pane -k -t safe "$PANE_ENV $R chat $WORK/evil-out.gguf -n 8 --temp 0; echo __done__; sleep 600"
for _ in $(seq 100); do T capture-pane -p -t safe | grep -q "ready" && break; sleep 0.1; done
T send-keys -t safe -l -- "hello"
T send-keys -t safe Enter
for _ in $(seq 100); do T capture-pane -p -t safe | grep -Eq '^  [0-9]+ tokens' && break; sleep 0.1; done
T capture-pane -p -t safe >"$WORK/tui.screen"
T send-keys -t safe -l -- "/quit"
T send-keys -t safe Enter
for _ in $(seq 100); do T capture-pane -p -t safe | grep -q __done__ && break; sleep 0.1; done
grep -q '\\x1b\]0;PWNED' "$WORK/tui.screen" || not_ok "the chat's reply did not show its escapes: $(cat "$WORK/tui.screen")"
check_pane "chat (full screen) on a reply holding escapes" 0

finish
