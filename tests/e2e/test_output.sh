#!/usr/bin/env bash
# test_output.sh: what radiance writes, when the destination fails and when
# what it prints is hostile (issue 12, items 4, 5 and 7).
#
#   - A failed write is exit status 1 with the reason, never 0: stdout on
#     /dev/full or closed, for run, run --json, sessions export, list
#     --json, tokenize; `sessions export -o` on a full disk leaves no file.
#   - An interrupted conversion removes its partial output (SIGINT 130,
#     SIGTERM 143); after SIGKILL the next conversion of the same output
#     sweeps the stale partial and says so.
#   - Text from model files and from the database reaches the terminal as
#     visible escapes: a GGUF whose strings hold ESC, OSC, BEL, CR and C1
#     bytes, shown by every command that prints file or model text under
#     tmux, leaves the terminal's title and screen as they were.
. "$(dirname "$0")/lib.sh"
R="$RADIANCE_BIN"
MODELS="${RADIANCE_MODELS_DIR:-$HOME/.cache/radiance/models}"
# The conversions to interrupt: the largest model fetched, so a signal lands
# while the partial file is being written.
M="$MODELS/gemma-3-270m-q4_k_m.gguf"
[ -f "$M" ] || M="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
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
mountpoint -q "$FULL" && umount "$FULL"
$R sessions export "$sid" --md -o "$WORK/good.md" && grep -q "a logged exchange" "$WORK/good.md" \
    && ok "export -o writes the file when there is room" || not_ok "export -o: $(ls -la "$WORK")"

# ------------------------------------------------------------ interrupted conversions
if [ -f "$M" ]; then
    for sig in INT TERM; do
        rm -f "$WORK/conv.rad"*
        $R convert "$M" -o "$WORK/conv.rad" >/dev/null 2>"$WORK/conv.err" &
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
    $R convert "$M" -o "$WORK/conv.rad" >/dev/null 2>&1 &
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
    $R convert "$M" -o "$WORK/conv.rad" >/dev/null 2>&1 &
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
    [ "${CI:-}" = true ] && not_ok "the SmolLM2 model is missing: $M" || echo "SKIP interrupted conversions: $M is missing"
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
# A stored exchange and a chat whose texts hold the same bytes.
python3 -c "import sys; sys.stdout.write('prompt ' + sys.argv[1].encode().decode('unicode_escape'))" "$EVIL" >"$WORK/evil.txt"
$R run "$TINY" -n 2 "$(cat "$WORK/evil.txt")" >/dev/null 2>&1
printf '%s\n/quit\n' "$(cat "$WORK/evil.txt")" | $R chat --plain "$TINY" -n 2 >/dev/null 2>&1
chat_id=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
evil_ids=$($R tokenize -m "$TINY" --no-special "$(cat "$WORK/evil.txt")")
log_id=$($R logs list 2>/dev/null | awk 'NR == 2 { print $1 }')
SOCK="$WORK/tmux.sock"
T() { tmux -S "$SOCK" "$@"; }
trap 'tmux -S "$SOCK" kill-server >/dev/null 2>&1; rm -rf "$WORK"' EXIT
T -f /dev/null new-session -d -s safe -x 160 -y 50 "sleep 600"
T set-option -t safe allow-rename on 2>/dev/null
T set-window-option -t safe allow-rename on 2>/dev/null
T set-option -t safe set-titles on 2>/dev/null
T select-pane -t safe -T clean
run_in_pane() {
    T respawn-pane -k -t safe "env XDG_DATA_HOME='$XDG_DATA_HOME' XDG_STATE_HOME='$XDG_STATE_HOME' RADIANCE_CONFIG=/dev/null LANG=C.UTF-8 TERM=screen $1; echo __done__; sleep 600"
    for _ in $(seq 300); do T capture-pane -p -t safe | grep -q __done__ && return 0; sleep 0.1; done
    return 1
}
for cmd in "show $WORK/evil.gguf" "run $WORK/evil-arch.gguf hi" "sessions show $chat_id" "sessions list" \
    "sessions search prompt" "logs show $log_id" "logs list" "logs search prompt" "sessions export $chat_id --md" \
    "chat --plain --resume $chat_id $TINY </dev/null" "tokenize -m $WORK/evil.gguf --decode $evil_ids"; do
    T select-pane -t safe -T clean
    if ! run_in_pane "$R $cmd"; then not_ok "$cmd did not finish under tmux"; continue; fi
    title=$(T display-message -p -t safe '#{pane_title}')
    screen=$(T capture-pane -p -e -t safe)
    plain=$(T capture-pane -p -t safe)
    if [ "$title" = clean ] && ! grep -q 'PWNED\|C1TITLE' <<<"$title" && ! grep -q $'\033\[31m' <<<"$screen" \
        && grep -q '__done__' <<<"$plain" && ! grep -q '^CR' <<<"$plain" \
        && [ "$(grep -c '\\x1b\|\\u009b' <<<"$plain")" -gt 0 ]; then
        shown=$(grep -c '\\x1b\|\\u009b' <<<"$plain")
        ok "radiance $(cut -c1-40 <<<"$cmd"): title and screen unchanged ($shown lines show the escapes)"
    else
        not_ok "radiance $cmd: title '$title'; screen: $(head -c 600 <<<"$plain")"
    fi
done

finish
