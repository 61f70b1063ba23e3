"""The dense peak table: every row sourced and consistent, and the names CUDA reports for
the GPUs AWS rents resolve to the right row."""

from __future__ import annotations

import pytest

from finetune.catalog import gpu_peaks


def test_every_row_has_a_source_and_dense_figures_below_the_sparse_ones():
    rows = gpu_peaks.peaks()
    assert {"K80", "M60", "T4", "V100 SXM2", "A10G", "L4", "L40S", "A100 40GB", "A100 80GB",
            "H100 SXM", "H200", "B200"} <= {r.model for r in rows}  # fmt: skip
    for row in rows:
        assert row.source.startswith("https://"), row
        assert row.fp32 and row.fp32 > 0, row
        for tensor in (row.bf16, row.fp16):  # Tensor Core peaks exceed the fp32 one
            assert tensor is None or tensor > row.fp32, row


@pytest.mark.parametrize(
    ("cuda_name", "model", "bf16"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.0),
        ("NVIDIA H200", "H200", 989.0),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB", 312.0),
        ("NVIDIA A10G", "A10G", 70.0),
        ("NVIDIA A10", "A10", 125.0),
        ("NVIDIA L4", "L4", 121.0),
        ("Tesla V100-SXM2-16GB", "V100 SXM2", None),
        ("Tesla T4", "T4", None),
        ("Tesla K80", "K80", None),
        ("NVIDIA GeForce RTX 3090", "RTX 3090", 71.0),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2),
        ("NVIDIA RTX A6000", "RTX A6000", 154.8),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", 364.2),
        ("Quadro RTX 8000", "Quadro RTX 8000", None),
    ],
)
def test_cuda_device_names_resolve(cuda_name, model, bf16):
    peak = gpu_peaks.lookup(cuda_name)
    assert peak.model == model and peak.tflops("bf16") == bf16


def test_unknown_gpus_and_cpus_have_no_peak():
    # RTX 3090/4090 rows exist (calibration data is measured on them); older GeForce cards do not
    assert gpu_peaks.lookup("NVIDIA GeForce RTX 2080 Ti") is None
    assert gpu_peaks.lookup("NVIDIA GeForce RTX 3090 Ti") is None
    assert gpu_peaks.lookup(None) is None
    assert gpu_peaks.lookup("Tesla T4").tflops("int8") is None
