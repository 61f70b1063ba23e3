"""Lay out SageMaker's /opt/ml tree for a Plan, so one entrypoint serves every backend.

ROOT/input/config/{hyperparameters,inputdataconfig,resourceconfig,checkpointconfig}.json
ROOT/input/data/train/       NAME_train.rec, NAME_train.idx, manifest.json
ROOT/input/data/validation/  NAME_val.rec,   NAME_val.idx,   manifest.json
                             (+ NAME_test.rec, NAME_test.idx when the dataset holds a test split)
ROOT/model  ROOT/checkpoints  ROOT/output/data
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from finetune.data.channels import CHANNELS, RECORDIO, channel_files
from finetune.files import write_atomic

__all__ = ["CHANNELS", "RECORDIO", "channel_files", "layout"]


def layout(root: Path, plan, hosts: list[str] | None = None, current: str = "algo-1") -> Path:
    """Create the tree under ``root`` for ``plan`` (links to the dataset, config files)."""
    config = root / "input" / "config"
    for d in (config, root / "model", root / "checkpoints", root / "output" / "data"):
        d.mkdir(parents=True, exist_ok=True)
    dataset = Path(plan.dataset.path)
    for channel, split in CHANNELS.items():
        cdir = root / "input" / "data" / channel
        cdir.mkdir(parents=True, exist_ok=True)
        for name in channel_files(plan.dataset.name, split, plan.dataset.test_count > 0):
            link = cdir / name
            if not link.exists():
                os.symlink((dataset / name).resolve(), link)
    hosts = hosts or [current]
    files = {
        "hyperparameters.json": plan.hyperparameters.to_strings(),
        "inputdataconfig.json": {
            c: {
                "ContentType": RECORDIO,
                "TrainingInputMode": "File",
                "S3DistributionType": "FullyReplicated",
                "RecordWrapperType": "None",
            }
            for c in CHANNELS
        },
        "resourceconfig.json": {
            "current_host": current,
            "hosts": hosts,
            "network_interface_name": "lo",
        },
        "checkpointconfig.json": {"LocalPath": str(root / "checkpoints")},
    }
    for name, content in files.items():
        write_atomic(config / name, json.dumps(content, indent=2))
    return root
