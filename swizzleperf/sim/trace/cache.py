"""The trace cache on disk: entries, a size bound with least-recently-used eviction, what `cache` shows.

A trace is a data file (`.runs`; `.npz` from before compact traces) with its metadata beside it
(`.json`). Using a trace touches its data file's modification time, so the oldest time is the least
recently used; after each new trace is stored, the oldest others are deleted until the cache fits
its bound (`settings.cache_max_bytes()`). The trace just stored is never deleted, even when it
alone is larger than the bound.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.sim import settings
from swizzleperf.untrusted import readback

DATA_SUFFIXES = (".runs", ".npz")


@dataclass(frozen=True)
class Entry:
    data: Path
    kernel: str
    size_name: str
    bytes: int
    last_used: float  # seconds since the epoch

    @property
    def meta(self) -> Path:
        return self.data.with_suffix(".json")


def default_cache_dir() -> Path:
    return Path(os.environ.get("SWIZZLEPERF_CACHE") or Path.home() / ".cache" / "swizzleperf" / "traces")


def entries(root: Path) -> list[Entry]:
    """The cached traces, least recently used first (a metadata file without its data is not one)."""
    found = []
    for meta in sorted(root.glob("*.json")) if root.is_dir() else []:
        data = next((meta.with_suffix(s) for s in DATA_SUFFIXES if meta.with_suffix(s).exists()), None)
        if data is None:
            continue
        try:
            info = readback.read_json(meta, "the trace metadata")
        except (OSError, readback.StoredFileError):
            info = {}
        info = info if isinstance(info, dict) else {}
        try:
            stat = data.stat()
            size = stat.st_size + meta.stat().st_size
        except OSError:  # deleted meanwhile (another process evicting)
            continue
        found.append(Entry(data, str(info.get("kernel", "?")), str(info.get("size_name", "?")), size, stat.st_mtime))
    return sorted(found, key=lambda e: (e.last_used, e.data.name))


def touch(data: Path) -> None:
    """Mark a trace used now (its place in the eviction order)."""
    try:
        os.utime(data)
    except OSError:
        pass


def remove(entry: Entry) -> None:
    entry.data.unlink(missing_ok=True)
    entry.meta.unlink(missing_ok=True)


def evict(root: Path, keep: Path | None = None, bound: int | None = None) -> list[Entry]:
    """Delete least recently used traces (never `keep`) until the cache fits `bound`; returns them."""
    bound = settings.cache_max_bytes() if bound is None else bound
    current = entries(root)
    total = sum(e.bytes for e in current)
    removed = []
    for entry in current:
        if total <= bound:
            break
        if keep is not None and entry.data == Path(keep):
            continue
        remove(entry)
        removed.append(entry)
        total -= entry.bytes
    return removed


def clear(root: Path, kernel: str | None = None) -> int:
    chosen = [e for e in entries(root) if kernel is None or e.kernel == kernel]
    for entry in chosen:
        remove(entry)
    return len(chosen)


def describe(root: Path, bound: int | None = None) -> list[str]:
    """What `swizzleperf cache info` prints: the total against the bound, counts per kernel, then each
    trace (most recently used first) with its size and when it was last used."""
    bound = settings.cache_max_bytes() if bound is None else bound
    current = entries(root)
    total = sum(e.bytes for e in current)
    lines = [f"{root}: {len(current)} traces, {total / 2**20:,.1f} MiB of {bound / 2**30:,.1f} GiB "
             f"(least recently used deleted past it; SWIZZLEPERF_CACHE_MAX_GB)"]
    counts: dict[str, int] = {}
    for entry in current:
        counts[entry.kernel] = counts.get(entry.kernel, 0) + 1
    if counts:
        lines.append("  " + ", ".join(f"{k} ({n})" for k, n in sorted(counts.items())))
    now = time.time()
    for entry in reversed(current):
        lines.append(f"  {entry.bytes / 2**20:10,.1f} MiB  used {_ago(now - entry.last_used):>9}  "
                     f"{entry.kernel} {entry.size_name}  {entry.data.name}")
    return lines


def _ago(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit} ago"
    return "just now"
