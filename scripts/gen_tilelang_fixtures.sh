#!/usr/bin/env bash
# Regenerate synth check's TileLang fixtures (tests/check_inputs/tilelang/) with TileLang in its own venv.
#
# TileLang pulls torch, so it stays out of synth's dev extra. This script makes (once) a virtual
# environment outside the repository, installs torch and tilelang there, and runs the generator,
# which lowers TileLang's pipelined GEMM for sm_80 and sm_90 without a GPU.
#
#   scripts/gen_tilelang_fixtures.sh                 # venv in $TILELANG_VENV (default ~/.cache/synth-tilelang-venv)
#   TILELANG_VERSION=0.1.15 scripts/gen_tilelang_fixtures.sh --out /tmp/tl   # into another folder
#
# Environment: PYTHON (default python3.11), TILELANG_VENV, TILELANG_VERSION (default 0.1.15),
# TORCH_SPEC (pip arguments, default `torch`; a CPU build is enough: nothing runs on a GPU, so point pip at
# a CPU wheel here to avoid the CUDA one).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${TILELANG_VENV:-$HOME/.cache/synth-tilelang-venv}"
py="${PYTHON:-python3.11}"
version="${TILELANG_VERSION:-0.1.15}"
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import tilelang, sys; sys.exit(tilelang.__version__ != '$version')" 2>/dev/null; then
    # shellcheck disable=SC2086 -- TORCH_SPEC holds pip arguments
    "$venv/bin/pip" install --quiet ${TORCH_SPEC:-torch}
    "$venv/bin/pip" install --quiet "tilelang==$version"
fi
exec "$venv/bin/python" "$here/tests/check_inputs/tilelang/generate.py" "$@"
