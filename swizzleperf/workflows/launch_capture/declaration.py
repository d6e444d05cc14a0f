"""The problem declaration of a captured kernel file: its recorded launches as data, replayed.

Each recorded launch of the kernel becomes one size. Its arguments are kept as data in the file
(`_LAUNCHES`): tensors by layout, rebuilt from a seeded generator (integer tensors that steer
addresses from their recorded values, or their recorded range), outputs the tensors the launch
wrote, in-place tensors seeded and copied in before the launch, scalars and constexprs by value.
Without a `reference()` the check compares a remap's outputs with the kernel's own order.
"""

from __future__ import annotations

import math
import pprint

from swizzleperf.kernel.launches import rebuild
from swizzleperf.kernel.launches.launch_record import LaunchRecord, TensorParam
from swizzleperf.workflows.adopt.hook import HookPlan

CHECK_ELEMENTS = 1 << 22  # sizes the CPU interpreter checks: tensors up to this many elements in all...
CHECK_PROGRAMS = 4096  # ...and up to this many programs


def role(p: TensorParam) -> str:
    return rebuild.role(p.model_dump())


def _tensor_spec(p: TensorParam) -> dict:
    return rebuild.tensor_spec(p.model_dump())


def _value_text(p) -> str:
    if p.kind == "triton_dtype":
        return f"tl.{p.value}"
    if p.kind == "torch_dtype":
        return f"torch.{p.value}"
    if p.kind == "float" and isinstance(p.value, str):
        return f'float("{p.value}")'
    return repr(p.value)


def _launch_text(record: LaunchRecord) -> str:
    lines = [f'    {{"grid": {record.grid}, "options": {record.options!r},\n     "params": [']
    for p in record.params:
        if isinstance(p, TensorParam):
            spec = pprint.pformat(_tensor_spec(p), width=100, compact=True, sort_dicts=False)
            spec = spec.replace("\n", "\n" + " " * 8)
            lines.append(f'        ({p.name!r}, "{role(p)}", {spec}),')
        else:
            lines.append(f'        ({p.name!r}, "value", {_value_text(p)}),')
    lines.append("    ]},")
    return "\n".join(lines)


def size_names(records: list[LaunchRecord]) -> list[str]:
    """One name per launch: "captured" for one; else the integer arguments that tell them apart."""
    if len(records) == 1:
        return ["captured"]
    ints = [{p.name: p.value for p in r.params if p.kind == "int" and not p.constexpr} for r in records]
    varying = [n for n in ints[0] if len({i.get(n) for i in ints}) > 1 and "stride" not in n.lower()][:3]
    names = ["_".join(f"{n}{i.get(n)}" for n in varying) or f"launch{k}" for k, i in enumerate(ints)]
    return [n if names.count(n) == 1 else f"{n}_{k}" for k, n in enumerate(names)]


def _elements(record: LaunchRecord) -> int:
    return sum(math.prod(p.shape) for p in record.tensors())


def check_sizes(records: list[LaunchRecord], names: list[str]) -> list[str]:
    """At most two sizes cheap enough for the CPU interpreter: the smallest and the largest of them
    (the smallest size of all if none is cheap)."""
    cost = lambda nr: (nr[1].programs, _elements(nr[1]))  # noqa: E731
    cheap = sorted(((n, r) for n, r in zip(names, records)
                    if _elements(r) <= CHECK_ELEMENTS and r.programs <= CHECK_PROGRAMS), key=cost)
    if not cheap:
        return [min(zip(names, records), key=cost)[0]]
    return list(dict.fromkeys([cheap[0][0], cheap[-1][0]]))


def tolerance(records: list[LaunchRecord], sources: list[str]) -> tuple[str, str]:
    """Exact, unless the kernel accumulates with atomics (then its order changes the rounding)."""
    if not any("atomic_" in s for s in sources):
        return '{"atol": 0.0, "rtol": 0.0}', "exact: a remap only reorders programs that write disjoint outputs"
    dtypes = {p.dtype for r in records for p in r.tensors() if p.written}
    if dtypes & {"float16", "bfloat16"}:
        return '{"atol": 1e-2, "rtol": 1e-2}', "atomics reorder half-precision sums: torch.testing's fp16 level"
    return '{"atol": 1e-5, "rtol": 1.3e-6}', "atomics reorder float32 sums: torch.testing's float32 level"


def declaration(records: list[LaunchRecord], hook: HookPlan, grid_values: list[dict[str, int]],
                sources: list[str]) -> str:
    """The declaration block written after the kernel."""
    names = size_names(records)
    kernel = records[0].kernel.name
    sizes = {n: {"launch": i, **values} for i, (n, values) in enumerate(zip(names, grid_values))}
    default = max(zip(names, records), key=lambda nr: nr[1].programs)[0]
    tol, why = tolerance(records, sources)
    half = {p.dtype for r in records for p in r.tensors() if p.dtype.startswith(("float16", "bfloat16", "float8"))}
    fp32 = (f"CPU_CHECK_FLOAT32 = True  # {', '.join(sorted(half))} into tl.dot: the CPU interpreter computes it "
            f"wrongly, so the CPU check runs in float32\n" if half and any("dot(" in s for s in sources) else "")
    grid_items = ", ".join(f'size["{p}"]' for p in hook.grid_params)
    extents = "".join(f'{p}=spec["grid"][{int(p.rsplit("_", 1)[1])}], ' for p in hook.axis_params)
    launches = "\n".join(_launch_text(r) for r in records)
    return _TEMPLATE.format(hook=hook.name, sizes=pprint.pformat(sizes, width=110, sort_dicts=False),
                            default=default, check=check_sizes(records, names), tol=tol, why=why,
                            launches=launches, grid=grid_items + ("," if len(hook.grid_params) == 1 else ""),
                            kernel=kernel, extents=extents, fp32=fp32,
                            tensor_fn=rebuild.template_source().rstrip())


_TEMPLATE = '''
REMAP_HOOK = "{hook}"
SIZES = {sizes}
DEFAULT_SIZE = "{default}"
CHECK_SIZES = {check}
TOLERANCE = {tol}  # {why}
{fp32}
# The recorded launches: (parameter, role, value). Tensors are rebuilt by layout from a seeded
# generator (integer tensors from their recorded values or range); "output" tensors are the ones the
# launch wrote, "in_place" ones it also read first.
_LAUNCHES = [
{launches}
]


def grid(size):
    return ({grid})


{tensor_fn}

def make_inputs(size, seed, device):
    generator = torch.Generator().manual_seed(seed)
    params = _LAUNCHES[size["launch"]]["params"]
    return {{(name if role == "input" else name + "_before"): _tensor(spec, generator, device)
            for name, role, spec in params if role in ("input", "in_place")}}


def make_outputs(size, device):
    return {{name: torch.empty(spec["extent"], dtype=getattr(torch, spec["dtype"]), device=device)
            .as_strided(spec["shape"], spec["strides"], spec["offset"])
            for name, role, spec in _LAUNCHES[size["launch"]]["params"] if role in ("output", "in_place")}}


def launch(inputs, outputs, size, num_xcds):
    spec = _LAUNCHES[size["launch"]]
    args = {{}}
    for name, role, value in spec["params"]:
        if role == "in_place":
            outputs[name].copy_(inputs[name + "_before"])
        args[name] = inputs[name] if role == "input" else outputs[name] if role != "value" else value
    programs = spec["grid"][0] * spec["grid"][1] * spec["grid"][2]
    {kernel}[(programs,)](**args, {extents}NUM_XCDS=num_xcds, **spec["options"])
'''
