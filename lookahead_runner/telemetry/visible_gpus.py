"""Which NVML devices a process may use: CUDA_VISIBLE_DEVICES mapped onto NVML's list by UUID.

NVML ignores CUDA_VISIBLE_DEVICES and numbers every GPU of the node (in PCI bus order), while Ray and
schedulers hand a process its GPUs through that variable, as indices ("2,0") or UUIDs ("GPU-8f..."), in
the order CUDA will number them. A server given GPUs 2 and 0 must be sampled on exactly those. As CUDA
does, an entry naming no GPU ends the list (what follows it is not visible), a UUID may be given by a
unique prefix, and an index is taken in NVML's order (CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID, which Ray
and vLLM assume).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class NvmlGpu:
    index: int   # NVML's index on this node
    uuid: str    # "GPU-..." as NVML and nvidia-smi print it


def visible_gpus(cuda_visible: str | None, gpus: Sequence[NvmlGpu]) -> list[NvmlGpu]:
    """The GPUs of `gpus` (NVML's list) that CUDA_VISIBLE_DEVICES = `cuda_visible` leaves visible, in CUDA's
    order; None (the variable unset) leaves every GPU."""
    if cuda_visible is None:
        return list(gpus)
    chosen: list[NvmlGpu] = []
    for entry in (part.strip() for part in cuda_visible.split(",")):
        gpu = _named(entry, gpus)
        if gpu is None or gpu in chosen:  # CUDA stops at the first entry it cannot use
            break
        chosen.append(gpu)
    return chosen


def _named(entry: str, gpus: Sequence[NvmlGpu]) -> NvmlGpu | None:
    if entry.isdigit():
        return next((gpu for gpu in gpus if gpu.index == int(entry)), None)
    if not entry.startswith("GPU-"):
        return None  # MIG-... and anything else: not a whole GPU NVML lists
    matches = [gpu for gpu in gpus if gpu.uuid.startswith(entry)]
    return matches[0] if len(matches) == 1 else None


def nvml_visible(cuda_visible: str | None, pynvml=None) -> tuple[object, list[NvmlGpu]]:
    """NVML initialised and the GPUs `cuda_visible` leaves visible; (None, []) without NVML (a CPU node)."""
    try:
        if pynvml is None:
            import pynvml
        pynvml.nvmlInit()
        return pynvml, visible_gpus(cuda_visible, nvml_gpus(pynvml))
    except Exception:  # no NVML library or driver
        return None, []


def nvml_gpus(pynvml) -> list[NvmlGpu]:
    """Every GPU NVML sees on this node, with its UUID ("" where the driver does not say)."""
    found = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        try:
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
        except (AttributeError, pynvml.NVMLError):
            uuid = ""
        found.append(NvmlGpu(index, uuid.decode() if isinstance(uuid, bytes) else uuid))
    return found
