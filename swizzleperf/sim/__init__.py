"""The embedded L2 simulator: trace capture, dispatch model and per-die cache model.

Numba's on-disk cache notices when a jitted function's own file changes, but not when a
function it calls from another module does: after an upgrade, engine.py's cached replay loop
would keep calling the old cache model. So the cache lives in a directory keyed by the source
of every module here (unless the user chose one with NUMBA_CACHE_DIR).
"""

import hashlib
import os
from pathlib import Path


def _numba_cache_dir() -> Path:
    digest = hashlib.sha256()
    for source in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(str(source.relative_to(Path(__file__).parent)).encode() + source.read_bytes())
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "swizzleperf" / "numba"
    return base / digest.hexdigest()[:16]


if not os.environ.get("NUMBA_CACHE_DIR"):
    # Through the environment, so it also holds if numba is imported later (and in children);
    # the GPU-only paths (dispatch model, pictures) never import numba at all.
    os.environ["NUMBA_CACHE_DIR"] = str(_numba_cache_dir())
