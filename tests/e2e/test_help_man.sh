#!/bin/bash
# test_help_man.sh: the help text, the man pages and the completions agree.
# Every command `radiance --help` lists is described in radiance(1); every
# long flag printed by `radiance --help` and `radiance CMD --help` appears in
# radiance(1); every config key config.c accepts is documented in
# radiance.conf(5) and every key documented there is accepted; the bash
# completion offers every command.  A failure lists what is missing.
. "$(dirname "$0")/lib.sh"
R="$RADIANCE_BIN"
MAN="$RADIANCE_SRC/man/radiance.1"
CONF="$RADIANCE_SRC/man/radiance.conf.5"

# groff writes a dash as \- ; look a flag up the way the page spells it.
in_man() { grep -qF -- "$(printf '%s' "$1" | sed 's/-/\\-/g')" "$2"; }

commands=$($R --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
[ -n "$commands" ] && ok "radiance --help lists commands: $(echo $commands)" || not_ok "no commands in radiance --help"

missing=""
for cmd in $commands; do
    grep -qE "^\.B $cmd\$" "$MAN" || missing="$missing $cmd"
done
[ -z "$missing" ] && ok "every command is described in radiance(1)" || not_ok "commands missing from radiance(1):$missing"

missing=""
for flag in $($R --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
    in_man "$flag" "$MAN" || missing="$missing $flag"
done
for cmd in $commands; do
    help=$($R "$cmd" --help 2>&1)
    if [ -z "$help" ]; then
        missing="$missing $cmd:(no --help)"
        continue
    fi
    for flag in $(printf '%s\n' "$help" | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
        in_man "$flag" "$MAN" || missing="$missing $cmd:$flag"
    done
done
[ -z "$missing" ] && ok "every --help flag is in radiance(1)" || not_ok "flags missing from radiance(1):$missing"

# Config keys: the ones config.c accepts against the ones radiance.conf(5) documents.
code_keys=$(grep -oE 'strcmp\(key, "[a-z_]+"\)' "$RADIANCE_SRC/app/config.c" | sed 's/.*"\(.*\)".*/\1/' | sort -u)
man_keys=$(sed -n '/^\.SH KEYS/,/^\.SH ENVIRONMENT/p' "$CONF" | awk '/^\.TP/ { getline; print }' \
    | sed -n 's/^\.B[IR]* \([a-z_]*\) .*/\1/p' | sort -u)
undocumented=$(comm -23 <(echo "$code_keys") <(echo "$man_keys") | tr '\n' ' ')
unknown=$(comm -13 <(echo "$code_keys") <(echo "$man_keys") | tr '\n' ' ')
[ -n "$code_keys" ] && [ -z "$undocumented" ] && ok "every config key is in radiance.conf(5) ($(echo $code_keys | wc -w) keys)" \
    || not_ok "config keys missing from radiance.conf(5): $undocumented"
[ -z "$unknown" ] && ok "radiance.conf(5) documents no key the code refuses" || not_ok "keys only in radiance.conf(5): $unknown"

# The RADIANCE_* variables config.c reads are in both man pages.
missing=""
for var in $(grep -oE '"RADIANCE_[A-Z_]+"' "$RADIANCE_SRC/app/config.c" | tr -d '"' | sort -u); do
    grep -q "$var" "$MAN" || missing="$missing radiance.1:$var"
    grep -q "$var" "$CONF" || missing="$missing radiance.conf.5:$var"
done
[ -z "$missing" ] && ok "every RADIANCE_* variable of the config is documented" || not_ok "undocumented:$missing"

# The man pages render without warnings.
if command -v groff >/dev/null; then
    warn=$(for page in "$MAN" "$CONF"; do groff -man -Tutf8 -ww -z "$page" 2>&1; done)
    [ -z "$warn" ] && ok "the man pages render cleanly" || not_ok "groff: $(echo "$warn" | head -5)"
fi

# The bash completion parses and offers every command and a command's flags.
COMP="$RADIANCE_SRC/share/completions/radiance.bash"
bash -n "$COMP" && ok "the bash completion parses" || not_ok "bash -n $COMP"
offered=$(PATH="$(dirname "$R"):$PATH" bash -c '
    . "$1"
    COMP_WORDS=("$2" ""); COMP_CWORD=1; _radiance; echo "${COMPREPLY[*]}"
    COMP_WORDS=("$2" run --js); COMP_CWORD=2; _radiance; echo "${COMPREPLY[*]}"' _ "$COMP" "$R")
missing=""
for cmd in $commands; do
    echo "$offered" | head -1 | grep -qw -- "$cmd" || missing="$missing $cmd"
done
[ -z "$missing" ] && ok "bash completes every command" || not_ok "bash completion misses:$missing"
echo "$offered" | tail -1 | grep -q -- "--jsonl" && ok "bash completes a command's flags" || not_ok "bash flags: $(echo "$offered" | tail -1)"
if command -v zsh >/dev/null; then
    zsh -n "$RADIANCE_SRC/share/completions/_radiance" && ok "the zsh completion parses" || not_ok "zsh -n _radiance"
fi

finish
