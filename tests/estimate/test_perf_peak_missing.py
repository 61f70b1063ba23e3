"""A GPU the peak table lists without any usable peak is unknown to the performance model
(None), not a (None, 'fp32') peak that fails later in arithmetic (found by the type checker)."""

from __future__ import annotations

from finetune.catalog.gpu_peaks import GpuPeak
from finetune.estimate.perf import gpus


def test_a_gpu_without_peaks_is_unknown(monkeypatch):
    bare = GpuPeak("X1", "X1", bf16=None, fp16=None, fp32=None, source="test")
    monkeypatch.setattr(gpus, "peak", lambda gpu_model: bare)
    assert gpus.peak_tflops("X1", "fp32") is None
    assert gpus.peak_tflops("X1", "bf16") is None
