"""benchmarks/scheduler_model.py fit: the presets' scheduler walk takes the constants that fit the spin runs best."""

import importlib.util
import sys
from pathlib import Path

from swizzleperf.hardware.presets import PRESETS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("scheduler_model", ROOT / "benchmarks" / "scheduler_model.py")
model = sys.modules["scheduler_model"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model)


def test_the_presets_window_and_disorder_fit_the_h100_spin_runs_best_on_the_grid():
    """Over windows 4-8 ns and disorders 150-600 ns, the presets' (6 ns, 300 ns) has the smallest summed error of
    the TPC, side and walk fractions (six runs x three fractions); a much wider window or no disorder is worse."""
    walk = PRESETS["h100"].dispatch.walk
    assert (walk.window_ns, walk.finish_jitter_ns) == (PRESETS["h200"].dispatch.walk.window_ns,
                                                       PRESETS["h200"].dispatch.walk.finish_jitter_ns)
    errors = {key: error for key, (error, _) in model.fit([4.0, 6.0, 8.0, 100.0], [0.0, 150.0, 300.0, 600.0]).items()}
    assert min(errors, key=errors.get) == (walk.window_ns, walk.finish_jitter_ns), errors
    assert errors[100.0, 300.0] > errors[6.0, 300.0] + 0.5 and errors[6.0, 0.0] > errors[6.0, 300.0] + 0.5
