#!/usr/bin/env bash
# test_stream_experts.sh: `--stream-experts` reads a MoE model's routed
# experts from the file as routing picks them (engine/experts.c) and gives
# the tokens of the model held in memory, with the least cache (constant
# eviction) and the one the budget gives, at every read depth; a model that
# does not fit its budget streams by itself and says so on one mode: line; a
# budget below the least that streams is refused by name; the plan says how
# the experts are read, and through the page cache where O_DIRECT is refused.
. "$(dirname "$0")/lib.sh"
R=$RADIANCE_BIN

for m in "gpt_oss q8_0" "qwen3moe f32" "olmoe q8_0" "qwen2moe q8_0" "glm4moe q8_0"; do
    set -- $m
    $R convert "$FIXTURES/$1" -o "$WORK/$1.rad" --quant "$2" >/dev/null 2>&1 || not_ok "$1: convert failed"
    held=$($R run "$WORK/$1.rad" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 2>/dev/null)
    streamed=$($R run "$WORK/$1.rad" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --stream-experts --expert-cache 1K 2>/dev/null)
    [ -n "$held" ] && [ "$held" = "$streamed" ] && ok "$1 $2: streamed experts, the least cache: the held model's tokens" \
        || not_ok "$1 $2: held '$held', streamed '$streamed'"
    bad=""
    for d in 0 1 16; do
        got=$($R run "$WORK/$1.rad" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --stream-experts --io-depth $d 2>/dev/null)
        [ "$got" = "$held" ] || bad="$bad depth $d: '$got'"
    done
    [ -z "$bad" ] && ok "$1 $2: the cache from the budget, --io-depth 0, 1 and 16: the same tokens" \
        || not_ok "$1 $2: held '$held';$bad"
done

# Auto: a budget the whole model does not fit (but its dense part and one
# layer's experts do: gpt-oss's plan needs 849,568 bytes held, 802,464
# streamed with the least cache and no copies) streams the experts by
# itself and says so once; with room to spare the cache takes what the
# budget leaves after the trunk's copies.
m="$WORK/gpt_oss.rad"
held=$($R run "$m" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 2>/dev/null)
auto=$($R run "$m" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --mem-budget 820000 2>"$WORK/auto.err")
[ "$auto" = "$held" ] && [ "$(grep -c '^mode: ' "$WORK/auto.err")" = 1 ] \
    && grep -q "^mode: experts streamed from the file (the model and its buffers, .* do not fit the budget of .* from --mem-budget): a cache of 8 of 16 experts" "$WORK/auto.err" \
    && ok "a model over its budget streams its experts by itself: one mode: line, the held model's tokens" \
    || not_ok "auto: held '$held', got '$auto', stderr: $(cat "$WORK/auto.err")"
roomy=$($R run "$m" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --stream-experts --mem-budget 950000 2>"$WORK/roomy.err")
[ "$roomy" = "$held" ] && grep -q "^mode: experts streamed from the file (asked with --stream-experts): a cache of 15 of 16 experts" "$WORK/roomy.err" \
    && ok "the cache takes what the budget leaves (15 of 16 experts under 950,000 bytes)" \
    || not_ok "cache from the budget: '$roomy', $(cat "$WORK/roomy.err")"
off=$($R run "$m" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --mem-budget 820000 --no-stream-experts 2>"$WORK/off.err")
[ "$off" = "$held" ] && grep -q "^mode: weights paged from the file" "$WORK/off.err" \
    && ok "--no-stream-experts: paged from the file instead, and the mode line says so" \
    || not_ok "--no-stream-experts: '$off', $(cat "$WORK/off.err")"
printf 'stream_experts = false\n' >"$WORK/off.conf"
off=$(RADIANCE_CONFIG="$WORK/off.conf" $R run "$m" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --mem-budget 820000 2>"$WORK/off.err")
[ "$off" = "$held" ] && grep -q "^mode: weights paged" "$WORK/off.err" && ok "config stream_experts = false: paged" \
    || not_ok "config stream_experts = false: '$off', $(cat "$WORK/off.err")"
q=$($R run "$m" --tokens 1,2 -n 1 --temp 0 --mem-budget 820000 -q 2>&1 >/dev/null)
[ -z "$q" ] && ok "-q: no mode line" || not_ok "-q printed: $q"
expect_fail "a budget below the dense part and one layer's experts is refused, naming the least" 1 \
    "budget of .* cannot hold the model's dense part .* one layer's experts .* the least that streams: it needs [0-9.]+ [KM]B" \
    $R run "$m" --tokens 1,2 -n 1 --mem-budget 780000
plain=$($R run "$m" --tokens 1,2 -n 1 --temp 0 2>&1 >/dev/null)
[ -z "$plain" ] && ok "a model that fits: no mode line" || not_ok "a model that fits printed: $plain"

# O_DIRECT refused (ramfs has none; tmpfs takes it on recent kernels): the
# experts are read through the page cache, the mode line says so once.
mnt="$WORK/ramfs"
mkdir -p "$mnt"
if mount -t ramfs ramfs "$mnt" 2>/dev/null; then
    cp "$m" "$mnt/m.rad"
    got=$($R run "$mnt/m.rad" --tokens 1,2,3,4,5,6,7,8 -n 12 --temp 0 --stream-experts 2>"$WORK/ram.err")
    umount "$mnt"
    [ "$got" = "$held" ] && [ "$(grep -c . "$WORK/ram.err")" = 1 ] && grep -q "^mode: .*read through the page cache" "$WORK/ram.err" \
        && ok "on ramfs (no O_DIRECT): read through the page cache, said once, the same tokens" \
        || not_ok "ramfs: '$got', $(cat "$WORK/ram.err")"
elif [ "${CI:-}" = true ]; then
    not_ok "cannot mount a ramfs to try a file system without O_DIRECT (CI runs as root)"
else
    echo "SKIP O_DIRECT refused: mounting a ramfs needs root"
fi

# bench reports what streaming cost, per token: bytes read, reads, hit rate,
# time waited for reads (and page faults, streamed or not).
$R bench -m "$WORK/gpt_oss.rad" -p 8 -n 4 -r 2 --stream-experts --expert-cache 1K -o json >"$WORK/bench.json" 2>"$WORK/bench.err"
python3 - "$WORK/bench.json" <<'PY' && ok "bench -o json: per_token expert bytes, reads, hit rate and I/O wait of a streamed model" \
    || not_ok "bench per_token: $(head -c 600 "$WORK/bench.json") $(cat "$WORK/bench.err")"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 2
for r in rows:
    p = r["per_token"]
    assert p["expert_bytes_read"] > 0 and p["expert_reads"] > 0, p
    assert 0 <= p["expert_hit_rate"] <= 1 and p["io_wait_ms"] >= 0 and p["page_faults"] >= 0, p
PY

plan=$($R run "$WORK/gpt_oss.rad" --tokens 1,2 -n 1 --stream-experts --expert-cache 1M --debug-plan 2>&1 >/dev/null)
echo "$plan" | grep -q "streamed experts: 16 runs .* a cache of 16 slots" \
    && ok "--expert-cache sizes the cache (16 slots: every run of the model), --debug-plan says so" \
    || not_ok "plan: $(echo "$plan" | grep streamed)"

# A GGUF stores each expert stack whole: refused by name, with the way out;
# `convert FILE.gguf` writes its experts one record each, and that streams.
G="$RADIANCE_SRC/tests/models/llamacpp"
expect_fail "--stream-experts on a GGUF" 4 "ffn_.*_exps.weight' is one stacked tensor.*radiance convert FILE.gguf" \
    $R run "$G/qwen3moe-tiny-q8_0.gguf" --tokens 1,2 -n 1 --stream-experts
for f in qwen3moe-tiny-q8_0 mixtral-tiny-f32 gpt-oss-tiny-f32 glm4moe-tiny-f32 glm4moe-air-tiny-f32; do
    $R convert "$G/$f.gguf" -o "$WORK/$f.rad" >/dev/null 2>&1 || not_ok "$f: convert of the GGUF failed"
    direct=$($R run "$G/$f.gguf" --tokens 1,2,3,4,5 -n 10 --temp 0 2>/dev/null)
    streamed=$($R run "$WORK/$f.rad" --tokens 1,2,3,4,5 -n 10 --temp 0 --stream-experts --expert-cache 1K 2>/dev/null)
    [ -n "$direct" ] && [ "$direct" = "$streamed" ] && ok "$f: the GGUF's .rad streams its experts, same tokens" \
        || not_ok "$f: GGUF '$direct', its .rad streamed '$streamed'"
done
# The chat's /stats says what streaming has cost so far.
printf 'hello\n/stats\n' | timeout 60 $R chat "$WORK/qwen3moe-tiny-q8_0.rad" --plain --stream-experts -n 4 >"$WORK/chat.out" 2>&1
grep -Eq "^experts streamed: a cache of [0-9]+; so far [0-9]+ read \([0-9.]+ MB, [0-9]+ ahead of need\), [0-9]+% found resident, [0-9]+ ms waiting for reads" "$WORK/chat.out" \
    && ok "chat /stats: streamed experts read, hit rate and time waited" || not_ok "chat /stats: $(tail -5 "$WORK/chat.out")"

# A GGUF over its budget cannot stream its stacks: it runs paged, and the
# mode line names the conversion that would stream.
direct=$($R run "$G/olmoe-tiny-f32.gguf" --tokens 1,2,3,4,5 -n 10 --temp 0 2>/dev/null)
paged=$($R run "$G/olmoe-tiny-f32.gguf" --tokens 1,2,3,4,5 -n 10 --temp 0 --mem-budget 300K 2>"$WORK/gguf.err")
[ -n "$direct" ] && [ "$paged" = "$direct" ] && grep -q "^mode: weights paged from the file .*radiance convert .*olmoe-tiny-f32.gguf -o MODEL.rad" "$WORK/gguf.err" \
    && ok "a GGUF over its budget: paged, the same tokens, the mode line names the conversion" \
    || not_ok "GGUF over budget: '$paged' vs '$direct', $(cat "$WORK/gguf.err")"

finish
