"""Telemetry arithmetic and the NVML sampler (NVML itself replaced by a small fake module at
the edge: there is no GPU here)."""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest

from finetune.catalog import gpu_peaks
from finetune.train import telemetry
from finetune.train.telemetry import (
    DATA_BOUND,
    MIN_SAMPLES,
    GpuSampler,
    NoTelemetry,
    Telemetry,
    summary_line,
)


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


def _fake_nvml(monkeypatch, gpu: dict):
    """NVML at the edge: utilisation reads whatever the test says the GPU does now."""
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda uuid: uuid,
        nvmlDeviceGetHandleByPciBusId=lambda bus: bus,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=gpu["util"]),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=gpu["gib"] * telemetry.GIB),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)


def test_gpu_figures_cover_the_timed_steps_not_the_compile_nor_validation(monkeypatch):
    """The first GPU run's compiled job: batch 1 compiled for 33 s with the GPU idle, ~2.6 s of
    busy steps, 21 s of validation; NVML over the whole epoch read 9.9 %. Here the times are
    scaled down (the compile 0.4 s, the steps 0.4 s, validation 0.4 s, sampling 0.01 s), the
    sequence is the fit loop's."""
    gpu = {"util": 0, "gib": 1}
    _fake_nvml(monkeypatch, gpu)
    sampler = GpuSampler.open(["GPU-0"], interval=0.01)
    t = Telemetry(precision="bf16", gpus=1, sampler=sampler)
    try:
        t.begin_epoch()
        t.add_wait(0.4)  # batch 1's fetch and ...
        time.sleep(0.4)  # ... its compile, the GPU idle
        gpu.update(util=95, gib=20)
        t.start_timing()
        for _ in range(20):  # the timed steps keep the GPU busy; a little loader wait
            t.add_wait(0.001)
            t.add_device_input(0.002)
            time.sleep(0.02)
        t.end_timing()
        gpu.update(util=0, gib=20)
        time.sleep(0.4)  # validation (its own compile), the GPU mostly idle
        fields = t.epoch_fields(samples_per_sec=1000.0, timed_seconds=0.4)
    finally:
        sampler.close()
    # one sample read just before start_timing may land in the window (at most one: the
    # sampler reads one at a time); with the minimum of 5 samples that still reads 95 x 4/5
    assert fields["gpu_util_pct"] >= 95 * 4 / 5, fields  # the whole epoch would read ~32
    assert fields["gpu_mem_gib"] >= 20 * 4 / 5
    assert fields["warmup_seconds"] >= 0.4 and fields["validation_seconds"] >= 0.4
    assert fields["input_wait_fraction"] == pytest.approx(0.02 / 0.4)  # not the compile's 0.4
    assert fields["input_device_fraction"] == pytest.approx(0.04 / 0.4)
    assert fields["data_bound"] is False  # on the host wait only
    line = summary_line(0, fields)
    assert f"warmup_seconds={fields['warmup_seconds']:.1f}" in line
    assert "input_device_fraction=0.100" in line


def test_too_few_gpu_samples_read_null_not_a_mean_of_two(monkeypatch):
    gpu = {"util": 80, "gib": 1}
    _fake_nvml(monkeypatch, gpu)
    sampler = GpuSampler.open(["GPU-0"], interval=0.05)
    t = Telemetry(precision="bf16", gpus=1, sampler=sampler)
    try:
        t.begin_epoch()
        t.start_timing()
        time.sleep(0.05 * (MIN_SAMPLES - 2.5))  # about MIN_SAMPLES - 2 samples
        t.end_timing()
        fields = t.epoch_fields(samples_per_sec=1000.0, timed_seconds=0.1)
    finally:
        sampler.close()
    assert fields["gpu_util_pct"] is None and fields["gpu_mem_gib"] is None


def test_an_engine_without_telemetry_still_reports_its_phases():
    quiet = NoTelemetry()
    quiet.begin_epoch()
    time.sleep(0.01)
    quiet.start_timing()
    quiet.end_timing()
    fields = quiet.epoch_fields(100.0, 2.0)
    assert set(fields) == {"warmup_seconds", "validation_seconds"}
    assert fields["warmup_seconds"] >= 0.01 and fields["validation_seconds"] >= 0
