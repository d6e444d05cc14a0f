"""The local GPU as a hardware spec: torch's device properties, and HIP's XCD count on AMD."""

from __future__ import annotations

import ctypes

from swizzleperf.hardware.presets import _CDNA3, _GH100_132, _HOPPER, MiB
from swizzleperf.hardware.spec import Dispatch, HardwareSpec

_HIP_ATTRIBUTE_NUMBER_OF_XCCS = 10018  # hipDeviceAttributeNumberOfXccs, ROCm 7+
_XCDS_BY_ARCH = {"gfx942": 8, "gfx950": 8}  # MI300X/MI325X, MI350X/MI355X
_LARGEST_SINGLE_XCD_L2 = 8 * MiB  # no XCD has more; a larger value from torch is the total


def _hip_xcc_count(device: int) -> int | None:
    try:
        hip = ctypes.CDLL("libamdhip64.so")
    except OSError:
        return None
    value = ctypes.c_int(0)
    status = hip.hipDeviceGetAttribute(ctypes.byref(value), _HIP_ATTRIBUTE_NUMBER_OF_XCCS, device)
    return value.value if status == 0 and value.value > 0 else None


def detect(device: int = 0) -> HardwareSpec | None:
    """A spec for the local GPU, or None when there is none (or torch cannot see it)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0)) or 4 * MiB
    if getattr(torch.version, "hip", None):
        arch = getattr(props, "gcnArchName", "").split(":")[0]
        xccs = _hip_xcc_count(device)
        how = "hipDeviceAttributeNumberOfXccs"
        if xccs is None:
            xccs = _XCDS_BY_ARCH.get(arch, 1)
            how = f"assumed from {arch or 'unknown arch'} (HIP attribute unavailable)"
        per_xcd = l2 // xccs if l2 > _LARGEST_SINGLE_XCD_L2 else l2
        return HardwareSpec(
            name=f"local-{arch or 'rocm'}", vendor="amd", num_domains=xccs,
            cus_per_domain=max(1, props.multi_processor_count // xccs), l2_bytes_per_domain=per_xcd,
            dispatch=Dispatch(policy="round_robin"), l1_bytes_per_cu=_CDNA3["l1_bytes_per_cu"],
            source=f"{props.name}: {xccs} XCDs ({how}), L2 {per_xcd // MiB} MB per XCD from torch")
    sms = props.multi_processor_count
    hopper = getattr(props, "major", 0) == 9  # the L1/shared sizes are Hopper's; elsewhere the L1 is not modelled
    layout = _GH100_132 if hopper and sms == len(_GH100_132["cu_partition"]) else {}
    sets_unit = 128 * 16 * layout.get("l2_partitions", 1)
    return HardwareSpec(
        name=f"local-{props.name.replace(' ', '-').lower()}", cus_per_domain=sms,
        l2_bytes_per_domain=l2 // sets_unit * sets_unit,
        **(_HOPPER if hopper else {**_HOPPER, "unified_l1_bytes_per_cu": None, "l1_bytes_per_cu": 0}) | layout,
        source=f"{props.name}: {sms} SMs, L2 {l2 / MiB:g} MB from torch"
               + ("; two L2 partitions, SM layout as measured on an H100" if layout else "; L2 modelled as one")
               + ("" if hopper else "; not a Hopper GPU: L1 not modelled"))
