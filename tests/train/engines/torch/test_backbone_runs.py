"""Real trainings of the new families on the tiny generated dataset: each bundled smoke recipe
(ConvNeXt-T, EfficientNetV2-S, ViT-B/16) planned and trained end to end, and an
EfficientNet-B0 (bicubic weights) fine-tuned from a local weight file in torch hub's cache.

The oracle for predict and export: a run's own validation images, given to `finetune predict`
as image files, get exactly the top-1 classes the run recorded for them at its best epoch, and
the exported ONNX model gives the same top-1 on the contract's tensors."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from finetune.cli import app  # noqa: E402
from finetune.contracts.container import Layout  # noqa: E402
from finetune.engines import backbones  # noqa: E402
from finetune.plan import build_plan  # noqa: E402
from finetune.train import preprocess  # noqa: E402
from finetune.train.engines.torch import RUNTIME  # noqa: E402
from finetune.train.engines.torch import weights as wt  # noqa: E402
from finetune.train.layout import load_job  # noqa: E402
from tests.valimages import val_images  # noqa: E402

from ...conftest import hparams, make_tree  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Cannot decide type:UserWarning")


def _recorded_top1(root) -> list[int]:
    out = root / "output" / "data"
    report = json.loads((out / "val-report.json").read_text())
    with open(out / "predictions" / f"val-epoch-{report['epoch']:03d}.csv", newline="") as f:
        return [int(r["top1"]) for r in csv.DictReader(f)]


def _predicted_top1(model_dir, folder) -> list[int]:
    res = CliRunner().invoke(app, ["predict", str(model_dir), str(folder), "--format", "json"])
    assert res.exit_code == 0, res.output
    return [p["top"][0]["label"] for p in json.loads(res.output)["predictions"]]


@pytest.mark.slow  # a trainer in this process: ~5-10 s each on 2 cores
@pytest.mark.parametrize(
    ("recipe", "model"),
    [("smoke-convnext-tiny", "convnext_tiny"), ("smoke-efficientnet-v2-s", "efficientnet_v2_s"),
     ("smoke-vit-b16", "vit_b_16")],
)  # fmt: skip
def test_the_smoke_recipe_trains_and_predict_reproduces_validation(
    recipe, model, tiny_dataset, tmp_path
):
    plan = build_plan(recipe, tiny_dataset, overrides=["loader_workers=0"])
    hp = plan.hyperparameters
    row = backbones.TABLE[model]
    resize = round(32 * row.resize / row.crop)
    assert (hp.model, hp.image_size, hp.resize_shorter) == (model, 32, resize)
    assert (hp.interpolation, hp.mean, hp.std) == (row.interpolation, row.mean, row.std)
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    assert RUNTIME.fit(load_job(Layout(root))).stopped_by is None
    metrics = (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 1 and json.loads(metrics[0])["val_count"] == 48
    contract = preprocess.load(root / "model")
    assert contract.resize_shorter == hp.resize_shorter and contract.mean == row.mean
    val_images(tiny_dataset, tmp_path / "val")
    assert _predicted_top1(root / "model", tmp_path / "val") == _recorded_top1(root)


@pytest.mark.slow  # a fine-tune, predict and an ONNX export (~20 s on 2 cores)
def test_bicubic_weights_from_the_hub_cache_predict_and_export_reproduce_validation(
    tiny_dataset, tmp_path
):
    """EfficientNet-B0's weights evaluate with a bicubic resize to 256 then a 224 crop: at
    32 px the contract resizes the 40 px images to 37 px, bicubic. Random-init weights saved
    as EFFICIENTNET_B0-<sha256 prefix>.pth and named by the recipe (torch hub's shared cache
    gives only files finetune downloads) are checked and fine-tuned; predict and the ONNX
    export give the recorded top-1."""
    from torchvision import models

    torch.manual_seed(0)
    saved = models.get_model("efficientnet_b0", weights=None).state_dict()
    wt.hub_dir().mkdir(parents=True)
    tmp = wt.hub_dir() / "tmp.pth"
    torch.save(saved, tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    path = tmp.rename(wt.hub_dir() / f"efficientnet_b0-{digest[:10]}.pth")
    fields = backbones.preprocessing("efficientnet_b0", 32)
    assert fields["resize_shorter"] == 37 and fields["interpolation"] == "bicubic"
    hp = hparams(engine="torch", model="efficientnet_b0", pretrained=True, loader_workers=0,
                 epochs=1, max_batches_per_epoch=3, optimizer="sgd", lr=0.05,
                 lr_per_device=0.05, weights=str(path), **fields)  # fmt: skip
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    assert RUNTIME.fit(load_job(Layout(root))).stopped_by is None
    record = json.loads((root / "output" / "data" / "run-record.json").read_text())
    assert record["pretrained"]["sha256"] == digest and record["pretrained"]["file"] == str(path)
    assert record["preprocessing"]["interpolation"] == "bicubic"
    trained = torch.load(root / "model" / "model.pt", weights_only=True)
    assert trained["classifier.1.weight"].shape == (8, 1280)

    val_images(tiny_dataset, tmp_path / "val")
    recorded = _recorded_top1(root)
    assert _predicted_top1(root / "model", tmp_path / "val") == recorded

    out = tmp_path / "exported"
    res = CliRunner().invoke(app, ["export", str(root / "model"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    import onnxruntime as ort

    from finetune.inference import inputs
    from finetune.train.engines.torch import validation
    from finetune.train.engines.torch.resident import ImageStore

    packed = inputs.pack(inputs.collect([str(tmp_path / "val")]), tmp_path)
    contract = preprocess.load(out)  # the exported contract: the run's
    store = ImageStore.load(packed.rec, packed.idx, contract, "cpu")
    batches = validation.resident_batches(store, contract)  # predict's tensors
    tensors = np.concatenate([x.contiguous().numpy() for x, _ in batches])
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    scores = session.run(None, {"data": tensors})[0]
    assert list(scores.argmax(1)) == recorded
