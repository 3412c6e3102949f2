"""Each device's dense half-precision peak, for the logged MFU (callbacks/throughput.py) and the dry run's
plan (plan/devices.py). Lightning-free: a dry run prints its plan without loading Lightning."""

from __future__ import annotations

# Dense peak TFLOP/s per device for bf16/fp16 tensor-core math (vendor datasheets, SXM parts).
PEAK_TFLOPS_BF16 = {
    "H200": 989.0,
    "H100": 989.0,
    "GH200": 989.0,
    "B200": 2250.0,
    "A100": 312.0,
    "L40S": 362.0,
    "A10G": 125.0,
    "L4": 121.0,
}
HALF_PRECISIONS = ("bf16-mixed", "16-mixed", "bf16-true", "16-true")


def peak_flops(device_name: str, precision: str) -> float | None:
    if precision not in HALF_PRECISIONS:
        return None
    name = device_name.upper()
    if "H100" in name and "PCIE" in name:
        return 756e12
    for key in sorted(PEAK_TFLOPS_BF16, key=len, reverse=True):
        if key in name:
            return PEAK_TFLOPS_BF16[key] * 1e12
    return None
