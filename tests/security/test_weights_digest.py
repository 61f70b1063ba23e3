"""Issue 49, S5-4: pretrained torch weights by the fullest digest known. torchvision's files
whose full sha256 a public record gives are pinned (digests.py); any other file is held to
its name's 8 hex digits at its first download and to the full digest recorded then on every
later use. Downloads are https (plain http only with the full digest known, or from this
machine); a damaged cache is fetched again, a file its server has changed is refused with
what to do. Every file is served by a small HTTP server on 127.0.0.1, never the internet."""

from __future__ import annotations

import hashlib

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.download import check_address, fetch, probe, recorded
from finetune.errors import DataError
from finetune.recipes.loading import available, load_recipe
from finetune.train.engines.torch import weights as wt
from finetune.train.engines.torch.digests import PUBLISHED_SHA256

from ..weightserver import WeightServer


@pytest.fixture
def server():
    s = WeightServer()
    yield s
    s.close()


def _named(stem: str, data: bytes, digits: int = 8) -> str:
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:digits]}.pth"


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


DATA = bytes(range(256)) * 64  # stands in for a state_dict: only digests are read here


def test_pins_are_torchvisions_files_and_the_built_in_recipes_use_them():
    from torchvision import models

    names = {
        w.url.rsplit("/", 1)[-1]
        for m in models.list_models(module=models)
        for w in models.get_model_weights(m)
    }
    for name, digest in PUBLISHED_SHA256.items():
        assert name in names and len(digest) == 64 and digest.startswith(name[-12:-4]), name
    defaults = {
        wt._published_first(r.model.name)[0].rsplit("/", 1)[-1]
        for r in map(load_recipe, available())
        if r.engine == "torch"
    }
    # no public record of its full sha256 was found (docs/decisions/162): first download
    assert defaults - set(PUBLISHED_SHA256) == {"resnet152-f82ba261.pth"}


def test_a_pinned_file_served_with_other_bytes_is_refused_and_nothing_is_kept(server, monkeypatch):
    monkeypatch.setenv("FINETUNE_WEIGHTS_MIRROR", f"{server.base}/models")
    server.put("resnet18-f37072fd.pth", DATA)
    with pytest.raises(DataError, match="not the expected f37072fd47e89c5e") as exc:
        wt.locate("resnet18", "", [wt.hub_dir()])
    assert "To fix:" in str(exc.value) and server.gets == ["/models/resnet18-f37072fd.pth"]
    assert not wt.hub_dir().exists() or list(wt.hub_dir().iterdir()) == []


@pytest.mark.parametrize("at", [0, len(DATA) // 2, len(DATA) - 1])
def test_a_file_differing_in_any_byte_from_its_digest_is_refused(server, tmp_path, at):
    url = server.put("own.pth", _flip(DATA, at))  # the full digest is the original's
    with pytest.raises(DataError, match="not the expected"):
        fetch(url, tmp_path / "own.pth", hashlib.sha256(DATA).hexdigest())
    assert list(tmp_path.iterdir()) == []
    # recorded at its download, then changed in the cache: used no more
    good = server.put(_named("tiny", DATA), DATA)
    dest = tmp_path / _named("tiny", DATA)
    fetch(good, dest)
    dest.write_bytes(_flip(DATA, at))
    with pytest.raises(DataError, match=r"damaged or altered: .* it had at its first download"):
        wt.verify(wt.Found(dest, None))


def test_a_six_hex_prefix_is_refused_before_any_request(server, tmp_path):
    url = server.put(_named("tiny", DATA, digits=6), DATA)
    with pytest.raises(DataError, match=r"6 hex digits in its name .* too few") as exc:
        fetch(url, tmp_path / "x.pth")
    assert "model.weights_sha256" in exc.value.fix and server.gets == []
    fetch(url, tmp_path / "x.pth", hashlib.sha256(DATA).hexdigest())  # pinned: fine
    short = tmp_path / _named("mine", DATA, digits=6)
    short.write_bytes(DATA)
    with pytest.raises(DataError, match="too few"):
        wt.verify(wt.Found(short, None))


def test_plain_http_is_refused_unless_the_digest_is_known_or_the_server_is_local(
    server, tmp_path, tiny_dataset, monkeypatch
):
    far = "http://weights.example/models/" + _named("tiny", DATA)
    for call in (lambda: check_address(far), lambda: probe(far), lambda: fetch(far, tmp_path)):
        with pytest.raises(DataError, match="plain http address") as exc:
            call()
        assert "use its https:// address" in exc.value.fix
    check_address(far, hashlib.sha256(DATA).hexdigest())  # the full digest known: allowed
    check_address(server.put("own.pth", DATA))  # 127.0.0.1: nothing crosses a network
    # a local server's redirect to a plain-http host is refused the same way
    with pytest.raises(DataError, match=r"redirected to .* plain http"):
        fetch(server.move("moved.pth", far), tmp_path / "moved.pth")
    # a plain-http mirror and a file no digest pins: refused before the dry run says more
    monkeypatch.setenv("FINETUNE_WEIGHTS_MIRROR", "http://mirror.example/models")
    res = CliRunner().invoke(app, ["launch", "caltech256-resnet152-torch", "data.image_size=32",
                                   "--dataset", str(tiny_dataset), "--dry-run"])  # fmt: skip
    assert res.exit_code == 3 and "resnet152-f82ba261.pth is a plain http address" in res.output


def test_a_damaged_cache_is_fetched_again_and_a_changed_server_is_refused(server):
    url = server.put("own.pth", DATA)  # no digest anywhere: trusted at first download
    first = wt.locate("resnet18", url, [wt.hub_dir()])
    assert first.path.read_bytes() == DATA and recorded(first.path) == first.digest
    first.path.write_bytes(_flip(DATA, 7))  # damaged
    again = wt.locate("resnet18", url, [wt.hub_dir()])
    assert again.path.read_bytes() == DATA and len(server.gets) == 2
    server.put("own.pth", _flip(DATA, 9))  # the server now hands out another file
    first.path.write_bytes(_flip(DATA, 7))
    with pytest.raises(DataError, match=r"not the .* own.pth had when it was first") as e:
        wt.locate("resnet18", url, [wt.hub_dir()])
    assert f"delete {first.path} and its .sha256 file" in e.value.fix


def test_a_cache_file_nothing_can_check_is_fetched_not_used(server):
    url = server.put("own.pth", DATA)
    wt.hub_dir().mkdir(parents=True)
    (wt.hub_dir() / "own.pth").write_bytes(b"planted by another user of the cache")
    found = wt.locate("resnet18", url, [wt.hub_dir()])
    assert found.path.read_bytes() == DATA and server.gets == ["/models/own.pth"]


def test_a_hub_cached_file_is_checked_then_recorded_at_first_use(server):
    name = _named("tiny", DATA)
    wt.hub_dir().mkdir(parents=True)
    (wt.hub_dir() / name).write_bytes(DATA)  # as torch.hub itself leaves it: no record
    found = wt.locate("resnet18", f"{server.base}/models/{name}", [wt.hub_dir()])
    assert found.digest == hashlib.sha256(DATA).hexdigest() == recorded(found.path)
    assert server.gets == []


def test_your_own_file_counts_in_a_channel_never_in_torch_hubs_shared_cache(tmp_path):
    channel = tmp_path / "pretrained"
    for folder in (wt.hub_dir(), channel):
        folder.mkdir(parents=True)
        (folder / "resnet18.pth").write_bytes(DATA)
        (folder / _named("resnet18", DATA)).write_bytes(DATA)
    assert wt.find_cached("resnet18", "", [wt.hub_dir()]) is None
    found = wt.find_cached("resnet18", "", [channel, wt.hub_dir()])
    assert found is not None and found.path.parent == channel
