"""Pretrained weights by default: fetched once into the cache (digest checked, atomic, with
progress), used from the cache afterwards, and refused before any run exists when they
cannot be had. Every file comes from a small HTTP server on 127.0.0.1 that the test fills
with state_dicts it makes; nothing touches the internet (conftest points the published
weights' mirror at a closed local port)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.download import Unreachable, fetch, probe
from finetune.errors import DataError
from finetune.runs.ledger import open_default

from ..weightserver import WeightServer


@pytest.fixture
def server():
    s = WeightServer()
    yield s
    s.close()


def _state_bytes(**tensors) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({k: torch.full((4,), float(v)) for k, v in tensors.items()}, buf)
    return buf.getvalue()


def _named(model: str, data: bytes) -> str:
    return f"{model}-{hashlib.sha256(data).hexdigest()[:8]}.pth"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# ---- the download itself ----------------------------------------------------------------
def test_a_download_is_verified_written_whole_and_reported(server, tmp_path):
    data = _state_bytes(a=1, b=2)
    url = server.put(_named("tiny", data), data)
    seen = []

    def progress(label, total):
        seen.append((label, total))
        return lambda n: seen.append(n)

    dest = tmp_path / "cache" / url.rsplit("/", 1)[-1]
    digest = fetch(url, dest, hashlib.sha256(data).hexdigest(), progress)
    assert dest.read_bytes() == data and digest == hashlib.sha256(data).hexdigest()
    assert seen[0] == (dest.name, len(data)) and sum(seen[1:]) == len(data)
    # no temporary file left; the digest recorded beside the file (checked on every use)
    assert _leftovers(dest.parent) == [dest.name, f"{dest.name}.sha256"]
    assert (dest.parent / f"{dest.name}.sha256").read_text() == digest + "\n"
    assert probe(url) == len(data)


def test_a_wrong_digest_is_refused_and_nothing_is_kept(server, tmp_path):
    data = _state_bytes(a=1)
    wrong_name = server.put("tiny-00000000.pth", data)  # its name promises another file
    with pytest.raises(DataError, match=r"not the 00000000\.\.\. its name promises") as exc:
        fetch(wrong_name, tmp_path / "c" / "tiny-00000000.pth")
    assert "To fix:" in str(exc.value) and _leftovers(tmp_path / "c") == []
    right_name = server.put(_named("tiny", data), data)
    with pytest.raises(DataError, match=r"not the expected 0{64}"):
        fetch(right_name, tmp_path / "c" / "t.pth", sha256="0" * 64)
    assert _leftovers(tmp_path / "c") == []


def test_an_interrupted_download_is_refused_and_nothing_is_kept(server, tmp_path):
    data = _state_bytes(a=1, b=2, c=3)
    url = server.put(_named("tiny", data), data, cut=len(data) // 2)
    with pytest.raises(DataError, match="connection closed after") as exc:
        fetch(url, tmp_path / "c" / "x.pth")
    assert "nothing was kept" in str(exc.value) and _leftovers(tmp_path / "c") == []


def test_an_unreachable_server_is_said_quickly():
    with pytest.raises(Unreachable, match="refused"):
        probe("http://127.0.0.1:9/models/x.pth")
    with pytest.raises(DataError, match="not an http"):
        fetch("file:///etc/passwd", Path("/tmp/never"))


# ---- launch: checked before a run exists ------------------------------------------------
MAIN = ["launch", "caltech256-resnet50-torch", "data.image_size=32"]


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _runs() -> list:
    with open_default() as ledger:
        return ledger.list()


def test_offline_without_a_cache_the_dry_run_and_the_launch_refuse(tiny_dataset):
    res = cli(*MAIN, "--dataset", str(tiny_dataset), "--dry-run")
    assert res.exit_code == 3, res.output
    assert "pretrained weights for resnet50 are not in" in res.output
    assert "resnet50-11ad3fa6.pth" in res.output and "To fix: connect to the internet" in res.output
    assert "Plan:" not in res.output  # refused before the plan is shown as launchable
    res = cli(*MAIN, "--dataset", str(tiny_dataset))
    assert res.exit_code == 3 and "cannot be reached" in res.output
    assert _runs() == []


def test_the_dry_run_names_the_cached_file(tiny_dataset):
    from finetune.train.engines.torch import weights as wt

    wt.hub_dir().mkdir(parents=True)
    (wt.hub_dir() / "resnet50-11ad3fa6.pth").write_bytes(b"x")  # checked when loaded
    res = cli(*MAIN, "--dataset", str(tiny_dataset), "--dry-run")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # the model line wraps at the terminal's width
    assert f"pretrained, from {wt.hub_dir() / 'resnet50-11ad3fa6.pth'}" in out


def test_a_weights_file_named_by_its_path_is_planned_without_torch(tiny_dataset, tmp_path):
    """The demo's fine-tuning names the file its pre-training wrote: the dry-run shows it,
    and the launching process imports neither torch nor torchvision to say so (5.0 -> 0.8
    CPU-s); the trainer checks and loads the file."""
    import subprocess
    import sys

    weights = tmp_path / "model.pt"
    weights.write_bytes(b"loaded by the trainer")
    args = ["launch", "smoke-resnet18-torch", "--dataset", str(tiny_dataset),
            "model.pretrained=true", f"model.weights={weights}", "--dry-run"]  # fmt: skip
    code = (
        "import sys; from typer.testing import CliRunner; from finetune.cli import app; "
        f"r = CliRunner().invoke(app, {args!r}); "
        "print(r.output); print('exit', r.exit_code, 'torch' in sys.modules, "
        "'torchvision' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.rstrip().endswith("exit 0 False False"), out
    assert f"pretrained, from {weights}" in " ".join(out.split()), out
    res = cli(*args[:-2], f"model.weights={tmp_path}", "--dry-run")  # the folder, not the file
    assert res.exit_code == 3, res.output
    assert "a folder, not a weights file" in res.output and "To fix: name the file" in res.output


def test_a_mirror_serving_another_file_is_refused_before_the_run(server, tiny_dataset, monkeypatch):
    from finetune.train.engines.torch import weights as wt

    # the published name, other bytes: not the full sha256 finetune ships for that file
    server.put("resnet50-11ad3fa6.pth", _state_bytes(a=1))
    monkeypatch.setenv("FINETUNE_WEIGHTS_MIRROR", f"{server.base}/models")
    res = cli(*MAIN, "--dataset", str(tiny_dataset), "--dry-run")
    assert res.exit_code == 0, res.output
    host = server.base.split("//")[1]
    out = " ".join(res.output.split())
    assert f"downloaded once from {host} into {wt.hub_dir()}, " in out
    assert server.gets == []  # the dry-run fetched nothing
    res = cli(*MAIN, "--dataset", str(tiny_dataset))
    assert res.exit_code == 3 and "not the expected 11ad3fa62ca79e40" in res.output
    assert _runs() == [] and _leftovers(wt.hub_dir()) == []


@pytest.mark.slow
def test_the_first_run_downloads_and_the_second_uses_the_cache(server, tiny_dataset, tmp_path):
    """The main use case end to end: a pretrained recipe on a local dataset, its weights
    served once from 127.0.0.1, two real trainings."""
    import torch
    from torchvision import models

    from finetune.train.engines.torch import weights as wt

    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.save(models.resnet18(num_classes=1000).state_dict(), buf)
    data = buf.getvalue()
    url = server.put(_named("resnet18", data), data)
    args = ["launch", "smoke-resnet18-torch", "--dataset", str(tiny_dataset),
            "model.pretrained=true", f"model.weights={url}", "schedule.epochs=1",
            "train.max_batches_per_epoch=2"]  # fmt: skip
    first = cli(*args)
    assert first.exit_code == 0, first.output
    cached = wt.hub_dir() / url.rsplit("/", 1)[-1]
    # fetched once by the launch (before the run existed), then read by the trainer from
    # the cache: one GET in all
    assert cached.read_bytes() == data and len(server.gets) == 1
    (run,) = _runs()
    assert run.status == "completed" and "downloaded once" in run.plan["weights_from"]
    again = cli(*args, "--dry-run")  # the next launch: the cache, and nothing to fetch
    assert again.exit_code == 0, again.output
    assert f"pretrained, from {cached}" in " ".join(again.output.split())
    assert len(server.gets) == 1
