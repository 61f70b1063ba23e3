"""timm's models in the torch engine (``model.name: timm/<model>[.<tag>]``), with no internet:
the weight tag's pretrained config becomes the plan's preprocessing contract; names, tags and
image sizes are checked before a run exists; `recipes models` lists timm's registry; weights
come from a stand-in hub on 127.0.0.1 (tests/hubserver.py) through the launch, are checked
against the blob the hub's cache names, trained, and the run's predict and ONNX export give the
top-1 classes its validation recorded."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

from finetune.cli import app  # noqa: E402
from finetune.errors import ConfigError, DataError  # noqa: E402
from finetune.plan import build_plan  # noqa: E402
from finetune.runs.ledger import open_default  # noqa: E402
from finetune.train import preprocess  # noqa: E402
from finetune.train.engines.torch import hub  # noqa: E402
from tests.hubserver import HubServer  # noqa: E402
from tests.valimages import val_images  # noqa: E402

from .test_backbone_runs import _predicted_top1, _recorded_top1  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Cannot decide type:UserWarning")
CONVNEXT, REPO = "timm/test_convnext", "timm/test_convnext.r160_in1k"
LAUNCH = ["launch", "smoke-resnet18-torch", f"model.name={CONVNEXT}", "model.pretrained=true"]


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _runs() -> list:
    with open_default() as ledger:
        return ledger.list()


@pytest.fixture
def hub_server(monkeypatch):
    server = HubServer()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    yield server
    server.close()


def _safetensors(arch: str) -> bytes:
    from safetensors.torch import save

    torch.manual_seed(0)
    return save(timm.create_model(arch, pretrained=False).state_dict())


def test_the_weights_pretrained_config_is_the_plans_contract(tiny_dataset):
    cfg = timm.models.get_pretrained_cfg("test_vit").to_dict()
    plan = build_plan("smoke-resnet18-torch", tiny_dataset, overrides=["model.name=timm/test_vit"])
    hp = plan.hyperparameters
    assert (hp.model, hp.image_size) == ("timm/test_vit", 32)
    assert hp.resize_shorter == math.floor(32 / cfg["crop_pct"])  # timm's eval transform
    assert hp.interpolation == cfg["interpolation"] == "bicubic"
    assert hp.mean == pytest.approx([m * 255 for m in cfg["mean"]])
    assert hp.std == pytest.approx([s * 255 for s in cfg["std"]])


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("model.name=timm/test_convnxt", 'Did you mean "test_convnext"?'),
        ("model.name=timm/test_convnext.in22k", "use one of its tags: r160_in1k"),
        ("data.image_size=40", "cannot take data.image_size=40"),  # test_vit's 16 px patches
    ],
)
def test_names_tags_and_sizes_are_refused_before_the_dataset_is_read(override, said, tmp_path):
    with pytest.raises(ConfigError) as info:
        build_plan("smoke-resnet18-torch", tmp_path / "no-dataset",
                   overrides=["model.name=timm/test_vit", override])  # fmt: skip
    assert said in str(info.value) and "To fix:" in str(info.value)


def test_the_mxnet_engine_says_a_timm_model_is_the_torch_engines(tmp_path):
    with pytest.raises(ConfigError, match="is a torch model"):
        build_plan("smoke-resnet18", tmp_path, overrides=[f"model.name={CONVNEXT}"])


def test_recipes_models_lists_timms_registry_with_parameters_and_tags():
    res = cli("recipes", "models", "--filter", "test_conv", "--pretrained", "--format", "json")
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    row = rows[f"timm/{REPO.split('/')[1]}"]
    net = timm.create_model("test_convnext")
    assert row["parameters"] == sum(p.numel() for p in net.parameters())
    assert (row["input_size"], row["tag"], row["pretrained"]) == (160, "r160_in1k", True)
    assert all("test_conv" in name for name in rows)
    table = cli("recipes", "models", "--filter", "test_convnext")
    assert table.exit_code == 0 and "r160_in1k" in table.output and "0.3M" in table.output
    none = cli("recipes", "models", "--filter", "no_such_network")
    assert none.exit_code == 0 and "No timm model name contains 'no_such_network'" in none.output
    assert "Try a shorter word" in none.output and "name  parameters" not in none.output


def test_offline_the_dry_run_refuses_before_a_run_exists(tiny_dataset):
    """conftest points HF_ENDPOINT at a closed port: nothing cached, nothing reachable."""
    res = cli(*LAUNCH, "--dataset", str(tiny_dataset), "--dry-run")
    assert res.exit_code == 3, res.output
    out = " ".join(res.output.split())
    assert f"pretrained weights for {CONVNEXT} are not in {hub.cache_dir()}" in out
    assert "cannot be reached" in out and "To fix: connect to the internet" in out
    assert _runs() == []


def test_a_hub_over_plain_http_is_refused_before_a_run_exists(tiny_dataset, monkeypatch):
    """The digest a hub file is checked against is the hub's reply: TLS only, except for a
    stand-in on this machine (tests/hubserver.py)."""
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.example")
    res = cli(*LAUNCH, "--dataset", str(tiny_dataset), "--dry-run")
    assert res.exit_code == 3, res.output
    out = " ".join(res.output.split())
    assert "HF_ENDPOINT=http://hub.example is not an https:// address" in out
    assert "To fix: unset HF_ENDPOINT" in out and _runs() == []


def test_a_damaged_cache_file_is_refused(tmp_path):
    blob = tmp_path / "blobs" / hashlib.sha256(b"the hub's bytes").hexdigest()
    blob.parent.mkdir()
    blob.write_bytes(b"other bytes")
    link = tmp_path / "model.safetensors"
    link.symlink_to(blob)
    with pytest.raises(DataError, match="damaged or not the hub's file"):
        hub.verify(link)
    blob.write_bytes(b"the hub's bytes")
    assert hub.verify(link) == blob.name


@pytest.mark.slow  # a launch through the local backend, predict and an ONNX export (~30 s)
def test_hub_weights_launch_train_predict_and_export(hub_server, tiny_dataset, tmp_path):
    """The launch fetches the served file into the hub's cache once (the dry-run fetched
    nothing); the run records the file's sha256 and the pretrained config; predict and the
    ONNX export give the recorded validation top-1; the next launch uses the cache."""
    data = _safetensors("test_convnext")
    hub_server.put(REPO, "model.safetensors", data)
    args = [*LAUNCH, "--dataset", str(tiny_dataset), "schedule.epochs=1",
            "train.max_batches_per_epoch=3", "data.loader_workers=0"]  # fmt: skip
    dry = cli(*args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "downloaded once from 127.0.0.1" in " ".join(dry.output.split())
    assert hub_server.requests == [("HEAD", f"/{REPO}/resolve/main/model.safetensors")]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    (run,) = _runs()
    assert run.status == "completed"
    gets = [r for r in hub_server.requests if r[0] == "GET"]
    assert gets == [("GET", f"/{REPO}/resolve/main/model.safetensors")]
    root = Path(run.run_dir)
    record = json.loads((root / "ml" / "output" / "data" / "run-record.json").read_text())
    assert record["pretrained"]["sha256"] == hashlib.sha256(data).hexdigest()
    cfg = record["pretrained"]["pretrained_cfg"]
    assert (cfg["hf_hub_id"], cfg["crop_pct"], cfg["interpolation"]) == (REPO, 0.95, "bicubic")
    model_dir = root / "ml" / "model"
    contract = preprocess.load(model_dir)
    assert (contract.resize_shorter, contract.interpolation) == (33, "bicubic")
    assert contract.mean == pytest.approx([m * 255 for m in cfg["mean"]])

    val_images(tiny_dataset, tmp_path / "val")
    recorded = _recorded_top1(root / "ml")
    assert _predicted_top1(model_dir, tmp_path / "val") == recorded
    _export_gives(model_dir, tmp_path, recorded)

    again = cli(*args, "--dry-run")  # the hub's cache now: nothing asked of the server
    assert again.exit_code == 0 and "pretrained, from " in " ".join(again.output.split())
    assert len([r for r in hub_server.requests if r[0] == "GET"]) == 1


def _export_gives(model_dir, tmp_path, recorded: list[int]) -> None:
    import onnxruntime as ort

    from finetune.inference import inputs
    from finetune.train.engines.torch import validation
    from finetune.train.engines.torch.resident import ImageStore

    out = tmp_path / "exported"
    res = cli("export", str(model_dir), "--out", str(out))
    assert res.exit_code == 0, res.output
    packed = inputs.pack(inputs.collect([str(tmp_path / "val")]), tmp_path)
    contract = preprocess.load(out)
    store = ImageStore.load(packed.rec, packed.idx, contract, "cpu")
    tensors = np.concatenate([x.contiguous().numpy() for x, _ in
                              validation.resident_batches(store, contract)])  # fmt: skip
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    assert list(session.run(None, {"data": tensors})[0].argmax(1)) == recorded
