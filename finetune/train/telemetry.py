"""How well a run uses its hardware, per epoch: GPU utilisation and memory (NVML), the share
of step time spent waiting for input, and achieved TFLOP/s against the GPU's dense peak, over
the epoch's timed steps only; the data-bound verdict comes from the input wait, not from
utilisation (docs/trainer.md: telemetry)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from finetune.catalog.gpu_peaks import GpuPeak

DATA_BOUND = 0.10  # input_wait_fraction above this: a faster input path would speed training
# NVML's own utilisation window is no shorter: docs/decisions/008-gpu-telemetry-sampling.md
SAMPLE_EVERY_S = 0.15
MIN_SAMPLES = 5  # fewer samples than this: the mean says too little, reported as null
GIB = 1024**3

log = logging.getLogger(__name__)


class GpuSampler:
    """A daemon thread reading utilisation and memory in use of some GPUs from NVML every
    ``interval`` seconds; :meth:`take` returns the means since the previous call."""

    def __init__(self, handles: list, nvml, interval: float = SAMPLE_EVERY_S) -> None:
        self._handles, self._nvml, self._interval = handles, nvml, interval
        self._lock = threading.Lock()
        self._util = self._mem = 0.0
        self._count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, gpu_ids: list[str], interval: float = SAMPLE_EVERY_S) -> GpuSampler | None:
        """A sampler for GPUs named by NVML UUID ("GPU-...") or PCI bus id; None (logged)
        when nvidia-ml-py or the NVML library is missing, or a GPU is not found."""
        if not gpu_ids:
            return None
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [
                pynvml.nvmlDeviceGetHandleByUUID(i)
                if i.startswith("GPU-")
                else pynvml.nvmlDeviceGetHandleByPciBusId(i)
                for i in gpu_ids
            ]
        except Exception as exc:  # ImportError, NVMLError_*: telemetry is optional
            log.warning("GPU utilisation not sampled (NVML: %s: %s)", type(exc).__name__, exc)
            return None
        return cls(handles, pynvml, interval)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                util = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
                mem = [self._nvml.nvmlDeviceGetMemoryInfo(h).used for h in self._handles]
            except Exception as exc:  # a GPU that fell off the bus must not end training
                log.warning("NVML sampling stopped: %s", exc)
                return
            with self._lock:
                self._util += sum(util) / len(util)
                self._mem += sum(mem) / len(mem) / GIB
                self._count += 1

    def take(self, minimum: int = 1) -> tuple[float | None, float | None]:
        """(mean utilisation %, mean memory in use GiB per GPU) since the last take; (None,
        None) with fewer than ``minimum`` samples."""
        with self._lock:
            n, util, mem = self._count, self._util, self._mem
            self._util = self._mem = 0.0
            self._count = 0
        return (util / n, mem / n) if n and n >= minimum else (None, None)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


class Phases:
    """The wall clock of an epoch's parts: warm-up (from :meth:`begin_epoch` to
    :meth:`start_timing`; compilation lands there) and what follows the timed steps (from
    :meth:`end_timing` to the epoch's fields: validation and its outputs)."""

    def __init__(self) -> None:
        self._began: float | None = None
        self._timed: float | None = None
        self._ended: float | None = None

    def begin_epoch(self) -> None:
        self._began, self._timed, self._ended = time.monotonic(), None, None

    def start_timing(self) -> None:
        self._timed = time.monotonic()

    def end_timing(self) -> None:
        self._ended = time.monotonic()

    def phase_fields(self) -> dict:
        now = time.monotonic()
        warmup = None
        if self._began is not None and self._timed is not None:
            warmup = self._timed - self._began
        return {
            "warmup_seconds": warmup,
            "validation_seconds": None if self._ended is None else now - self._ended,
        }


class Telemetry(Phases):
    """One process's telemetry. ``gpus`` is the number of GPUs of the whole run (for the peak);
    ``reduce_max`` combines a value over the run's processes (None: one process)."""

    def __init__(
        self,
        *,
        precision: str,
        gpus: int = 0,
        peak: GpuPeak | None = None,
        flops_per_image: float | None = None,
        sampler: GpuSampler | None = None,
        reduce_max: Callable[[float], float] | None = None,
    ) -> None:
        self.precision, self.gpus, self.peak = precision, gpus, peak
        self.flops_per_image = flops_per_image
        self.sampler, self.reduce_max = sampler, reduce_max
        self.waited = 0.0  # host blocked on the loader, the steps timed so far this epoch
        self.device_input = 0.0  # input work in series with compute, the same steps
        self.sampled: tuple[float | None, float | None] = (None, None)
        super().__init__()

    def add_wait(self, seconds: float) -> None:
        """The host waited ``seconds`` for the loader."""
        self.waited += seconds

    def add_device_input(self, seconds: float) -> None:
        """``seconds`` of input work ran in series with compute."""
        self.device_input += seconds

    def begin_epoch(self) -> None:
        """A new epoch: nothing measured yet."""
        super().begin_epoch()
        self.waited = self.device_input = 0.0
        self.sampled = (None, None)

    def start_timing(self) -> None:
        """The warm-up batches are over: input time and GPU samples count from here, as
        images/s does (the samples of the warm-up, a compile among them, are dropped)."""
        super().start_timing()
        self.waited = self.device_input = 0.0
        if self.sampler is not None:
            self.sampler.take()

    def end_timing(self) -> None:
        """The timed steps are over (validation comes next): keep their GPU samples."""
        super().end_timing()
        if self.sampler is not None:
            self.sampled = self.sampler.take(MIN_SAMPLES)

    @property
    def peak_tflops(self) -> float | None:
        """The dense peak of all GPUs of the run at its precision (None on a CPU)."""
        one = self.peak.tflops(self.precision) if self.peak and self.gpus else None
        return one * self.gpus if one else None

    def epoch_fields(self, samples_per_sec: float, timed_seconds: float) -> dict:
        """The epoch's telemetry fields of the metrics event. ``timed_seconds`` is this
        process's steady-state training time (the denominator of images/s). Every process
        of a run calls this together (the input wait is the slowest process's)."""
        most = self.reduce_max or (lambda value: value)
        waited, device_input = most(self.waited), most(self.device_input)
        fraction = min(waited / timed_seconds, 1.0) if timed_seconds > 0 else None
        in_series = min(device_input / timed_seconds, 1.0) if timed_seconds > 0 else None
        achieved = None
        if self.flops_per_image and samples_per_sec > 0:
            achieved = self.flops_per_image * samples_per_sec / 1e12
        peak = self.peak_tflops
        util, mem = self.sampled
        return {
            "gpu_util_pct": util,
            "gpu_mem_gib": mem,
            "input_wait_fraction": fraction,
            "input_device_fraction": in_series,
            "data_bound": None if fraction is None else fraction > DATA_BOUND,
            "achieved_tflops": achieved,
            "peak_tflops": peak,
            "pct_of_peak": 100 * achieved / peak if achieved is not None and peak else None,
            **self.phase_fields(),
        }

    def summary(self, epoch: int, fields: dict) -> str:
        """The epoch's ``finetune-telemetry`` line (:func:`summary_line`)."""
        return summary_line(epoch, fields)

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()


class NoTelemetry(Phases):
    """The telemetry of an engine that measures no hardware (MXNet): the epoch's phases only,
    no line."""

    def epoch_fields(self, samples_per_sec: float, timed_seconds: float) -> dict:
        """The phases; the hardware fields stay null."""
        return self.phase_fields()

    def summary(self, epoch: int, fields: dict) -> None:
        """No line."""
        return None

    def close(self) -> None:
        """Nothing to end."""


def summary_line(epoch: int, fields: dict) -> str:
    """'finetune-telemetry epoch=0 gpu_util_pct=n/a ... verdict=compute-bound' for people
    (the metrics line leaves out what was not measured; this one says so)."""

    def show(key: str, fmt: str) -> str:
        value = fields.get(key)
        return "n/a" if value is None else format(value, fmt)

    bound = fields.get("data_bound")
    verdict = "n/a" if bound is None else "data-bound" if bound else "not-data-bound"
    return (
        f"finetune-telemetry epoch={epoch} gpu_util_pct={show('gpu_util_pct', '.1f')} "
        f"gpu_mem_gib={show('gpu_mem_gib', '.2f')} "
        f"input_wait_fraction={show('input_wait_fraction', '.3f')} verdict={verdict} "
        f"(threshold {DATA_BOUND:g}, host wait) "
        f"input_device_fraction={show('input_device_fraction', '.3f')} "
        f"warmup_seconds={show('warmup_seconds', '.1f')} "
        f"validation_seconds={show('validation_seconds', '.1f')} "
        f"achieved_tflops={show('achieved_tflops', '.4g')} "
        f"peak_tflops={show('peak_tflops', '.4g')} pct_of_peak={show('pct_of_peak', '.1f')}"
    )
