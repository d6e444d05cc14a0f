"""Put first on a child's PYTHONPATH by `swizzleperf capture`: instrument Triton's launch path.

Python imports `sitecustomize` at start-up. This one installs the recorder, then runs the
sitecustomize the environment had before (if any), so the user's own start-up code still runs.
"""

import importlib.util
import os
import sys

try:
    from swizzleperf.kernel.launches import instrument
    instrument.install()
except Exception as exc:  # the user's command must still run; the parent reports an empty record
    sys.stderr.write(f"swizzleperf capture: the launch recorder could not be installed: {exc!r}\n")

_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.origin and os.path.dirname(os.path.abspath(_spec.origin)) != _here:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
