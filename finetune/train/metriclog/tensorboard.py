"""TensorBoard event files through tensorboardX (a light writer: no TensorFlow, no
tensorboard package at train time), in /opt/ml/output/tensorboard (Layout.tensorboard_dir).
``finetune runs show RUN --tensorboard`` says where a run's files are and how to open them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


class TensorBoardLogger:
    """Scalars by global step; the hyperparameters and the run record as text."""

    name = "tensorboard"

    def __init__(self, logdir: Path):
        from tensorboardX import SummaryWriter

        logdir.mkdir(parents=True, exist_ok=True)
        # a resumed run appends a new event file in the same folder: TensorBoard merges them
        self.writer = SummaryWriter(logdir=str(logdir), flush_secs=30)

    def params(self, params: Mapping[str, str], tags: Mapping[str, str]) -> None:
        rows = "\n".join(f"| {k} | {v} |" for k, v in sorted(params.items()))
        self.writer.add_text("hyperparameters", "| name | value |\n|---|---|\n" + rows, 0)
        self.writer.add_text("record", "```\n" + json.dumps(dict(tags), indent=1) + "\n```", 0)

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)

    def close(self, status: str) -> None:
        self.writer.add_text("status", status, 0)
        self.writer.close()
