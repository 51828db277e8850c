# bash completion for radiance(1).
#
# Commands and flags are read from `radiance --help` and `radiance CMD --help`
# when completing, so this file never falls out of step with the binary;
# the static lists below are used only when the binary cannot be run.
# Models complete from `radiance list --json`, and .rad/.gguf files and
# folders.  Installed by `make install` into
# PREFIX/share/bash-completion/completions/radiance.

_radiance_commands()
{
    local out
    out=$("$1" --help 2>/dev/null | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
    [ -n "$out" ] || out="run chat convert info pull list rm show sessions logs tokenize perplexity bench help"
    echo "$out"
}

_radiance_flags()
{
    "$1" "$2" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^[ ,]*//' | sort -u
}

_radiance_models()
{
    "$1" list --json 2>/dev/null | sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p'
}

_radiance()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    local bin=${words[0]}
    if [ "$cword" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$(_radiance_commands "$bin") --help --version" -- "$cur"))
        return
    fi
    local cmd=${words[1]}

    # The value of a flag that takes one.
    case $prev in
    -m | --model)
        COMPREPLY=($(compgen -W "$(_radiance_models "$bin")" -- "$cur"))
        COMPREPLY+=($(compgen -f -X '!*.@(rad|gguf)' -- "$cur") $(compgen -d -- "$cur"))
        return ;;
    --color) COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return ;;
    --context-policy) COMPREPLY=($(compgen -W "drop-oldest refuse" -- "$cur")); return ;;
    --kv-dtype) COMPREPLY=($(compgen -W "f16 f32" -- "$cur")); return ;;
    --quant)
        [ "$cmd" = pull ] || [ "$cmd" = convert ] || [ "$cmd" = rm ] || [ "$cmd" = show ] || return 0
        COMPREPLY=($(compgen -W "f32 f16 bf16 q8_0 Q4_K_M Q8_0" -- "$cur")); return ;;
    -o | --output)
        if [ "$cmd" = bench ]; then COMPREPLY=($(compgen -W "md csv json" -- "$cur")); return; fi
        COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -f | --file | --dump-logits | --tokenizer | --plugins | --plugins-dir)
        COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -s | --system | --tokens | --decode | -n | --n-predict | -c | --ctx | -b | --batch | -t | --threads | \
        --temp | --top-k | --top-p | --min-p | --repeat-penalty | --repeat-last-n | --seed | --kernels | \
        --reply-reserve | -p | --n-prompt | --n-gen | -r | --repetitions | --chunks | --kernels-order)
        return ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_radiance_flags "$bin" "$cmd")" -- "$cur"))
        return
    fi
    case $cmd in
    run | chat | pull | rm | show | bench | perplexity | tokenize | info)
        COMPREPLY=($(compgen -W "$(_radiance_models "$bin")" -- "$cur"))
        COMPREPLY+=($(compgen -f -X '!*.@(rad|gguf)' -- "$cur") $(compgen -d -- "$cur")) ;;
    sessions | logs)
        [ "$cword" -eq 2 ] && COMPREPLY=($(compgen -W "list show search rm export" -- "$cur")) ;;
    help)
        [ "$cword" -eq 2 ] && COMPREPLY=($(compgen -W "$(_radiance_commands "$bin")" -- "$cur")) ;;
    convert)
        COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.gguf' -- "$cur")) ;;
    esac
}

complete -F _radiance radiance
