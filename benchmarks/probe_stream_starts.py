"""Programs that read one stream but start apart (issue 38): when each attention program starts and ends,
and the L2 counters, at 1 and 2 programs per SM (needs an NVIDIA GPU and ncu).

    python benchmarks/probe_stream_starts.py OUT_DIR [--tokens 4096 8192]
    python benchmarks/probe_stream_starts.py --variant DIR TOKENS PER_SM   # write the kernel files only
    python benchmarks/probe_stream_starts.py --summary STARTS.json[.gz]    # anywhere: what the times show

The kernel is kernels/attention.py at 128 MHA heads, head_dim 64, bf16, non-causal (BLOCK_M 128: 32
Q blocks per head at 4K tokens), launched as compiled (one program per SM: 130 registers) or with
`maxnreg=128` (two per SM, no spills), in its own block-first order (heads cycle fastest) and
head-first. Writes OUT_DIR/starts.json (per variant and order: each program's SM, and its start and end
in ns of %globaltimer, from a second launch; the end is read after the kernel's last store) and
OUT_DIR/ncu.json (`lab.fidelity.measure`: L2 read hit rate and DRAM bytes, `--cache-control all`).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEAD_FIRST = '''@triton.jit
def swizzle(pid, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):
    """Head-first: a head's Q blocks are consecutive program ids."""
    return pid % num_q_blocks, (pid // num_q_blocks) % batch_size, pid // (num_q_blocks * batch_size)
'''
_LAST_STORE = "             mask=rows_ok[:, None])\n\n\n# --- host wrapper"
_END_ASM = '''             mask=rows_ok[:, None])
    tl.inline_asm_elementwise(
        "{{ .reg .u64 t; mov.u64 t, %globaltimer; st.global.u64 [$1], t; mov.u32 $0, 0; }}", "=r,l",
        [{ends} + tl.program_id(0).to(tl.int64) * 8], dtype=tl.int32, is_pure=False, pack=1)


# --- host wrapper'''


def variant_text(tokens: int, per_sm: int, ends_ptr: int | None = None) -> str:
    """kernels/attention.py with the size `h128` at `tokens`, `per_sm` programs per SM (maxnreg=128 for two),
    and (`ends_ptr`) each program's end time stored at ends_ptr + 8 * program id."""
    text = (ROOT / "kernels" / "attention.py").read_text()
    size = (f'    "h128": {{"batch": 1, "heads": 128, "kv_heads": 128, "seq": {tokens}, "head_dim": 64, '
            f'"causal": 0, "bf16": 1}},\n')
    text = text.replace("SIZES = {\n", "SIZES = {\n" + size, 1)
    text = text.replace('DEFAULT_SIZE = "medium"', 'DEFAULT_SIZE = "h128"')
    text = text.replace("PROGRAMS_PER_CU = 1\n", f"PROGRAMS_PER_CU = {per_sm}\n")
    if per_sm == 2:
        text = text.replace('    config = {"num_warps": 8 if dim >= 64 else 4}\n',
                            '    config = {"num_warps": 8 if dim >= 64 else 4, "maxnreg": 128}\n')
    if ends_ptr is not None:
        assert _LAST_STORE in text
        text = text.replace(_LAST_STORE, _END_ASM.format(ends=ends_ptr))
    return text


def write_variant(folder: Path, tokens: int, per_sm: int, ends_ptr: int | None = None) -> Path:
    path = folder / f"attention_h128_{tokens // 1024}k_{per_sm}per_sm.py"
    path.write_text(variant_text(tokens, per_sm, ends_ptr))
    return path


def _times(folder: Path, tokens: int, per_sm: int, remap: str | None) -> dict:
    import torch

    from benchmarks.probe_placement import instrumented_file
    from swizzleperf.kernel.contract import load_kernel

    programs = (tokens // 128) * 128
    ends = torch.zeros(programs, dtype=torch.int64, device="cuda")
    smids = torch.full((programs,), -1, dtype=torch.int32, device="cuda")
    starts = torch.zeros(programs, dtype=torch.int64, device="cuda")
    kernel = load_kernel(write_variant(folder, tokens, per_sm, ends.data_ptr()))
    probe = load_kernel(instrumented_file(kernel, smids, starts, folder, remap))
    size = probe.size("h128")
    inputs, outputs = probe.fn("make_inputs")(size, 0, "cuda"), probe.fn("make_outputs")(size, "cuda")
    for _ in range(2):  # the first launch compiles; the second is recorded
        probe.fn("launch")(inputs, outputs, size, 1)
        torch.cuda.synchronize()
    t0 = int(starts.min())
    return {"tokens": tokens, "per_sm": per_sm, "order": "head-first" if remap else "block-first",
            "smid": smids.tolist(), "start_ns": (starts - t0).tolist(), "end_ns": (ends - t0).tolist()}


def main(out: Path, token_counts: list[int]) -> int:
    import torch

    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity import measure

    out.mkdir(parents=True, exist_ok=True)
    variants = [(tokens, per_sm) for tokens in token_counts for per_sm in (1, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        records = []
        for tokens, per_sm in variants:
            for remap in (None, HEAD_FIRST):
                folder = Path(tmp) / f"t{tokens}-{per_sm}-{bool(remap)}"
                folder.mkdir()
                records.append(_times(folder, tokens, per_sm, remap))
                r = records[-1]
                span = max(r["end_ns"]) - min(r["start_ns"])
                print(f"{tokens} tokens, {per_sm}/SM, {r['order']}: {len(r['smid'])} programs, {span / 1e6:.2f} ms",
                      flush=True)
        props = torch.cuda.get_device_properties(0)
        (out / "starts.json").write_text(json.dumps({"device": props.name, "num_sms": props.multi_processor_count,
                                                     "records": records}))
        measure.fidelity_remaps = lambda kernel, hw, limit=10: [("block-first", kernel.hook_source),
                                                                 ("head-first", HEAD_FIRST)]
        kernels = [(load_kernel(write_variant(Path(tmp), tokens, per_sm)), "h128") for tokens, per_sm in variants]
        result = measure.measure(kernels, PRESETS["h200"])
        (out / "ncu.json").write_text(result.model_dump_json(indent=1))
    for record in result.kernels:
        print(record.kernel, record.error or "", [(r.label, r.metrics.get("lts__t_sector_op_read_hit_rate.pct"))
                                                  for r in record.remaps])
    return 0


def summary(path: str) -> int:
    """Per timed launch: program durations, how far apart a head's two Q blocks (program ids p and p + heads)
    start in the first wave and after it, how long they overlap, and how the first wave's two programs of an
    SM end (the docs' figures, from the recorded file)."""
    import gzip

    import numpy as np

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:
        record = json.load(handle)
    slots = 2 * record["num_sms"]
    print(f"{record['device']}: measured (%globaltimer, %smid); us")
    for r in record["records"]:
        start, end, sm = (np.array(r[k], float) / (1e3 if k != "smid" else 1) for k in ("start_ns", "end_ns", "smid"))
        duration = end - start
        line = (f"{r['tokens']} tokens, {r['per_sm']}/SM build, {r['order']}: duration median {np.median(duration):.1f} "
                f"(p10 {np.percentile(duration, 10):.1f}, p90 {np.percentile(duration, 90):.1f})")
        if r["order"] == "block-first":
            pid = np.arange(len(start) - 128)
            gap, first = np.abs(start[pid + 128] - start[pid]), pid + 128 < slots
            overlap = np.clip(np.minimum(end[pid], end[pid + 128]) - np.maximum(start[pid], start[pid + 128]), 0, None)
            wave = np.argsort(start)[:slots]
            pairs = np.array([sorted(end[wave][sm[wave] == k]) for k in np.unique(sm[wave])
                              if (sm[wave] == k).sum() == 2])
            line += (f"; a head's Q blocks p, p+128 start {np.median(gap[first]):.2f} apart in the first wave, "
                     f"{np.median(gap[~first]):.1f} after it (overlap {np.median(overlap[~first] / duration[pid][~first]):.2f}"
                     f" of a program); an SM's first-wave pair ends at {np.median(pairs[:, 0]):.1f} and "
                     f"{np.median(pairs[:, 1]):.1f}; start rank vs id {np.corrcoef(np.arange(len(start)), np.argsort(np.argsort(start)))[0, 1]:.4f}")
        print(line)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        sys.exit(summary(sys.argv[2]))
    if sys.argv[1:2] == ["--variant"]:
        print(write_variant(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
        sys.exit(0)
    tokens = [int(t) for t in sys.argv[sys.argv.index("--tokens") + 1:]] if "--tokens" in sys.argv else [4096, 8192]
    sys.exit(main(Path(sys.argv[1]), tokens))
