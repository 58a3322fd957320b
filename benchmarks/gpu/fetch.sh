#!/usr/bin/env bash
# On your own machine: download the wheels of wheels.txt for the device (Python 3.12, x86_64), pack them with this
# folder's model files, and split the pack into parts small enough for one device call each.
# Usage: TOKENIZER_JSON=PATH fetch.sh OUT_DIR [PART_MB]   (a Qwen3 tokenizer.json: not kept in the repository, 11 MB)   -> OUT_DIR/wheels/*.whl, OUT_DIR/parts/part00.. (default 50 MB: a call carries
# at most 64 MiB together with the rest of the working tree, so keep PART_MB + your tree's size under that).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); out=${1:?OUT_DIR}; mb=${2:-50}
tokenizer=${TOKENIZER_JSON:-$here/tokenizer.json}
[ -f "$tokenizer" ] || { echo "fetch.sh: TOKENIZER_JSON=$tokenizer is not a file: point it at a Qwen3 tokenizer.json" >&2; exit 2; }
mkdir -p "$out/wheels" "$out/parts"
plat=(); for p in manylinux_2_17 manylinux2014 manylinux_2_24 manylinux_2_26 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux1 manylinux_2_5; do
  plat+=(--platform "${p}_x86_64"); done
grep -vE '^\s*(#|$)' "$here/wheels.txt" > "$out/req.txt"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
  -d "$out/wheels" -r "$out/req.txt"
tar -cf "$out/pack.tar" -C "$out" wheels -C "$(dirname "$tokenizer")" "$(basename "$tokenizer")" -C "$here" tokenizer_config.json qwen3_template.jinja mkmodel.py
rm -f "$out"/parts/part*; split -b "${mb}m" -d -a 2 "$out/pack.tar" "$out/parts/part"
echo "$(ls "$out"/wheels | wc -l) wheels, $(du -sh "$out/pack.tar" | cut -f1), $(ls "$out"/parts | wc -l) parts in $out/parts"
