"""Telemetry arithmetic and the NVML sampler (NVML itself replaced by a small fake module at
the edge: there is no GPU here)."""

from __future__ import annotations

import sys
import threading
import types

from finetune.catalog import gpu_peaks
from finetune.train import telemetry
from finetune.train.telemetry import DATA_BOUND, GpuSampler, Telemetry, summary_line


def test_fields_without_a_gpu_are_null_and_say_n_a():
    t = Telemetry(precision="fp32", flops_per_image=2e9)
    t.add_wait(5.0)  # warm-up: forgotten
    t.start_timing()
    t.add_wait(0.5)
    fields = t.epoch_fields(samples_per_sec=100.0, timed_seconds=2.0)
    assert fields["input_wait_fraction"] == 0.25 and fields["data_bound"] is (DATA_BOUND < 0.25)
    assert fields["achieved_tflops"] == 2e9 * 100 / 1e12
    assert fields["gpu_util_pct"] is None and fields["peak_tflops"] is None
    assert fields["pct_of_peak"] is None
    line = summary_line(3, fields)
    assert "gpu_util_pct=n/a" in line and "pct_of_peak=n/a" in line and "verdict=data-bound" in line


def test_percent_of_the_dense_peak_of_all_gpus_and_the_slowest_process_wait():
    h100 = gpu_peaks.lookup("NVIDIA H100 80GB HBM3")
    t = Telemetry(
        precision="bf16",
        gpus=8,
        peak=h100,
        flops_per_image=24e9,
        reduce_max=lambda value: max(value, 0.1),
    )  # another process waited 0.1 s
    t.start_timing()
    t.add_wait(0.01)
    fields = t.epoch_fields(samples_per_sec=40_000.0, timed_seconds=10.0)
    assert fields["peak_tflops"] == 8 * 989.0
    assert fields["achieved_tflops"] == 960.0
    assert abs(fields["pct_of_peak"] - 100 * 960 / 7912) < 1e-9
    assert fields["input_wait_fraction"] == 0.01 and fields["data_bound"] is False


def test_the_sampler_averages_nvml_readings_per_epoch(monkeypatch):
    readings = iter([(50, 2), (70, 4), (90, 6)] + [(90, 6)] * 1000)
    sampled = threading.Event()
    calls = []

    def util(handle):
        u, m = next(readings)
        calls.append(m)
        if len(calls) >= 3:
            sampled.set()
        return types.SimpleNamespace(gpu=u)

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda uuid: uuid,
        nvmlDeviceGetHandleByPciBusId=lambda bus: bus,
        nvmlDeviceGetUtilizationRates=util,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=calls[-1] * telemetry.GIB),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sampler = GpuSampler.open(["GPU-0"], interval=0.01)
    try:
        assert sampled.wait(10)
        util_pct, mem = sampler.take()
    finally:
        sampler.close()
    assert 50 <= util_pct <= 90 and 2 <= mem <= 6


def test_no_nvml_means_no_sampler(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert GpuSampler.open(["GPU-0"]) is None
    assert GpuSampler.open([]) is None
