"""The GPUs a dry run can plan for (`plan.gpu`): memory per device and the dense bf16 peak.

Memory is what `nvidia-smi` reports for the SXM parts (MiB); the peak comes from the one peak table
(callbacks/throughput.py), so a plan's ETA and a run's logged MFU divide by the same number.
"""

from __future__ import annotations

from dataclasses import dataclass

from lit_modules.callbacks.peak_flops import peak_flops
from lit_modules.config.errors import ConfigError

MIB = 1024**2


@dataclass(frozen=True)
class Gpu:
    key: str  # the plan.gpu value
    label: str  # as the plan prints it
    name: str  # as torch names the device: what the peak table is keyed by
    memory_mib: int

    @property
    def memory_bytes(self) -> float:
        return float(self.memory_mib * MIB)

    def peak_flops(self, precision: str) -> float | None:
        """Dense peak FLOP/s at this precision; None where the table has none (fp32: not planned)."""
        return peak_flops(self.name, precision)


GPUS = {g.key: g for g in (
    Gpu("a100", "A100 80GB", "NVIDIA A100-SXM4-80GB", 81_920),
    Gpu("a100_40gb", "A100 40GB", "NVIDIA A100-SXM4-40GB", 40_960),
    Gpu("h100", "H100", "NVIDIA H100 80GB HBM3", 81_559),
    Gpu("h200", "H200", "NVIDIA H200", 143_771),
)}


def gpu(key: str) -> Gpu:
    if key not in GPUS:
        raise ConfigError(f"plan.gpu={key} is not a GPU the planner knows; choose one of {', '.join(GPUS)}.")
    return GPUS[key]
