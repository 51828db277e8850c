#!/usr/bin/env bash
# bench_tokenizer.sh: encode throughput on one thread, ours against HF
# tokenizers, on the same mixed 10 MB text in the same run; plus how fast our
# stored tokenizer opens.  Not part of `make test` (it takes a minute or two).
#
#   tests/text/bench_tokenizer.sh [VOCAB ...]      (default: all six)
#
# Needs `make all` (build/libradcore.a).  HF's side needs a Python with the
# `tokenizers` package: $PYTHON, else /work/venv/bin/python, else python3;
# without it only our numbers are printed.  The vocabularies are found as in
# test_conformance.c: $RADIANCE_SHARED, else ../shared beside the repository.
#
# The text is built deterministically from tests/text/corpus.jsonl (every
# case but special_* and long_line_100k: prose in many scripts, code,
# numbers, emoji, whitespace), the cases taken in an LCG order, joined by
# blank lines, until 10,000,000 bytes.  Both sides must produce the same ids
# (same count and checksum), or the line says so.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
shared=${RADIANCE_SHARED:-$src/../shared}
py=${PYTHON:-}
if [ -z "$py" ]; then
    if [ -x /work/venv/bin/python ]; then py=/work/venv/bin/python; else py=python3; fi
fi
vocabs=("$@")
[ ${#vocabs[@]} -gt 0 ] || vocabs=(llama2 llama3 qwen3 gemma3 gptoss deepseek_v3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cc ${CFLAGS:--O2} -std=c11 -D_GNU_SOURCE -I"$src/base" -I"$src/formats" -I"$src/engine" \
    -o "$work/bench" "$here/bench_tokenizer.c" \
    -Wl,--whole-archive "$src/build/libradcore.a" -Wl,--no-whole-archive -ljansson -lpcre2-8 -lutf8proc -lcrypto -ldl -lm

# The mixed text.
python3 - "$here/corpus.jsonl" "$work/text.txt" <<'EOF'
import json, sys
cases = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
texts = [c["text"] for c in cases if not c["case"].startswith("special_") and c["case"] != "long_line_100k"]
out, size, s = [], 0, 12345
while size < 10_000_000:
    s = (s * 1103515245 + 12345) % 2**31
    piece = texts[s % len(texts)] + "\n\n"
    out.append(piece)
    size += len(piece.encode("utf-8"))
data = "".join(out).encode("utf-8")[:10_000_000].decode("utf-8", "ignore")
open(sys.argv[2], "w", encoding="utf-8", newline="").write(data)
EOF

have_hf=0
if "$py" -c 'import tokenizers' 2>/dev/null; then have_hf=1; fi

hf_bench() {   # DIR TEXT -> the same line format as the C bench
    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$py" - "$1" "$2" <<'EOF'
import os, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(os.path.join(sys.argv[1], "tokenizer.json"))
text = open(sys.argv[2], encoding="utf-8", newline="").read()
nbytes = len(text.encode("utf-8"))
best, ids = 1e9, None
for _ in range(3):
    t0 = time.perf_counter()
    ids = tok.encode(text, add_special_tokens=False).ids
    best = min(best, time.perf_counter() - t0)
def checksum(h, ids):
    for v in ids:
        for k in range(4):
            h = ((h ^ ((v >> (8 * k)) & 0xFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h
docs, i = [], 0
while i < len(text):
    j = text.find("\n\n", i)
    end = len(text) if j < 0 else j + 2
    docs.append(text[i:end])
    i = end
docs_best, batch = 1e9, None
for _ in range(3):
    t0 = time.perf_counter()
    batch = tok.encode_batch(docs, add_special_tokens=False)
    docs_best = min(docs_best, time.perf_counter() - t0)
h2, n2 = 1469598103934665603, 0
for e in batch:
    h2 = checksum(h2, e.ids)
    n2 += len(e.ids)
print("vocab=%s bytes=%d tokens=%d checksum=%016x encode_s=%.3f mb_per_s=%.2f docs_tokens=%d docs_checksum=%016x docs_mb_per_s=%.2f"
      % (os.path.basename(sys.argv[1].rstrip("/")), nbytes, len(ids), checksum(1469598103934665603, ids), best,
         nbytes / best / 1e6, n2, h2, nbytes / docs_best / 1e6))
EOF
}

field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
same() {   # OURS HF PREFIX
    if [ "$(field "$1" "${3}tokens")" = "$(field "$2" "${3}tokens")" ] && [ "$(field "$1" "${3}checksum")" = "$(field "$2" "${3}checksum")" ]; then
        echo "same ids"
    else
        echo "IDS DIFFER"
    fi
}

printf '%-12s | %-34s | %-34s | %8s %9s\n' "" "whole text, one call (MB/s)" "one call per document (MB/s)" "open ms" ""
printf '%-12s | %8s %8s %7s %9s | %8s %8s %7s %9s | %8s %9s\n' vocab ours HF ratio ids ours HF ratio ids load create
for v in "${vocabs[@]}"; do
    dir="$shared/tokenizers/$v"
    if [ ! -f "$dir/tokenizer.json" ]; then echo "$v: $dir/tokenizer.json missing, skipped"; continue; fi
    ours=$("$work/bench" "$dir" "$work/text.txt" 3)
    o1=$(field "$ours" mb_per_s) o2=$(field "$ours" docs_mb_per_s)
    h1=- h2=- r1=- r2=- s1="-" s2="-"
    if [ $have_hf = 1 ]; then
        hf=$(hf_bench "$dir" "$work/text.txt")
        h1=$(field "$hf" mb_per_s) h2=$(field "$hf" docs_mb_per_s)
        r1=$(ratio "$o1" "$h1") r2=$(ratio "$o2" "$h2")
        s1=$(same "$ours" "$hf" "") s2=$(same "$ours" "$hf" docs_)
    fi
    printf '%-12s | %8s %8s %7s %9s | %8s %8s %7s %9s | %8s %9s\n' "$v" "$o1" "$h1" "$r1" "$s1" "$o2" "$h2" "$r2" "$s2" \
        "$(field "$ours" load_ms)" "$(field "$ours" create_ms)"
done
echo "text: 10,000,000 bytes built from tests/text/corpus.jsonl (as documents: cut after each blank line);"
echo "one thread (HF: RAYON_NUM_THREADS=1); best of 3; $(uname -m), $(nproc) CPUs; open = rad_tokenizer_load + rad_text_create of the stored form"
