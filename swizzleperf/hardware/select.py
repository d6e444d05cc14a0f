"""Which spec a command uses: a preset by name, a spec file, or the local GPU; and why."""

from __future__ import annotations

from pathlib import Path

from swizzleperf.errors import HardwareSpecError
from swizzleperf.hardware.detect import detect
from swizzleperf.hardware.presets import DEFAULT_PRESET, PRESETS, load_spec_file
from swizzleperf.hardware.spec import HardwareSpec


def resolve(name_or_path: str | None) -> tuple[HardwareSpec, str]:
    """The spec to use and a sentence saying why it was chosen.

    None means: the local GPU when one is detected, else the default preset.
    """
    if name_or_path is None:
        detected = detect()
        if detected is not None:
            return detected, f"detected local GPU ({detected.source})"
        return PRESETS[DEFAULT_PRESET], f"no GPU detected; default preset {DEFAULT_PRESET}"
    if name_or_path in PRESETS:
        return PRESETS[name_or_path], f"preset {name_or_path}"
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        if not path.exists():
            raise HardwareSpecError(f"hardware spec file {path} does not exist")
        return load_spec_file(path), f"spec file {path}"
    raise HardwareSpecError(f"unknown hardware '{name_or_path}': use a preset ({', '.join(PRESETS)}) "
                            f"or a .yaml/.json spec file")


# --- detection ----------------------------------------------------------------------------
