#!/usr/bin/env bash
# test_sessions.sh: the session store end to end.  `radiance sessions` on
# databases that tests/e2e/session_driver.c builds through the API; the
# reliability promises (a writer killed with SIGKILL at random times never
# corrupts the file or loses a committed write; a full disk gives one clear
# line per failed write and the writer carries on; two writers at once both
# succeed); and KV snapshots with a real model: restored exactly, and
# ignored with a notice when they come from another model, are damaged, or
# are truncated.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN
D=$(dirname "$RADIANCE_BIN")/tests/e2e/session_driver
if [ ! -x "$D" ]; then
    not_ok "session_driver is not built ($D)"
    finish
    exit 1
fi
export XDG_DATA_HOME=$WORK/data
DB=$XDG_DATA_HOME/radiance/radiance.db
json() { $D json "$@"; }

# ------------------------------------------------------------ the CLI

sid=$($D demo "$DB") && ok "demo session created" || not_ok "demo: $sid"
$D write "$DB" --seed 1 --count 150 --log "$WORK/log1" >"$WORK/w1" 2>"$WORK/e1" \
    && [ ! -s "$WORK/e1" ] && ok "driver wrote 150 iterations: $(cat "$WORK/w1")" || not_ok "driver write: $(head -3 "$WORK/e1")"
$D check "$DB" --log "$WORK/log1" >"$WORK/c1" && ok "$(cat "$WORK/c1")" || not_ok "check: $(cat "$WORK/c1")"

$R sessions list >"$WORK/list" 2>"$WORK/err"
n_sessions=$(($(wc -l <"$WORK/list") - 1))
$R sessions list --json >"$WORK/list.json"
[ "$(json "$WORK/list.json" '#')" = "$n_sessions" ] && [ "$n_sessions" -gt 2 ] \
    && ok "list and list --json agree: $n_sessions sessions" || not_ok "list: $n_sessions rows, json $(json "$WORK/list.json" '#')"
[ "$($R sessions | wc -l)" = "$((n_sessions + 1))" ] && ok "plain 'sessions' lists" || not_ok "plain sessions"
grep -q "^${sid:0:8} .*What is the capital of France?" "$WORK/list" && ok "list shows id prefix and title" \
    || not_ok "list row for the demo: $(head -3 "$WORK/list")"
[ "$($R sessions list -n 2 | wc -l)" = 3 ] && ok "list -n 2" || not_ok "list -n"

$R sessions show "${sid:0:6}" >"$WORK/show" 2>"$WORK/err"
grep -q "^session   $sid$" "$WORK/show" && grep -q "(version 2 of 2)" "$WORK/show" \
    && grep -q "It is \*\*Paris\*\*." "$WORK/show" && ! grep -q "Paris, probably" "$WORK/show" \
    && grep -q "3 on the current branch" "$WORK/show" \
    && ok "show by a 6-character prefix: the current branch, the fork marked" \
    || not_ok "show: $(cat "$WORK/show" "$WORK/err" | head -20)"
expect_fail "show an unknown id exits 3" 3 "no session 'fffffff0'" $R sessions show fffffff0
expect_fail "show a non-hex id exits 3" 3 "hexadecimal" $R sessions show zz
expect_fail "export wants --md or --json" 2 "export wants --md or --json" $R sessions export "$sid"
expect_fail "an unknown subcommand exits 2" 2 "unknown subcommand 'frob'" $R sessions frob
expect_fail "an unknown flag exits 2" 2 "'--frob'" $R sessions list --frob

$R sessions export "$sid" --md >"$WORK/demo.md"
cat >"$WORK/want.md" <<EOF
## System

You are terse.

## User

What is the capital of France?

## Assistant

<details><summary>Reasoning</summary>

The capital is well known.

</details>

It is **Paris**.

EOF
sed -n '/^## System/,$p' "$WORK/demo.md" | cmp -s - "$WORK/want.md" && head -1 "$WORK/demo.md" | grep -q "^# What is the capital of France?$" \
    && grep -q "1 in forks" "$WORK/demo.md" && ok "export --md renders the current branch" \
    || not_ok "export --md: $(diff <(sed -n '/^## System/,$p' "$WORK/demo.md") "$WORK/want.md" | head -20)"
$R sessions export "${sid:0:10}" --json -o "$WORK/demo.json" >"$WORK/out"
[ ! -s "$WORK/out" ] && ok "export -o writes the file, nothing on stdout" || not_ok "export -o printed: $(head -c 200 "$WORK/out")"
if [ "$(json "$WORK/demo.json" messages.#)" = 3 ] && [ "$(json "$WORK/demo.json" forks.#)" = 1 ] \
    && [ "$(json "$WORK/demo.json" messages.2.content)" = "It is **Paris**." ] \
    && [ "$(json "$WORK/demo.json" forks.0.content)" = "Paris, probably." ] \
    && [ "$(json "$WORK/demo.json" forks.0.parent_id)" = "$(json "$WORK/demo.json" messages.1.id)" ] \
    && [ "$(json "$WORK/demo.json" messages.2.usage.completion_tokens)" = 6 ] \
    && [ "$(json "$WORK/demo.json" messages.2.sampler.temperature)" = 0 ] \
    && [ "$(json "$WORK/demo.json" leaf_id)" = "$(json "$WORK/demo.json" messages.2.id)" ]; then
    ok "export --json -o: the current branch, the fork with its parent, usage and sampler"
else
    not_ok "export --json: $(head -c 600 "$WORK/demo.json")"
fi
# Every session exports, forks included, to as many messages as it holds.
bad=0
for i in $(seq 0 $((n_sessions - 1))); do
    id=$(json "$WORK/list.json" "$i.id")
    $R sessions export "$id" --json >"$WORK/e.json" || bad=$((bad + 1))
    on=$(json "$WORK/e.json" messages.#) off=$(json "$WORK/e.json" forks.#)
    [[ "$on$off" =~ ^[0-9]+$ ]] && [ $((on + off)) = "$(json "$WORK/list.json" "$i.messages")" ] || bad=$((bad + 1))
    $R sessions export "$id" --md | grep -q "^# " || bad=$((bad + 1))
done
[ $bad = 0 ] && ok "all $n_sessions sessions export (md and json; branch + forks = every message)" || not_ok "$bad exports wrong"

$R sessions search capital france >"$WORK/search" && grep -q "^${sid:0:8} .*user .*\[capital\] of \[France\]" "$WORK/search" \
    && ok "search finds every word, marks the terms" || not_ok "search: $(cat "$WORK/search")"
$R sessions search "zürich" --json >"$WORK/search.json" && [ "$(json "$WORK/search.json" '#')" -gt 0 ] \
    && ok "search --json (UTF-8 term): $(json "$WORK/search.json" '#') hits" || not_ok "search --json"
$R sessions search 'AND "(' -n 3 >/dev/null 2>&1 && ok "FTS syntax in the words is literal" || not_ok "search with FTS syntax failed"
[ -z "$($R sessions search nosuchwordanywhere 2>/dev/null)" ] && ok "search with no hit prints nothing on stdout" || not_ok "search miss"

victim=$(json "$WORK/list.json" 1.id)
$R sessions rm "${victim:0:9}" | grep -q "^removed $victim" && ok "rm by prefix" || not_ok "rm"
expect_fail "the removed session is gone" 3 "no session" $R sessions show "$victim"
$R sessions search capital | grep -q "${sid:0:8}" && [ "$($R sessions list | wc -l)" = "$n_sessions" ] \
    && ok "the others stay (list and search)" || not_ok "after rm"
$D check "$DB" >"$WORK/c2" && ok "after rm: $(cat "$WORK/c2")" || not_ok "after rm: $(cat "$WORK/c2")"

# ------------------------------------------------------------ SIGKILL at random times

KDB=$WORK/kill/radiance.db
kills=0 good=0
for i in $(seq 1 30); do
    $D write "$KDB" --seed "$i" --log "$WORK/klog" >/dev/null 2>>"$WORK/kerr" &
    pid=$!
    # 20..420 ms: opening, schema creation (the first time), and every kind of write.
    sleep "0.$(printf '%03d' $((20 + RANDOM % 400)))"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
    if $D check "$KDB" --log "$WORK/klog" >"$WORK/kc" 2>&1; then good=$((good + 1)); else
        not_ok "after kill $i: $(cat "$WORK/kc")"
        break
    fi
done
[ "$kills" -ge 28 ] && [ "$good" = 30 ] && [ ! -s "$WORK/kerr" ] \
    && ok "30 SIGKILLs at random times ($kills mid-run): integrity_check ok every time, no committed write lost; $(tail -c 200 "$WORK/kc")" \
    || not_ok "kill loop: $kills kills, $good checks ok; $(head -3 "$WORK/kerr")"
XDG_DATA_HOME=$WORK/kill_data
mkdir -p "$WORK/kill_data" && ln -s "$WORK/kill" "$WORK/kill_data/radiance"
XDG_DATA_HOME=$WORK/kill_data $R sessions list >/dev/null && ok "the killed writers' database lists" || not_ok "list after kills"
export XDG_DATA_HOME=$WORK/data

# ------------------------------------------------------------ a full disk

# A 3 MiB tmpfs with a 1 MB filler (needs mount rights: CI runs as root);
# else SQLite's max_page_count stands in for the disk (the same SQLITE_FULL).
FULL=$WORK/full
mkdir -p "$FULL"
if mount -t tmpfs -o size=3m tmpfs "$FULL" 2>/dev/null; then
    how="a 3 MiB tmpfs"
    head -c 1000000 /dev/zero >"$FULL/filler"
    room=(--filler "$FULL/filler")
else
    how="max_page_count (no mount rights)"
    room=(--size-limit 600000)
fi
$D write "$FULL/radiance.db" --seed 7 --count 300 --budget 67108864 --free-after 3 "${room[@]}" >"$WORK/fout" 2>"$WORK/ferr"
status=$?
# "writes: N ok, N failed, N ok after making room"
read -r _ _ _ nfail _ nafter _ < <(tr -d ',' <"$WORK/fout")
others=$(grep -v "^driver: made room" "$WORK/ferr" | grep -Evc "^radiance: $FULL/radiance.db: [A-Za-z ]+: database or disk is full$")
[ $status = 0 ] && [ "${nfail:-0}" -gt 0 ] && [ "${nafter:-0}" -gt 0 ] && [ "$others" = 0 ] \
    && ok "full disk ($how): $nfail failed writes, each one line 'database or disk is full'; the writer went on ($nafter ok after room was made)" \
    || not_ok "full disk ($how): status $status, $(cat "$WORK/fout"); $others other lines: $(grep -v 'disk is full' "$WORK/ferr" | head -3)"
$D check "$FULL/radiance.db" >"$WORK/fc" && ok "full disk: $(cat "$WORK/fc")" || not_ok "full disk check: $(cat "$WORK/fc")"
mountpoint -q "$FULL" && umount "$FULL"

# ------------------------------------------------------------ two writers at once

TDB=$WORK/two/radiance.db
# Both start on a file that does not exist yet: both create the schema.
$D write "$TDB" --seed 101 --count 250 --log "$WORK/t1" >"$WORK/o1" 2>"$WORK/x1" &
p1=$!
$D write "$TDB" --seed 202 --count 250 --log "$WORK/t2" >"$WORK/o2" 2>"$WORK/x2" &
p2=$!
readers=0
mkdir -p "$WORK/two_data" && ln -s "$WORK/two" "$WORK/two_data/radiance"
while kill -0 $p1 2>/dev/null || kill -0 $p2 2>/dev/null; do
    XDG_DATA_HOME=$WORK/two_data $R sessions list --json >/dev/null 2>>"$WORK/x3" && readers=$((readers + 1))
done
wait $p1
s1=$?
wait $p2
s2=$?
cat "$WORK/t1" "$WORK/t2" >"$WORK/t12"
[ $s1 = 0 ] && [ $s2 = 0 ] && [ ! -s "$WORK/x1" ] && [ ! -s "$WORK/x2" ] && [ ! -s "$WORK/x3" ] \
    && grep -q "250 ok, 0 failed" "$WORK/o1" && grep -q "250 ok, 0 failed" "$WORK/o2" \
    && ok "two writers at once: both 250/250 ok; $readers concurrent 'sessions list' all ok" \
    || not_ok "two writers: $s1/$s2 $(cat "$WORK/o1" "$WORK/o2" "$WORK/x1" "$WORK/x2" "$WORK/x3" | head -5)"
$D check "$TDB" --log "$WORK/t12" >"$WORK/tc" && ok "two writers: $(cat "$WORK/tc")" || not_ok "two writers check: $(cat "$WORK/tc")"

# ------------------------------------------------------------ KV snapshots with a real model

SDB=$WORK/snap/radiance.db
$R convert "$FIXTURES/llama" -o "$WORK/llama.rad" --quant f32 2>/dev/null
$R convert "$FIXTURES/qwen3" -o "$WORK/qwen3.rad" --quant f32 2>/dev/null
T40=$(cut -d, -f1-40 "$FIXTURES/llama/tokens.txt")
T30=$(cut -d, -f1-30 "$FIXTURES/llama/tokens.txt")
T20=$(cut -d, -f1-20 "$FIXTURES/llama/tokens.txt")
$D engine-save "$SDB" "$WORK/llama.rad" "$T30" >/dev/null
out=$($D engine-check "$SDB" "$WORK/llama.rad" "$T40")
[[ "$out" == *"restored 30 of 40; evaluated 10; max|logit diff| 0"* ]] \
    && ok "resume: 30 positions restored, 10 evaluated, logits equal a fresh run" || not_ok "restore: $out"
out=$($D engine-check "$SDB" "$WORK/llama.rad" "$T30")
[[ "$out" == *"restored 29 of 30; evaluated 1;"* ]] && ok "a snapshot of the whole prompt: truncated by one for logits" || not_ok "$out"
out=$($D engine-check "$SDB" "$WORK/qwen3.rad" "$T40")
[[ "$out" == *"notice: the KV snapshot of this conversation was made by another model"* && "$out" == *"restored 0 of 40"* ]] \
    && ok "another model: ignored with a notice, evaluated from the start" || not_ok "other model: $out"
# The qwen3 blob filed under llama's identity (a swapped file, a bug): the engine refuses it.
rm -rf "$WORK/snap"
out=$($D engine-save "$SDB" "$WORK/qwen3.rad" "$T30" --as-model "$($D model-id - "$WORK/llama.rad")" 2>&1; $D engine-check "$SDB" "$WORK/llama.rad" "$T40")
[[ "$out" == *"KV snapshot ignored (KV snapshot: made by another model or another build of it)"* && "$out" == *"restored 0 of 40"* ]] \
    && ok "another model's blob under this model's id: the engine refuses it, notice" || not_ok "swapped blob: $out"
rm -rf "$WORK/snap"
$D engine-save "$SDB" "$WORK/llama.rad" "$T20" >/dev/null
$D engine-save "$SDB" "$WORK/llama.rad" "$T30" >/dev/null
$D damage "$SDB" zstd >/dev/null
out=$($D engine-check "$SDB" "$WORK/llama.rad" "$T40")
[[ "$out" == *"KV snapshot of 30 tokens ignored: corrupt (zstd: "* && "$out" == *"restored 0 of 40"* ]] \
    && ok "a damaged blob: the zstd checksum catches it, notice" || not_ok "zstd damage: $out"
rm -rf "$WORK/snap"
$D engine-save "$SDB" "$WORK/llama.rad" "$T30" >/dev/null
$D damage "$SDB" truncate >/dev/null
out=$($D engine-check "$SDB" "$WORK/llama.rad" "$T40")
[[ "$out" == *"KV snapshot ignored (KV snapshot: truncated)"* && "$out" == *"restored 0 of 40"* ]] \
    && ok "a truncated engine blob: the engine refuses it, notice" || not_ok "truncated: $out"

finish
