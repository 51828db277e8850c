#!/usr/bin/env bash
# run_fuzz.sh FUZZ_DIR TARGET SECONDS: one target of `make fuzz` / `make
# fuzz-smoke`, for SECONDS of wall time, from the committed seeds
# (tests/fuzz/seeds/TARGET) and what earlier runs kept (FUZZ_DIR/corpus/TARGET).
#
# Why a script and not one libFuzzer call: libFuzzer's -timeout is wall time.
# On a shared machine (load 10 on 2 cores) a niced fuzzer is starved for tens
# of seconds, and `/work/bin/pausable` stops it with SIGSTOP while a benchmark
# runs; either makes a unit that takes a millisecond "time out".  So a timeout
# is run again by itself, judged by CPU time (ulimit -t), not wall time: one
# that finishes within the limit of CPU in any of three tries is a stall of
# the machine, not a finding (its input is kept in FUZZ_DIR/stalls/ and
# counted), and fuzzing goes on for the time that is left.  A timeout that
# reproduces, and every crash, leak, out-of-memory or UBSan report ("runtime
# error", built with -fno-sanitize-recover), is a finding: the reproducer's
# path and the log's tail are printed and the script exits 1.
#
# The last line is the summary docs/FUZZING.md records: seconds, runs (summed
# over the pieces a stall cut the run into), corpus files and bytes, stalls,
# findings.
set -u
dir=$1 t=$2 seconds=$3
bin=$dir/fuzz_$t
src=$(cd "$(dirname "$0")/../.." && pwd)
corpus=$dir/corpus/$t
seeds=$src/tests/fuzz/seeds/$t
log=$dir/fuzz_$t.log
UNIT_TIMEOUT=10
mkdir -p "$corpus" "$dir/stalls"
: >"$log"
args=(-timeout=$UNIT_TIMEOUT -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/crash-$t-")
[ -f "$src/tests/fuzz/$t.dict" ] && args+=(-dict="$src/tests/fuzz/$t.dict")
dirs=("$corpus")
[ -d "$seeds" ] && dirs+=("$seeds")

# reproduces FILE: 0 when the input alone still takes over UNIT_TIMEOUT
# seconds of CPU (or crashes) in each of three tries.
reproduces() {
    local i
    for i in 1 2 3; do
        if ( ulimit -t $UNIT_TIMEOUT; exec "$bin" -timeout=100000 "$1" ) >>"$log" 2>&1; then
            return 1
        fi
    done
    return 0
}

start=$(date +%s)
runs=0 stalls=0 finding=
while :; do
    left=$((seconds - ($(date +%s) - start)))
    [ $left -ge 1 ] || break
    piece=$dir/fuzz_$t.piece.log
    "$bin" -max_total_time=$left "${args[@]}" "${dirs[@]}" >"$piece" 2>&1
    rc=$?
    cat "$piece" >>"$log"
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$piece" | tail -1)
    runs=$((runs + ${n:-0}))
    if [ $rc -eq 0 ] && ! grep -q 'runtime error' "$piece"; then
        break
    fi
    unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$piece" | grep -v 'slow-unit' | tail -1)
    if [ -n "$unit" ] && [ "${unit#"$dir/crash-$t-timeout-"}" != "$unit" ] && ! reproduces "$unit"; then
        stalls=$((stalls + 1))
        echo "run_fuzz: $unit: a wall-clock timeout that runs in under $UNIT_TIMEOUT s of CPU alone: a stall of the machine, not a finding; fuzzing goes on" >>"$log"
        mv "$unit" "$dir/stalls/"
        continue
    fi
    finding=${unit:-"exit $rc, no reproducer written (see $log)"}
    tail -40 "$piece"
    break
done
rm -f "$dir/fuzz_$t.piece.log"
grep -E '#[0-9]+[[:space:]]+DONE' "$log" | tail -1
files=$(find "$corpus" -type f | wc -l)
bytes=$(du -sb "$corpus" | cut -f1)
echo "fuzz_$t: $(($(date +%s) - start)) s, $runs runs, corpus $files files ($bytes bytes) in $corpus, $stalls stalls not reproduced, findings: ${finding:-none}"
[ -z "$finding" ]
