#!/usr/bin/env bash
# test_hostile_text.sh: a hostile tokenizer through the command line (issue
# 12, items 1 and 6): one ill-formed byte in a .rad's split regex, a regex
# that backtracks without bound, one slow at every position.  Each is one
# line on stderr naming the file and the field or limit, exit 4 (the model is
# unusable), no crash, in seconds.  (Before: exit 139; exit 5 with a message
# naming neither; the slow one ran to the end, taking the square of the
# text's length.)
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN

# The llama fixture converted, then its tokenizer.bin's split regex given one
# 0xFF byte (the blob comes first in the container; the regex also appears in
# the tokenizer.json blob after it).
$R convert "$FIXTURES/llama" -o "$WORK/good.rad" --quant f32 2>/dev/null || not_ok "convert the llama fixture"
python3 - "$WORK/good.rad" "$WORK/bad.rad" <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
at = data.find(b"(?i:'s|'t")
assert at > 0
data[at + 5] = 0xFF
open(sys.argv[2], "wb").write(data)
EOF
expect_fail "tokenize: one ill-formed byte in the split regex" 4 \
    "bad.rad: tokenizer.bin: pre_tokenizer step 0: its pattern is not valid UTF-8" \
    $R tokenize -m "$WORK/bad.rad" hello
expect_fail "run: one ill-formed byte in the split regex" 4 \
    "bad.rad: tokenizer.bin: pre_tokenizer step 0: its pattern is not valid UTF-8" \
    $R run -m "$WORK/bad.rad" -n 1 hello
# show describes the file, says its tokenizer is invalid (it used to print
# "tokenizer none" and exit 0) and gives run's reason and exit status.
expect_show_refuses "show: one ill-formed byte in the split regex" 4 \
    "bad.rad: tokenizer.bin: pre_tokenizer step 0: its pattern is not valid UTF-8" \
    "$WORK/bad.rad" "^tokenizer +invalid"

# chat loads the tokenizer as run does: refused the same way, before a turn.
expect_fail "chat: one ill-formed byte in the split regex" 4 \
    "bad.rad: tokenizer.bin: pre_tokenizer step 0: its pattern is not valid UTF-8" \
    bash -c "echo hello | RADIANCE_CONFIG=/dev/null XDG_DATA_HOME='$WORK/data' $R chat --plain -m '$WORK/bad.rad' -n 1"

# What the user types or pipes into chat is checked as UTF-8 by the chat
# itself: a message or a system prompt that is not is refused with one line
# (the byte, the offset), never sent or stored; the next line goes on.
# Before, the raw bytes were stored, and sessions export --json dropped that
# message's content without a word.
export RADIANCE_CONFIG=/dev/null XDG_DATA_HOME="$WORK/data"
printf 'caf\xe9 au lait\n/system be \xff brief\nhello\n' \
    | $R chat --plain -m "$WORK/good.rad" -n 2 --temp 0 >"$WORK/chat.out" 2>"$WORK/chat.err"
st=$?
sid=$($R sessions list 2>/dev/null | awk 'NR == 2 { print $1 }')
$R sessions export "$sid" --json >"$WORK/chat.json" 2>/dev/null
[ $st = 0 ] && grep -q "the message is not valid UTF-8 (byte 0xE9 at offset 3): not sent" "$WORK/chat.err" \
    && grep -q "the system prompt is not valid UTF-8 (byte 0xFF at offset 3)" "$WORK/chat.err" \
    && [ "$(grep -c . "$WORK/chat.err")" = 2 ] \
    && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); m=j['messages']
sys.exit(0 if [x['role'] for x in m] == ['user', 'assistant'] and m[0]['content'] == 'hello' and j['system_prompt'] is None else 1)" "$WORK/chat.json" \
    && ok "chat refuses a message and a system prompt that are not UTF-8, one line each; only 'hello' is sent and stored" \
    || not_ok "chat UTF-8: exit $st, $(cat "$WORK/chat.err"), $(head -c 300 "$WORK/chat.json")"
# A session stored before that check (raw bytes in a message and the title,
# planted here with SQLite) exports every message with its content, each
# ill-formed byte as U+FFFD; json_string used to refuse it, and the key
# vanished from the export.
python3 - "$WORK/data/radiance/radiance.db" "$sid" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE messages SET content = CAST(X'636166E920FF6C6169' AS TEXT) WHERE role = 'user' AND session_id LIKE ?", (sys.argv[2] + "%",))
db.execute("UPDATE sessions SET title = CAST(X'636166E9' AS TEXT) WHERE id LIKE ?", (sys.argv[2] + "%",))
db.commit()
PY
$R sessions export "$sid" --json >"$WORK/old.json" 2>"$WORK/err"
st=$?
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); m=j['messages']
sys.exit(0 if m[0]['content'] == 'caf\ufffd \ufffdlai' and j['title'] == 'caf\ufffd' and all('content' in x for x in m) else 1)" "$WORK/old.json" \
    && [ $st = 0 ] && ok "sessions export --json of a message stored with raw bytes keeps it, each bad byte as U+FFFD" \
    || not_ok "export of raw bytes: exit $st, $(cat "$WORK/err") $(head -c 400 "$WORK/old.json")"
expect_fail "chat --system that is not UTF-8" 2 "the system prompt \(--system\) is not valid UTF-8 \(byte 0xFF at offset 3\)" \
    bash -c "echo hi | $R chat --plain -m '$WORK/good.rad' -n 1 -s \"\$(printf 'sys\xff')\""
unset RADIANCE_CONFIG XDG_DATA_HOME

# The fixture's tokenizer.json with another split regex.
hostile() {
    mkdir -p "$WORK/$1"
    python3 - "$FIXTURES/llama/tokenizer.json" "$WORK/$1/tokenizer.json" "$2" <<'EOF'
import json, sys
tok = json.load(open(sys.argv[1], encoding="utf-8"))
split = tok["pre_tokenizer"]["pretokenizers"][0]
assert split["type"] == "Split"
split["pattern"] = {"Regex": sys.argv[3]}
json.dump(tok, open(sys.argv[2], "w", encoding="utf-8"))
EOF
}

hostile backtrack '(?:a|a)*c|[^a]+'
printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' >"$WORK/a40.txt"
start=$(date +%s)
expect_fail "a regex that backtracks without bound" 4 "backtrack/tokenizer.json: the pre_tokenizer regex of step 0 went past RAD_LIMIT_REGEX_MATCH" \
    timeout 60 $R tokenize --tokenizer "$WORK/backtrack/tokenizer.json" <"$WORK/a40.txt"

hostile slow 'a(?=[ab]*(?:y|z))|[^ab]+'
python3 -c 'import sys; sys.stdout.write("ab" * 100000)' >"$WORK/ab.txt"
expect_fail "a regex slow at every position" 4 "slow/tokenizer.json: encoding 200000 bytes of text went past RAD_LIMIT_ENCODE_BASE_MS" \
    timeout 60 $R tokenize --tokenizer "$WORK/slow/tokenizer.json" <"$WORK/ab.txt"
took=$(($(date +%s) - start))
# The budget is 1 s + 1 s for the slow one, in CPU time; wall time on a
# loaded machine may be several times that, never a minute.
[ "$took" -lt 30 ] && ok "both refused in $took s" || not_ok "refusals took $took s"

# The same tokenizer.json with its own regex still tokenizes.
hostile fine "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"])' "$FIXTURES/llama/tokenizer.json")"
want=$($R tokenize --tokenizer "$FIXTURES/llama/tokenizer.json" "hello world, it's 2024")
got=$($R tokenize --tokenizer "$WORK/fine/tokenizer.json" "hello world, it's 2024")
[ -n "$want" ] && [ "$got" = "$want" ] && ok "the rewritten fixture still tokenizes" || not_ok "fine: '$got' vs '$want'"

finish
