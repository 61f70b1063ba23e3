"""Fixtures for the trainer: a temporary /opt/ml tree around the tiny prepared dataset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from finetune.contracts.hparams import TrainHyperparameters

REPO = Path(__file__).resolve().parents[2]


def hparams(**overrides) -> TrainHyperparameters:
    """Small, fast settings for the tiny dataset (8 classes, 80 training images, 40 px)."""
    base = dict(
        model="resnet18_v1",
        pretrained=False,
        num_classes=8,
        num_training_samples=80,
        image_size=32,
        epochs=2,
        batch_per_device=8,
        devices_per_host=1,
        global_batch=8,
        optimizer="adam",
        lr_per_device=0.001,
        lr=0.001,
        lr_schedule="constant",
        device="cpu",
        top_k=3,
        warmup_batches=1,
    )
    base.update(overrides)
    return TrainHyperparameters(**base)


def make_tree(
    root: Path,
    dataset: Path,
    hp: TrainHyperparameters,
    channels: tuple[str, ...] = ("train", "validation"),
    checkpoint_local_path: str | None = "/opt/ml/checkpoints",
) -> Path:
    """A SageMaker-style tree: config JSONs as SageMaker writes them, each channel holding
    links to the prepared dataset's files (as a channel on the same S3 prefix would)."""
    config = root / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(hp.to_strings()))
    spec = {"ContentType": "application/x-recordio", "TrainingInputMode": "File"}
    (config / "inputdataconfig.json").write_text(json.dumps({c: spec for c in channels}))
    resources = {"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}
    (config / "resourceconfig.json").write_text(json.dumps(resources))
    if checkpoint_local_path:
        ckpt = {"LocalPath": checkpoint_local_path, "S3Uri": "s3://bucket/ckpt"}
        (config / "checkpointconfig.json").write_text(json.dumps(ckpt))
    for channel in channels:
        folder = root / "input" / "data" / channel
        folder.mkdir(parents=True)
        for f in dataset.iterdir():
            if f.suffix in (".rec", ".idx", ".json"):
                (folder / f.name).symlink_to(f)
    return root


def trainer_env(root: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, FINETUNE_ML_ROOT=str(root), PYTHONUNBUFFERED="1", **extra)
    env.setdefault("OMP_NUM_THREADS", "2")
    return env


def start_trainer(root: Path, *args: str, **env: str) -> subprocess.Popen:
    """``python -m finetune.train`` as a container would run it, output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "finetune.train", *args],
        cwd=REPO,
        env=trainer_env(root, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def ml_root(tmp_path, tiny_dataset) -> Path:
    """A ready /opt/ml tree with the default test hyperparameters."""
    return make_tree(tmp_path / "ml", tiny_dataset, hparams())


class Output:
    """Collects a subprocess's output lines in a thread, so a test can wait for one."""

    def __init__(self, proc: subprocess.Popen) -> None:
        import threading

        self.proc = proc
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, predicate, timeout: float = 120.0) -> None:
        """Until ``predicate()`` holds; fails if the process ends or time runs out first."""
        import time

        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.finish(timeout=10)
                raise AssertionError("condition never held; output:\n" + self.text())
            time.sleep(0.02)

    def finish(self, timeout: float = 300.0) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._thread.join(timeout=10)
        return rc

    def text(self) -> str:
        return "\n".join(self.lines)

    def values(self, prefix: str, key: str) -> list[int]:
        """The integer ``key=`` of every line starting with ``prefix``."""
        return values(self.lines, prefix, key)


def values(lines: list[str], prefix: str, key: str) -> list[int]:
    """The integer ``key=`` of every line of ``lines`` starting with ``prefix`` (a trainer's
    output: ``finetune-resume checkpoint=... step=3``)."""
    out = []
    for line in lines:
        if line.startswith(prefix):
            fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
            out.append(int(fields[key]))
    return out
