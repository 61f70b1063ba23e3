"""Each GPU model's roofs, from the vendors' datasheets (gpu_peaks.csv, ``SpecSource``): the
dense (not sparse) bf16/fp16/TF32 tensor peaks and the fp32 peak, the memory bandwidth, the
FP32 lanes per SM, matched against ``torch.cuda.get_device_name`` by a regular expression
(first match wins). The trainer divides its achieved TFLOP/s by these; the performance model's
roofline reads them all."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from finetune.catalog._files import bundled_text, read_rows

FILE = "gpu_peaks.csv"
HEADER = (
    "GpuModel", "DeviceNamePattern", "DenseBf16Tflops", "DenseFp16Tflops", "Fp32Tflops",
    "Source", "Notes", "DenseTf32Tflops", "Architecture", "MemoryGBps", "Fp32PerSm",
    "SpecSource",
)  # fmt: skip
_COLUMN = {
    "bf16": "DenseBf16Tflops", "fp16": "DenseFp16Tflops", "fp32": "Fp32Tflops",
    "tf32": "DenseTf32Tflops",
}  # fmt: skip


@dataclass(frozen=True)
class GpuPeak:
    """One GPU model's dense peaks (TFLOP/s, None where the GPU has no such unit)."""

    model: str
    pattern: str
    bf16: float | None
    fp16: float | None
    fp32: float | None
    source: str
    tf32: float | None = None
    architecture: str = ""  # e.g. "Ampere", as instances.csv's GpuArchitecture
    memory_gbps: float | None = None  # DRAM bandwidth, GB/s
    fp32_per_sm: int | None = None  # FP32 lanes per SM: 64 (Volta, Turing, GA100) or 128

    def tflops(self, precision: str) -> float | None:
        """The peak for a training precision (bf16, fp16, fp32; tf32 where the GPU has it)."""
        return getattr(self, precision, None) if precision in _COLUMN else None


@functools.cache
def peaks() -> tuple[GpuPeak, ...]:
    """Every row of the bundled table, in file order."""
    rows = read_rows(bundled_text(FILE), HEADER, FILE)
    return tuple(
        GpuPeak(
            model=r["GpuModel"],
            pattern=r["DeviceNamePattern"],
            **{p: _number(r[column]) for p, column in _COLUMN.items()},
            source=r["Source"],
            architecture=r["Architecture"],
            memory_gbps=_number(r["MemoryGBps"]),
            fp32_per_sm=int(r["Fp32PerSm"]) if r["Fp32PerSm"].strip() else None,
        )
        for r in rows
    )


def lookup(device_name: str | None) -> GpuPeak | None:
    """The row for a CUDA device name ('NVIDIA H100 80GB HBM3'), or None when unknown."""
    if not device_name:
        return None
    for peak in peaks():
        if re.search(peak.pattern, device_name, re.IGNORECASE):
            return peak
    return None


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None
