#!/usr/bin/env bash
# The kernel half of CI (see cuda/README.md): the Debian packages the cpu-emu build needs, the
# cpu-emu libraries, and — where nvcc exists — every kernel compiled for sm_90 as a gate (a kernel
# that does not compile fails CI). C5 itself runs with the rest of the suite in `npm test`.
# Run from .ci/run after `npm ci`:
#     bash ffi/ci.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "kernel toolchain (Debian: g++ and libc6-dev for ucontext.h)"
if ! command -v g++ >/dev/null 2>&1 || [ ! -f /usr/include/ucontext.h ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update && apt-get install -y --no-install-recommends g++ libc6-dev
  else
    echo "g++ or ucontext.h missing and apt-get is not usable here: install g++ and libc6-dev" >&2
    exit 1
  fi
fi
g++ --version | head -1

step "generated kernel ABI files are current (ffi/generate.ts --check)"
bun ffi/generate.ts --check

step "build the cpu-emu libraries (incremental)"
bun ffi/build.ts cpu cpu-test

step "CUDA compile gate (sm_90; f32 and bf16 storage)"
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  bun ffi/build.ts --check-cuda
else
  echo "nvcc not found: the CUDA compile gate is skipped on this runner"
fi
