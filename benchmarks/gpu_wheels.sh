#!/usr/bin/env bash
# What the lent GPU machines lack, for carrying there (they cannot fetch): wheels for Python 3.12 of
# pydantic, z3-solver (the proofs: without them every remap is unproven, so rejected), jsonschema (Ray's), and
# Ray itself, slimmed to fit the 64 MiB a call may carry (its
# wheel is 79 MB: the Java jars, the dashboard's web build and the C++ API go; 30 MB as .tar.xz).
# Everything else swizzleperf needs (torch, triton, numpy, numba, rich, typer, pyyaml) is in the image.
#
# Usage (here, where the registries are reachable):   benchmarks/gpu_wheels.sh [DIR=.gpu]
# On the GPU machine (carry the directory), before anything else:
#   python3 -m pip install -q --no-index --find-links .gpu/wheels --target /tmp/site pydantic z3-solver jsonschema
#   tar -C /tmp/site -xJf .gpu/ray-*-slim.tar.xz
#   printf '/tmp/site\n%s\n' "$PWD" > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/sp.pth"
# (a .pth, not PYTHONPATH: the checks' children run `python -I`; see gpu_env.sh).
set -euo pipefail
dir="${1:-.gpu}"
platforms=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
mkdir -p "$dir/wheels"
pip download -q --only-binary=:all: "${platforms[@]}" --python-version 3.12 -d "$dir/wheels" pydantic z3-solver jsonschema
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.12 -d "$work" ray
wheel="$(ls "$work"/ray-*.whl)"
version="$(basename "$wheel" | cut -d- -f2)"
mkdir "$work/tree"
(cd "$work/tree" && unzip -q "$wheel" && rm -rf ray/jars ray/dashboard/client/build ray/cpp)  # unzip keeps the binaries executable
tar -C "$work/tree" -cJf "$dir/ray-$version-cp312-slim.tar.xz" .
du -sh "$dir"
