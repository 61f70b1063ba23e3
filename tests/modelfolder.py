"""A small torch model folder made by hand (the files a finished run leaves in ml/model),
and the same folder as SageMaker's model.tar.gz or the EC2 agent's model/ uploads, for the
tests of predicting with a cloud run's model without training one."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

CLASSES = [f"class{i}" for i in range(8)]


def make_torch_model(folder: Path) -> Path:
    """A randomly initialised (seeded) 8-class ResNet-18 for 32 px images, as a model folder."""
    import torch
    from torchvision import models

    from finetune.contracts.hparams import TrainHyperparameters
    from finetune.train import preprocess

    hp = TrainHyperparameters(
        engine="torch",
        model="resnet18",
        pretrained=False,
        num_classes=len(CLASSES),
        num_training_samples=80,
        image_size=32,
        epochs=1,
        batch_per_device=8,
        global_batch=8,
        lr_per_device=0.001,
        lr=0.001,
    )
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    net = models.get_model("resnet18", weights=None, num_classes=len(CLASSES))
    # half precision: half the bytes to pack and move (loading casts back to float32)
    state = {k: v.half() if v.is_floating_point() else v for k, v in net.state_dict().items()}
    torch.save(state, folder / "model.pt")
    preprocess.save(preprocess.Preprocessing.from_hparams(hp), folder)
    classes = {"classes": CLASSES, "image_size": hp.image_size}
    (folder / "classes.json").write_text(json.dumps(classes))
    (folder / "hyperparameters.json").write_text(json.dumps(hp.to_strings()))
    return folder


def model_tar_gz(
    folder: Path, extra: dict[str, bytes] | None = None, weights: bool = True
) -> bytes:
    """``folder``'s files at the archive's root, as SageMaker tars /opt/ml/model (without
    model.pt unless ``weights``); ``extra`` adds members by name (e.g. one that climbs out)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for f in sorted(folder.iterdir()):
            if f.name == "model.pt" and not weights:
                continue
            tar.add(f, arcname=f.name)
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
