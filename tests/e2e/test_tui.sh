#!/usr/bin/env bash
# test_tui.sh: `radiance chat` as a user meets it, with a real model.
#
# The full-screen UI runs in a tmux pane; keys go in with send-keys and the
# screen comes back with capture-pane.  Every wait polls the pane with a
# deadline, so a hang fails the check instead of blocking the run.  Checked:
# the time to open the UI, a two-turn chat (the replies on screen are the
# ones the session database recorded), multi-line input and bracketed paste,
# /retry and /edit, /help and /stats, /set,
# Ctrl-C mid-reply (the partial reply stays, marked, and the chat goes on),
# a resize (re-wrapped, still working), /copy (OSC 52 reaches tmux's
# buffer), quitting, resuming with --continue from the KV snapshot (/stats
# shows only the new turn's tokens evaluated, the rest reused), NO_COLOR,
# TERM=dumb and a pipe (line mode, saved too).  And the fixes of issue 13:
# /clear resets the context meter; /help keeps its two columns at 50
# columns; a reply cut by -n inside a character ends without U+FFFD, on
# screen and in the session; a message too long for the context is refused
# without dropping the earlier turns or staying in the session (with Gemma
# 3, whose turns must alternate, the next message still gets a reply); an
# idle Ctrl-C clears the input and says how to leave, a second leaves with
# 130; TERM=dumb line mode writes no escape sequence at all (captured with
# script(1)); `sessions list` names the model by its file name.
#
# Needs tmux and ~/.cache/radiance/models/SmolLM2-135M-Instruct.Q4_1.gguf
# (tests/models/fetch.sh).  Without them the script says so and skips; with
# CI=true it fails instead.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN
MODEL=${RADIANCE_TUI_MODEL:-$HOME/.cache/radiance/models/SmolLM2-135M-Instruct.Q4_1.gguf}

missing=""
command -v tmux >/dev/null 2>&1 || missing="tmux is not installed"
[ -f "$MODEL" ] || missing="${missing:+$missing; }$MODEL is missing (tests/models/fetch.sh)"
if [ -n "$missing" ]; then
    if [ "${CI:-}" = true ]; then
        not_ok "test_tui: $missing"
        # -------------------------------------------------------- a reply cut inside a character
# A fresh chat: SmolLM2's greedy answer to this starts with katakana whose
# bytes span tokens, and -n 3 ends inside one (U+FFFD before the fix).
rm -rf "$WORK/data/radiance"
start_chat "$MODEL" --temp 0 -n 3 -c 2048
wait_ready 30 || not_ok "the chat for the cut reply did not open: $(pane | tail -5)"
footers=0
send "Translate 'thank you' into Japanese."
wait_count 60 $((footers + 1)) "$FOOTER" && wait_ready 10 || not_ok "the cut reply: $(pane | tail -6)"
cut_reply=$(pane | grep -A3 "› Translate 'thank you' into Japanese." | sed -n 3p)
session=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
stored=$($R sessions export "$session" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['messages'][-1]['content'])")
if [ -n "$stored" ] && ! grep -q $'\xef\xbf\xbd' <<<"$cut_reply$stored"; then
    ok "a reply cut by -n inside a character ends without U+FFFD (screen '$cut_reply', session '$stored')"
else
    not_ok "cut reply: screen '$cut_reply', session '$stored'"
fi
$R sessions list | awk 'NR == 2' | grep -q "SmolLM2-135M-Instruct.Q4_1.gguf" \
    && ok "sessions list names the model by its file name" || not_ok "sessions list: $($R sessions list | head -3)"

send "/quit"
wait_exit 20 || not_ok "the cut-reply chat did not quit"

finish
        exit 1
    fi
    echo "SKIP test_tui.sh: $missing"
    exit 0
fi

SOCK="$WORK/tmux.sock"
T() { tmux -S "$SOCK" "$@"; }
trap 'tmux -S "$SOCK" kill-server >/dev/null 2>&1; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/data" "$WORK/state" "$WORK/config"
# the chat's files, and nothing of the user's
export XDG_DATA_HOME="$WORK/data" XDG_STATE_HOME="$WORK/state" XDG_CONFIG_HOME="$WORK/config" LANG=C.UTF-8
unset RADIANCE_CONFIG RADIANCE_MODEL RADIANCE_TEMP RADIANCE_SEED RADIANCE_CTX NO_COLOR
FLAGS="--temp 0 -n 16 -c 2048"
WIDTH=100
HEIGHT=40

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
pane() { T capture-pane -p -t chat 2>/dev/null || echo "(no pane: $(T ls 2>&1 | head -1); chat stderr: $(tail -c 300 "$WORK/chat.err" 2>/dev/null))"; }
status_row() { pane | tail -n 2 | head -n 1; }

# wait_until SECONDS CMD...: poll CMD every 0.1 s until it succeeds.
wait_until() {
    local end=$(( $(now_ms) + $1 * 1000 ))
    shift
    while [ "$(now_ms)" -lt "$end" ]; do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}
pane_shows() { pane | grep -Eq -- "$1"; }
pane_count_at_least() { [ "$(pane | grep -Ec -- "$2")" -ge "$1" ]; }
status_ready() { status_row | grep -q "ready *$"; }
exit_written() { [ -s "$WORK/exit" ]; }
# wait_for SECONDS PATTERN: until the pane shows PATTERN (grep -E).
wait_for() { wait_until "$1" pane_shows "$2"; }
# wait_count SECONDS N PATTERN: until N lines of the pane match.
wait_count() { wait_until "$1" pane_count_at_least "$2" "$3"; }
# wait_ready SECONDS: the status line says ready (no reply running).
wait_ready() { wait_until "$1" status_ready; }
# wait_exit SECONDS: the chat process ended; its status is in $WORK/exit.
wait_exit() { wait_until "$1" exit_written; }
send() { T send-keys -t chat -l -- "$1"; T send-keys -t chat Enter; }
# start_chat ARGS...: radiance chat in a fresh pane (extra env in $CHAT_ENV).
start_chat() {
    rm -f "$WORK/exit"
    T kill-server >/dev/null 2>&1
    rm -f "$SOCK"       # a server still on its way out must not take the new session
    T -f /dev/null new-session -d -s chat -x "$WIDTH" -y "$HEIGHT" \
        "env ${CHAT_ENV:-} $R chat $* 2>>$WORK/chat.err; echo \$? >$WORK/exit; sleep 600"
    T set-option -g set-clipboard on
}
# Lines of reply footers ("  16 tokens · 5.1 tok/s · ...") on screen.
FOOTER='^  [0-9]+ tokens'
# The first two words of a reply, as they show at the start of its first line.
first_words() { printf '%s\n' "$1" | sed -n '/[^[:space:]]/{p;q}' | tr -d '*_`#>' | awk '{print $1, $2}'; }

# -------------------------------------------------------- line mode through a pipe
printf 'What is the capital of France?\n/quit\n' | $R chat --plain "$MODEL" $FLAGS >"$WORK/pipe1.out" 2>"$WORK/pipe1.err"
st=$?
[ $st -eq 0 ] && [ -s "$WORK/pipe1.out" ] && ok "line mode through a pipe: a reply, exit 0" \
    || not_ok "line mode through a pipe: exit $st, stdout '$(head -c 200 "$WORK/pipe1.out")', stderr '$(head -c 300 "$WORK/pipe1.err")'"
grep -q $'\033' "$WORK/pipe1.out" && not_ok "line mode through a pipe wrote escape codes" || ok "line mode through a pipe: no escape codes"
$R sessions show "$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')" 2>/dev/null | grep -qF "$(head -n 1 "$WORK/pipe1.out")" \
    && ok "line mode saved the chat as a session, reply included" || not_ok "line mode session: $($R sessions list 2>&1 | head -3)"
rm -rf "$WORK/data/radiance"     # the TUI starts with no saved sessions

# -------------------------------------------------------- open, two turns
t0=$(now_ms)
start_chat "$MODEL" $FLAGS
if wait_ready 20; then
    open_ms=$(( $(now_ms) - t0 ))
    ok "the UI opens (status line ready after ${open_ms} ms, tmux start included)"
else
    not_ok "the UI did not open in 20 s: $(pane | tail -5)"
    # -------------------------------------------------------- a reply cut inside a character
# A fresh chat: SmolLM2's greedy answer to this starts with katakana whose
# bytes span tokens, and -n 3 ends inside one (U+FFFD before the fix).
rm -rf "$WORK/data/radiance"
start_chat "$MODEL" --temp 0 -n 3 -c 2048
wait_ready 30 || not_ok "the chat for the cut reply did not open: $(pane | tail -5)"
footers=0
send "Translate 'thank you' into Japanese."
wait_count 60 $((footers + 1)) "$FOOTER" && wait_ready 10 || not_ok "the cut reply: $(pane | tail -6)"
cut_reply=$(pane | grep -A3 "› Translate 'thank you' into Japanese." | sed -n 3p)
session=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
stored=$($R sessions export "$session" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['messages'][-1]['content'])")
if [ -n "$stored" ] && ! grep -q $'\xef\xbf\xbd' <<<"$cut_reply$stored"; then
    ok "a reply cut by -n inside a character ends without U+FFFD (screen '$cut_reply', session '$stored')"
else
    not_ok "cut reply: screen '$cut_reply', session '$stored'"
fi
$R sessions list | awk 'NR == 2' | grep -q "SmolLM2-135M-Instruct.Q4_1.gguf" \
    && ok "sessions list names the model by its file name" || not_ok "sessions list: $($R sessions list | head -3)"

send "/quit"
wait_exit 20 || not_ok "the cut-reply chat did not quit"

finish
    exit 1
fi
status_row | grep -q "ctx 0/2048" && ok "status line: model and context meter" || not_ok "status line: $(status_row)"

send "What is the capital of France?"
wait_count 90 1 "$FOOTER" && wait_ready 10 || not_ok "first reply did not finish: $(pane | tail -8)"
send "And of Germany?"
wait_count 90 2 "$FOOTER" && wait_ready 10 || not_ok "second reply did not finish: $(pane | tail -8)"
# What the model said, as the session recorded it (saved as the chat goes):
# the screen must show those replies.
session=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
replies=$($R sessions show "$session" 2>/dev/null | awk '/^\[assistant\]/ { take = 1; next } take && NF { print; take = 0 }')
reply1=$(first_words "$(sed -n 1p <<<"$replies")")
reply2=$(first_words "$(sed -n 2p <<<"$replies")")
[ -n "$reply1" ] && [ -n "$reply2" ] || not_ok "the session has no replies: $($R sessions show "$session" 2>&1 | head -20)"
screen=$(pane)
if grep -qF -- "$reply1" <<<"$screen" && grep -qF -- "$reply2" <<<"$screen" \
    && grep -qF "› What is the capital of France?" <<<"$screen" && grep -qF "› And of Germany?" <<<"$screen"; then
    ok "two-turn chat: both turns and both replies on screen ('$reply1' ..., '$reply2' ...)"
else
    not_ok "two-turn chat: expected replies starting '$reply1' and '$reply2'; screen:
$screen"
fi
status_row | grep -Eq "ctx [1-9][0-9]*/2048 .*tok/s" && ok "status line: context used and tokens/s after a reply" \
    || not_ok "status line after replies: $(status_row)"

# -------------------------------------------------------- multi-line input, paste, Ctrl-C on a draft
T send-keys -t chat -l "first line"
T send-keys -t chat C-j
T send-keys -t chat -l "second line"
T set-buffer -- $'pasted one\npasted two'
T paste-buffer -p -t chat          # bracketed: the newline in it must not send
sleep 0.5
input=$(pane | tail -n 3)
if grep -q "^› first line" <<<"$input" && grep -q "^  second linepasted one" <<<"$input" \
    && grep -q "^  pasted two" <<<"$input" && [ "$(pane | grep -Ec "$FOOTER")" -eq 2 ]; then
    ok "Ctrl-J and a bracketed paste give a multi-line input, not sent"
else
    not_ok "multi-line input: $input"
fi
T send-keys -t chat C-c
if wait_for 5 "input cleared" && pane | tail -n 1 | grep -q "^› *$" && [ ! -s "$WORK/exit" ]; then
    ok "Ctrl-C on a draft clears it (and does not exit)"
else
    not_ok "Ctrl-C on a draft: $(pane | tail -3)"
fi

# -------------------------------------------------------- /retry, /edit
send "/retry"
sleep 0.5
wait_ready 90 && wait_count 10 2 "$FOOTER" || not_ok "/retry did not finish: $(pane | tail -8)"
send "/stats"
# the last reply is now the retry: its whole prompt came from the KV cache
# (the reply it replaced had the new turn's tokens to evaluate)
if wait_for 5 "last reply: " && pane | grep -Eq "prompt: [0-9]+ tokens, [0-4] evaluated"; then
    ok "/retry: a new reply to the last message, its prompt reused from the KV cache"
else
    not_ok "/retry: $(pane | tail -8)"
fi
send "/edit"
sleep 0.5
pane | tail -n 1 | grep -q "^› And of Germany?" && [ "$(pane | grep -Ec "$FOOTER")" -eq 1 ] \
    && ok "/edit takes the last message back into the input" || not_ok "/edit: $(pane | tail -4)"
T send-keys -t chat C-c
wait_for 5 "input cleared" || not_ok "clearing the edited message"

# -------------------------------------------------------- slash commands
send "/help"
wait_for 5 "/retry" && wait_for 5 "Alt-Enter, Ctrl-J" && ok "/help lists commands and keys" || not_ok "/help: $(pane | tail -12)"
send "/stats"
wait_for 5 "prompt: [0-9]+ tokens, [0-9]+ evaluated" && ok "/stats reports the last reply's prompt tokens" \
    || not_ok "/stats: $(pane | tail -8)"
open_app_ms=$(pane | sed -n 's/.*ready after \([0-9]*\) ms.*/\1/p' | tail -1)
[ -n "$open_app_ms" ] && echo "     (the app's own count: ready ${open_app_ms} ms after start)"
send "/set n_predict 1200"
wait_for 5 "n_predict = 1200" && ok "/set n_predict" || not_ok "/set: $(pane | tail -4)"

# -------------------------------------------------------- Ctrl-C mid-reply
footers=$(pane | grep -Ec "$FOOTER")
send "Tell me a long story about a dragon who lives in a cave."
if wait_for 60 "generating" && sleep 0.3 && ! status_row | grep -q "ready *$"; then
    T send-keys -t chat C-c
    if wait_for 10 "interrupted \(Ctrl-C\)" && wait_ready 10 \
        && pane | grep -A1 "interrupted (Ctrl-C)" | grep -Eq "^  [1-9][0-9]* tokens"; then
        ok "Ctrl-C stops the reply: the partial text stays, marked interrupted"
    else
        not_ok "Ctrl-C mid-reply: $(pane | tail -8)"
    fi
else
    not_ok "the long reply never got going: $(pane | tail -6)"
fi
[ ! -s "$WORK/exit" ] && ok "the chat is still running after Ctrl-C" || not_ok "Ctrl-C mid-reply ended the chat: exit $(cat "$WORK/exit")"
send "/set n_predict 16"
wait_for 5 "n_predict = 16" || not_ok "/set n_predict 16"
footers=$(pane | grep -Ec "$FOOTER")
send "Say hello."
wait_count 90 $((footers + 1)) "$FOOTER" && wait_ready 10 && ok "after Ctrl-C the next message gets a reply" \
    || not_ok "no reply after Ctrl-C: $(pane | tail -8)"

# -------------------------------------------------------- resize
# A fresh conversation with a short reply, so the message stays on screen
# however many tokens the interrupted story above got to write.
send "/clear"
wait_for 5 "new conversation" || not_ok "/clear before the resize: $(pane | tail -4)"
send "/set n_predict 8"
wait_for 5 "n_predict = 8" || not_ok "/set n_predict 8"
send "Tell me a long story about a dragon who lives in a cave."
wait_count 90 1 "$FOOTER" && wait_ready 10 || not_ok "the short reply before the resize: $(pane | tail -6)"
long="› Tell me a long story about a dragon who lives in a cave."
pane | grep -qF "$long" || not_ok "at $WIDTH columns the long message should be one row"
T resize-window -t chat -x 50 -y 30
sleep 1
narrow=$(pane)
if ! grep -qF "$long" <<<"$narrow" && grep -q "^› Tell me a long story" <<<"$narrow" \
    && grep -Eq "^  ([a-z]+ )*cave\.$" <<<"$narrow" && status_row | grep -q "ready *$"; then
    ok "resize to 50 columns: the transcript is re-wrapped"
else
    not_ok "resize to 50 columns: $narrow"
fi
too_wide=0
while IFS= read -r row; do [ ${#row} -gt 50 ] && too_wide=1; done <<<"$narrow"
[ $too_wide = 0 ] && ok "after the resize no row is wider than 50 columns" || not_ok "a row is wider than 50 columns after the resize"
send "/stats"
wait_for 5 "start-up" && [ ! -s "$WORK/exit" ] && ok "after the resize the chat still works" || not_ok "after resize: $(pane | tail -5)"

T resize-window -t chat -x "$WIDTH" -y "$HEIGHT"
sleep 1
pane | grep -qF "$long" && ok "resize back: re-wrapped to one row again" || not_ok "resize back: $(pane | tail -20)"
# /help at 50 columns (tall enough to see it whole): every row is a command
# or key at column 4, or a description wrapped under its own column, never
# a description's words back at the margin.
T resize-window -t chat -x 50 -y 70
sleep 0.5
send "/help"
wait_for 5 "emacs keys" || not_ok "/help at 50 columns: $(pane | tail -5)"
helprows=$(pane | sed -n '/commands:/,/emacs keys/p' | tail -n +2)
bad=$(grep -Ev '^    [^ ]|^ {12,}[^ ]|^  keys:' <<<"$helprows" | head -3)
[ -n "$helprows" ] && [ -z "$bad" ] && ok "/help at 50 columns keeps its two columns" || not_ok "/help at 50 columns: $bad
$helprows"
T resize-window -t chat -x "$WIDTH" -y "$HEIGHT"
sleep 0.5


# -------------------------------------------------------- /clear, /copy (OSC 52 into tmux's buffer)
status_row | grep -Eq "ctx [1-9][0-9]*/2048" || not_ok "before /clear the context meter should count the chat: $(status_row)"
send "/clear"
wait_for 5 "new conversation; the last one is saved as session" && ok "/clear starts a new conversation" \
    || not_ok "/clear: $(pane | tail -4)"
status_row | grep -q "ctx 0/2048" && ok "/clear resets the context meter" || not_ok "after /clear: $(status_row)"
send "/set n_predict 48"
wait_for 5 "n_predict = 48" || not_ok "/set n_predict 48"
footers=0
send "Write a python function that adds two numbers."
wait_count 90 $((footers + 1)) "$FOOTER" && wait_ready 10 || not_ok "code reply did not finish: $(pane | tail -8)"
if pane | grep -Eq "┌ \[1\]"; then
    send "/copy 1"
    wait_for 5 "copied code block 1" || not_ok "/copy 1: $(pane | tail -3)"
    sleep 0.5
    T show-buffer 2>/dev/null | grep -q "def " && ok "/copy 1 puts the code block on the clipboard (OSC 52, seen by tmux)" \
        || not_ok "/copy 1: tmux buffer is '$(T show-buffer 2>&1 | head -c 200)'"
else
    echo "     (the model wrote no fenced code block this time; /copy not checked)"
fi

# colour is on in this pane (no NO_COLOR): the capture with escapes has colours
T capture-pane -p -e -t chat | grep -Eq $'\033\\[[0-9;]*3[0-7]m|\033\\[[0-9;]*38;5' && ok "colours on by default" \
    || not_ok "no colour codes in the colour session"

# -------------------------------------------------------- quit, then resume from the KV snapshot
send "/quit"
if wait_exit 30; then
    [ "$(cat "$WORK/exit")" = 0 ] && ok "/quit exits 0" || not_ok "/quit: exit $(cat "$WORK/exit")"
else
    not_ok "/quit did not end the chat"
fi
grep -q "^session [0-9a-f]* saved" "$WORK/chat.err" && ok "on exit the session is reported saved" || not_ok "exit message: $(cat "$WORK/chat.err")"

CHAT_ENV="NO_COLOR=1" start_chat --continue $FLAGS
if wait_for 20 "KV snapshot restored \(([0-9]+) tokens"; then
    restored=$(pane | tr -d '\n' | sed -n 's/.*KV snapshot restored (\([0-9]*\) tokens.*/\1/p')
    ok "--continue resumes the last session and restores its KV snapshot ($restored tokens)"
else
    not_ok "--continue: no snapshot restored: $(pane | head -30)"
    restored=0
fi
wait_ready 10 || not_ok "resumed chat not ready"
pane | grep -qF "› Write a python function that adds two numbers." && ok "the resumed transcript is shown" \
    || not_ok "resumed transcript: $(pane | head -10)"
send "And in Rust?"
wait_count 90 1 "$FOOTER" && wait_ready 10 || not_ok "reply in the resumed chat did not finish: $(pane | tail -6)"
send "/stats"
if wait_for 5 "prompt: [0-9]+ tokens, [0-9]+ evaluated, [0-9]+ reused"; then
    line=$(pane | grep -E "prompt: [0-9]+ tokens, [0-9]+ evaluated" | tail -1)
    p=$(sed -n 's/.*prompt: \([0-9]*\) tokens.*/\1/p' <<<"$line")
    e=$(sed -n 's/.* \([0-9]*\) evaluated.*/\1/p' <<<"$line")
    u=$(sed -n 's/.* \([0-9]*\) reused.*/\1/p' <<<"$line")
    # only the new turn ("<|im_end|>\n<|im_start|>user\nAnd in Rust?<|im_end|>\n<|im_start|>assistant\n")
    # was evaluated; everything before it came from the snapshot
    if [ "$u" -eq "$restored" ] && [ "$restored" -gt 0 ] && [ "$e" -le 24 ] && [ $((e + u)) -eq "$p" ]; then
        ok "resumed turn: prompt $p tokens, $e evaluated, $u reused = the $restored restored (no prefill of the history)"
    else
        not_ok "resumed turn: prompt $p, evaluated $e, reused $u, restored $restored"
    fi
else
    not_ok "/stats after resume: $(pane | tail -8)"
fi
T capture-pane -p -e -t chat | grep -Eq $'\033\\[[0-9;]*3[0-7]m|\033\\[[0-9;]*38;5' && not_ok "NO_COLOR: colour codes on screen" \
    || ok "NO_COLOR: no colours"

# An idle Ctrl-C clears the input and says how to leave; a second leaves with 130.
T send-keys -t chat -l "a draft"
sleep 0.3
T send-keys -t chat C-c
if wait_for 5 "Ctrl-C again leaves" && pane | tail -n 1 | grep -q "^› *$" && sleep 1 && [ ! -s "$WORK/exit" ]; then
    ok "an idle Ctrl-C clears the draft, says how to leave, and does not leave"
else
    not_ok "idle Ctrl-C: exit '$(cat "$WORK/exit" 2>/dev/null)', $(pane | tail -3)"
fi
T send-keys -t chat C-c
if wait_exit 30; then
    [ "$(cat "$WORK/exit")" = 130 ] && ok "a second Ctrl-C leaves with 130" || not_ok "second Ctrl-C: exit $(cat "$WORK/exit")"
else
    not_ok "a second idle Ctrl-C did not leave"
fi

# -------------------------------------------------------- TERM=dumb: line mode on a terminal
# script(1) records every byte radiance writes to its terminal: with
# TERM=dumb there must be no escape sequence among them (no dim banner,
# footers or /stats, no bracketed paste switch).
rm -f "$WORK/exit"
T kill-server >/dev/null 2>&1
rm -f "$SOCK"
T -f /dev/null new-session -d -s chat -x "$WIDTH" -y "$HEIGHT" \
    "script -qfec 'env TERM=dumb $R chat $MODEL $FLAGS' $WORK/dumb.typescript 2>>$WORK/chat.err; echo \$? >$WORK/exit; sleep 600"
if wait_for 20 "/help lists commands; Ctrl-D or /quit leaves"; then
    ok "TERM=dumb gives line mode"
    send "Say hello."
    wait_count 60 1 "[0-9]+ tokens" || not_ok "TERM=dumb reply: $(pane | tail -5)"
    send "/stats"
    wait_for 5 "start-up" || not_ok "TERM=dumb /stats: $(pane | tail -5)"
    send "/quit"
    wait_exit 20 && [ "$(cat "$WORK/exit")" = 0 ] && ok "line mode /quit exits 0" || not_ok "line mode /quit: $(cat "$WORK/exit" 2>/dev/null)"
    if grep -q $'\033' "$WORK/dumb.typescript"; then
        not_ok "TERM=dumb line mode wrote escape sequences: $(grep -ao $'\033[^a-zA-Z]*[a-zA-Z]' "$WORK/dumb.typescript" | sort | uniq -c | head -5)"
    else
        ok "TERM=dumb line mode writes no escape sequence (banner, reply, footer, /stats; $(wc -c <"$WORK/dumb.typescript") bytes)"
    fi
else
    not_ok "TERM=dumb: $(pane | head -5)"
fi

# -------------------------------------------------------- a message too long for the context
# With Gemma 3 (its template needs user and model turns to alternate) when
# it is fetched, else SmolLM2: two turns, then a paste far over -c 256.
LONGMODEL=${RADIANCE_TUI_GEMMA:-$HOME/.cache/radiance/models/gemma-3-270m-q4_k_m.gguf}
[ -f "$LONGMODEL" ] || LONGMODEL=$MODEL
rm -rf "$WORK/data/radiance"
start_chat "$LONGMODEL" --temp 0 -n 8 -c 256
wait_ready 30 || not_ok "the chat for the long message did not open: $(pane | tail -5)"
send "Hi."
wait_count 60 1 "$FOOTER" && wait_ready 10 || not_ok "first turn: $(pane | tail -5)"
send "Name a colour."
wait_count 60 2 "$FOOTER" && wait_ready 10 || not_ok "second turn: $(pane | tail -5)"
T set-buffer -- "$(for i in $(seq 1 120); do printf 'word%d ' "$i"; done)"
T paste-buffer -p -t chat
sleep 0.3
T send-keys -t chat Enter
wait_for 20 "too long" || not_ok "the long message was not refused: $(pane | tail -6)"
wait_ready 10
session=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
nmsg=$($R sessions show "$session" 2>/dev/null | grep -c '^\[')
shown=$($R sessions show "$session" 2>/dev/null)
if [ "$nmsg" = 4 ] && grep -qF "Hi." <<<"$shown" && grep -qF "Name a colour." <<<"$shown" \
    && ! grep -q "word7" <<<"$shown" && pane | tail -n 4 | grep -q "word119 word120"; then
    ok "a message too long for the context is refused: the earlier turns stay, the session keeps 4 messages, the text is back in the input"
else
    not_ok "refused message: $nmsg messages in the session ($(head -c 300 <<<"$shown")); $(pane | tail -8)"
fi
T send-keys -t chat C-u
sleep 0.2
T send-keys -t chat C-k
footers=$(pane | grep -Ec "$FOOTER")
send "Name a fruit."
if wait_count 60 $((footers + 1)) "$FOOTER" && ! pane | grep -q "alternate"; then
    ok "after the refusal the next message gets a reply ($(basename "$LONGMODEL"))"
else
    not_ok "after the refusal: $(pane | tail -6)"
fi
send "/quit"
wait_exit 20 || not_ok "the long-message chat did not quit"

# -------------------------------------------------------- a reply cut inside a character
# A fresh chat: SmolLM2's greedy answer to this starts with katakana whose
# bytes span tokens, and -n 3 ends inside one (U+FFFD before the fix).
rm -rf "$WORK/data/radiance"
start_chat "$MODEL" --temp 0 -n 3 -c 2048
wait_ready 30 || not_ok "the chat for the cut reply did not open: $(pane | tail -5)"
footers=0
send "Translate 'thank you' into Japanese."
wait_count 60 $((footers + 1)) "$FOOTER" && wait_ready 10 || not_ok "the cut reply: $(pane | tail -6)"
cut_reply=$(pane | grep -A3 "› Translate 'thank you' into Japanese." | sed -n 3p)
session=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
stored=$($R sessions export "$session" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['messages'][-1]['content'])")
if [ -n "$stored" ] && ! grep -q $'\xef\xbf\xbd' <<<"$cut_reply$stored"; then
    ok "a reply cut by -n inside a character ends without U+FFFD (screen '$cut_reply', session '$stored')"
else
    not_ok "cut reply: screen '$cut_reply', session '$stored'"
fi
$R sessions list | awk 'NR == 2' | grep -q "SmolLM2-135M-Instruct.Q4_1.gguf" \
    && ok "sessions list names the model by its file name" || not_ok "sessions list: $($R sessions list | head -3)"

send "/quit"
wait_exit 20 || not_ok "the cut-reply chat did not quit"

finish
