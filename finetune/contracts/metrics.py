"""The contract between the trainer and the report: one metrics event per epoch.

Each event is one JSON object per line in ``metrics.jsonl`` and also one log line of
``key=value`` pairs that SageMaker MetricDefinitions regexes (``METRIC_REGEXES``) can parse.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

LOG_PREFIX = "finetune-metrics"
PROGRESS_PREFIX = "finetune-progress"  # lines within an epoch, for live progress displays
METRICS_FILE = "metrics.jsonl"  # in /opt/ml/output/data


class EpochMetrics(BaseModel):
    """What one finished epoch measured. Throughput excludes the warm-up batches."""

    model_config = ConfigDict(extra="ignore")

    epoch: int  # 0-based here (resumes count on it); people read it from 1 (runs.views.run_dict)
    samples: int  # training samples processed in this epoch (all hosts)
    samples_per_sec: float  # steady state, all hosts together
    epoch_seconds: float
    train_loss: float
    train_acc: float
    val_acc: float | None = None
    val_top_k: float | None = None
    val_count: int | None = None  # validation records counted (each exactly once)
    best_epoch: int | None = None  # the best validation epoch so far (the model's source)
    test_acc: float | None = None  # last event only: the best model on the test split
    lr: float
    devices: int = 1  # devices per host
    hosts: int = 1
    time: float = 0.0  # unix time when the epoch ended
    # telemetry (finetune.train.telemetry; torch engine; None: not measured, e.g. no GPU)
    gpu_util_pct: float | None = None  # mean NVML utilisation of the GPUs in use, 0-100
    gpu_mem_gib: float | None = None  # mean memory in use per GPU, GiB
    input_wait_fraction: float | None = None  # of steady-state time the host waited for input
    input_device_fraction: float | None = None  # of it, input work in series with compute
    data_bound: bool | None = None  # input_wait_fraction above telemetry.DATA_BOUND
    warmup_seconds: float | None = None  # the warm-up batches (a compile lands here)
    validation_seconds: float | None = None  # after the timed steps: validation and its outputs
    achieved_tflops: float | None = None  # model FLOPs (fwd+bwd) x samples_per_sec, all GPUs
    peak_tflops: float | None = None  # dense datasheet peak of all GPUs at the precision
    pct_of_peak: float | None = None  # 100 x achieved_tflops / peak_tflops

    def log_line(self) -> str:
        """'finetune-metrics epoch=0 train_acc=0.5 ...' -- stable names, for regexes."""
        # the wall-clock time stays in metrics.jsonl: '%g' would print it as 1.8e+09
        fields = self.model_dump(exclude_none=True, exclude={"time"})
        return LOG_PREFIX + " " + " ".join(f"{k}={_fmt(v)}" for k, v in fields.items())


class BatchProgress(BaseModel):
    """Where an epoch stands, as the trainer logs it every few seconds:
    'finetune-progress epoch=0 batch=12/50 step=12 lr=0.01 train_loss=2.07 images=96
    seconds=4.1 images_per_sec=23.4' (this host's images; seconds of this epoch so far)."""

    epoch: int
    batch: int
    steps: int
    step: int = 0
    lr: float = 0.0
    train_loss: float | None = None
    images: int = 0
    seconds: float = 0.0
    images_per_sec: float = 0.0

    def log_line(self) -> str:
        loss = "nan" if self.train_loss is None else f"{self.train_loss:.4f}"
        return (
            f"{PROGRESS_PREFIX} epoch={self.epoch} batch={self.batch}/{self.steps} "
            f"step={self.step} lr={self.lr:.6g} train_loss={loss} images={self.images} "
            f"seconds={self.seconds:.2f} images_per_sec={self.images_per_sec:.1f}"
        )

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left in this epoch at its pace so far."""
        if self.batch <= 0 or self.seconds <= 0:
            return None
        return self.seconds / self.batch * max(self.steps - self.batch, 0)


def parse_progress(line: str) -> BatchProgress | None:
    """The progress of a 'finetune-progress ...' log line (anywhere in it), else None."""
    at = line.find(PROGRESS_PREFIX + " ")
    if at < 0:
        return None
    raw = dict(f.split("=", 1) for f in line[at:].split()[1:] if "=" in f)
    try:
        batch, steps = raw.pop("batch").split("/")
        loss = raw.pop("train_loss", "nan")
        fields: dict[str, str | None] = {**raw, "batch": batch, "steps": steps}
        fields["train_loss"] = None if loss == "nan" else loss
        return BatchProgress.model_validate(fields)
    except (KeyError, ValueError):
        return None


def _fmt(v) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


_NUMBER = r"([0-9.eE+-]+)"
METRIC_REGEXES: dict[str, str] = {
    name: rf"{LOG_PREFIX} .*\b{name}={_NUMBER}"
    for name in ("epoch", "samples_per_sec", "epoch_seconds", "train_loss", "train_acc", "val_acc")
}


def append(path: str | Path, event: EpochMetrics) -> None:
    """Append one event to a metrics.jsonl (one line, flushed)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(event.model_dump_json() + "\n")
        f.flush()


def read(path: str | Path) -> list[EpochMetrics]:
    """All events in a metrics.jsonl; a torn last line (killed writer) is ignored."""
    p = Path(path)
    if not p.is_file():
        return []
    events = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            events.append(EpochMetrics.model_validate(json.loads(line)))
        except ValueError:
            continue
    return events
