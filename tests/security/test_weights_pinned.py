"""Pretrained MXNet weights (issue 16, defect 8): fetched over HTTPS only, accepted only with
the checksum finetune ships (not the installed zoo's), and the recipe's weights_sha256 pins
any file, the ImageNet-11k checkpoint included. Nothing here touches the network: the zoo's
download function is replaced at the edge by one that writes a file locally."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("mxnet")

from finetune.engines.models import MODELS
from finetune.errors import DataError
from finetune.train.engines.mxnet import checksums, weights

pytestmark = pytest.mark.mxnet


@pytest.fixture
def home(monkeypatch, tmp_path):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mxhome"))
    monkeypatch.delenv("MXNET_GLUON_REPO", raising=False)
    return tmp_path / "mxhome" / "models"


def test_every_downloadable_zoo_model_has_a_shipped_sha1_and_urls_are_https():
    zoo_models = [m for m in MODELS["mxnet"] if m not in weights.SYMBOL_MODELS]
    assert sorted(checksums.ZOO_SHA1) == sorted(zoo_models)
    assert all(len(v) == 40 for v in checksums.ZOO_SHA1.values())
    assert checksums.GLUON_REPO.startswith("https://")
    assert checksums.SYMBOL_URL.startswith("https://")


def test_a_plain_http_mirror_is_refused(home, monkeypatch):
    monkeypatch.setenv("MXNET_GLUON_REPO", "http://mirror.example/")
    with pytest.raises(DataError, match="not an https:// address"):
        weights.locate("resnet18_v1", weights.DOWNLOAD, [])


def _fake_zoo(monkeypatch, content: bytes):
    """The model store's get_model_file, writing ``content`` where the zoo would."""
    from finetune.train.engines.mxnet import zoo

    store = zoo.module("gluoncv.model_zoo.model_store")

    def get_model_file(name, root):
        path = f"{root}/{name}-{store.short_hash(name)}.params"
        with open(path, "wb") as f:
            f.write(content)
        return path

    monkeypatch.setattr(store, "get_model_file", get_model_file)


def test_a_download_that_is_not_the_pinned_file_is_refused(home, monkeypatch):
    _fake_zoo(monkeypatch, b"something else")
    with pytest.raises(DataError, match="corrupt or not the published file: sha1"):
        weights.locate("resnet18_v1", weights.DOWNLOAD, [])


def test_the_recipes_sha256_pins_any_weights_file(home):
    home.mkdir(parents=True)
    (home / "resnet18_v1.params").write_bytes(b"weights")
    good = hashlib.sha256(b"weights").hexdigest()
    dirs = weights.search_dirs(None)
    assert weights.locate("resnet18_v1", "", dirs, good).params == home / "resnet18_v1.params"
    with pytest.raises(DataError, match="sha256"):
        weights.locate("resnet18_v1", "", dirs, "0" * 64)
