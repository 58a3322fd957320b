#!/bin/sh
# Run in each of the stack's install steps, in the same RUN: files deleted in a
# later layer would still be shipped. Only what nothing loads at run time goes;
# the self-test (docs/selftest.md) passes on the result. Measured on the a40
# stack: about 790 MB less, from 9.05 GB.
#
# Usage: slim-venv.sh CUDA_LIB [STAMP]. With STAMP, only files created or changed
# after it (ctime: this step's) are stripped or linked: rewriting a file of an
# earlier layer would copy it whole into this one.
set -eu
venv=/opt/venv
cuda_lib="$1"  # the toolchain's lib folder; may not exist (stacks without CUDA wheels)
stamp="${2:-}"
if [ -n "$stamp" ]; then new="-cnewer $stamp"; else new=""; fi

# CUDA libraries that no ELF file of the image has as NEEDED and no Python file
# loads by name: NVRTC's alternative build, multi-GPU cuSOLVER, the FFTW and
# NVBLAS shims (220 MB).
if [ -d "$cuda_lib" ]; then
    rm -f "$cuda_lib"/libnvrtc.alt.so* "$cuda_lib"/libnvrtc-builtins.alt.so* \
          "$cuda_lib"/libcusolverMg.so* "$cuda_lib"/libcufftw.so* "$cuda_lib"/libnvblas.so*
fi
# Static CUPTI archives bundled by Triton: its profiler loads libcupti.so (77 MB).
rm -f "$venv"/lib/python3*/site-packages/triton/backends/nvidia/lib/cupti/*_static.a

# DWARF debug sections only (libtriton alone carries 238 MB): symbol tables,
# .dynsym and the CUDA fatbins stay. strip and readelf come with g++'s binutils.
if command -v strip >/dev/null && command -v readelf >/dev/null; then
    # shellcheck disable=SC2086  # $new is two words or none
    find "$venv" -type f $new -name '*.so*' | while read -r f; do
        if readelf -S -W "$f" 2>/dev/null | grep -q '\.debug_info'; then strip --strip-debug "$f"; fi
    done
fi

# Identical files (wheels ship sonames as copies) become hard links (131 MB).
"$venv"/bin/python - "$venv" "$stamp" <<'PY'
import collections, hashlib, os, sys
since = os.stat(sys.argv[2]).st_mtime_ns if sys.argv[2] else 0
by_size = collections.defaultdict(list)
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path):
            continue
        info = os.stat(path)
        if info.st_size >= 65536 and info.st_ctime_ns > since:
            by_size[info.st_size].append(path)
for paths in by_size.values():
    first = {}
    for path in paths if len(paths) > 1 else []:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest in first:
            os.unlink(path)
            os.link(first[digest], path)
        else:
            first[digest] = path
PY
