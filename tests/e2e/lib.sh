# lib.sh: helpers for the e2e shell tests.  Each check prints one line; the
# script ends with the plain "N passed, N failed" summary and fails if any
# check failed.
set -u
: "${RADIANCE_BIN:?run through make test}"
: "${RADIANCE_SRC:?run through make test}"
FIXTURES="$RADIANCE_SRC/tests/golden/fixtures"
CRAFT="python3 $RADIANCE_SRC/tests/e2e/craft.py"
WORK=$(mktemp -d /tmp/radiance-e2e-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
not_ok() { failed=$((failed + 1)); echo "FAIL $1"; }

# expect_fail NAME STATUS PATTERN CMD...: CMD exits with STATUS, prints exactly
# one line on stderr, that line matches PATTERN (grep -E), and nothing on stdout.
expect_fail() {
    local name=$1 status=$2 pattern=$3
    shift 3
    "$@" >"$WORK/out" 2>"$WORK/err"
    local got=$?
    local lines
    lines=$(wc -l <"$WORK/err")
    if [ "$got" -ne "$status" ]; then
        not_ok "$name: exit $got, expected $status; stderr: $(head -c 400 "$WORK/err")"
    elif [ "$lines" -ne 1 ] && ! grep -q "problem" "$WORK/err"; then
        not_ok "$name: $lines lines on stderr, expected one: $(head -c 400 "$WORK/err")"
    elif ! grep -Eq -- "$pattern" "$WORK/err"; then
        not_ok "$name: stderr does not match '$pattern': $(head -c 400 "$WORK/err")"
    elif [ -s "$WORK/out" ]; then
        not_ok "$name: printed on stdout: $(head -c 200 "$WORK/out")"
    else
        ok "$name"
    fi
}

# expect_show_refuses NAME STATUS PATTERN MODEL [STDOUT_PATTERN]: `radiance show
# MODEL` still shows what it can (stdout not empty, and matching
# STDOUT_PATTERN when given), then says why run refuses the file: exit
# STATUS, one line on stderr matching PATTERN (grep -E).
expect_show_refuses() {
    local name=$1 status=$2 pattern=$3 model=$4 shown=${5:-.}
    "$RADIANCE_BIN" show "$model" >"$WORK/out" 2>"$WORK/err"
    local got=$?
    if [ "$got" -ne "$status" ]; then
        not_ok "$name: exit $got, expected $status; stderr: $(head -c 400 "$WORK/err")"
    elif [ "$(wc -l <"$WORK/err")" -ne 1 ] || ! grep -Eq -- "$pattern" "$WORK/err"; then
        not_ok "$name: stderr is not one line matching '$pattern': $(head -c 400 "$WORK/err")"
    elif ! grep -Eq -- "$shown" "$WORK/out"; then
        not_ok "$name: stdout does not match '$shown': $(head -c 400 "$WORK/out")"
    else
        ok "$name"
    fi
}

finish() {
    echo "e2e: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
