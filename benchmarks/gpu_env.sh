# Sourced by the GPU scripts (after `cd` to the repository root): this checkout on PYTHONPATH, the GPU
# (not the CPU interpreter), $python, and a stop with the fix when swizzleperf cannot be imported by an
# isolated interpreter: the checks' children run `python -I`, which ignores PYTHONPATH.
: "${OUT:?set OUT to the directory for the results}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
python="${PYTHON:-python3}"
if ! "$python" -I -c "import swizzleperf, pydantic" 2>/dev/null; then
    echo "swizzleperf must be importable by an isolated interpreter (\`$python -I\`: it ignores PYTHONPATH), as the" \
         "checks' children are: install it, or name the checkout (and any wheel directory) in a .pth file in" \
         "$("$python" -c 'import site; print(site.getsitepackages()[0])')" >&2
    exit 2
fi
