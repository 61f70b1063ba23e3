"""Finding, checking and (only when asked) downloading pretrained weights."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("mxnet")

from finetune.errors import DataError
from finetune.train.engines.mxnet import weights

pytestmark = pytest.mark.mxnet


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """$MXNET_HOME/models, empty."""
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mxhome"))
    models = tmp_path / "mxhome" / "models"
    models.mkdir(parents=True)
    return models


def test_search_order(cache, tmp_path):
    channel = tmp_path / "pretrained"
    channel.mkdir()
    assert weights.search_dirs(channel) == [channel, cache]
    (cache / "resnet18_v1.params").write_bytes(b"cache")
    dirs = weights.search_dirs(channel)
    assert weights.locate("resnet18_v1", "", dirs).params == cache / "resnet18_v1.params"
    (channel / "resnet18_v1.params").write_bytes(b"channel")  # the channel wins
    assert weights.locate("resnet18_v1", "", dirs).params == channel / "resnet18_v1.params"


def test_explicit_path_relative_to_a_search_dir(cache, tmp_path):
    (cache / "mine.params").write_bytes(b"x")
    found = weights.locate("resnet18_v1", "mine.params", weights.search_dirs(None))
    assert found.params == cache / "mine.params"
    with pytest.raises(DataError, match=r"weights=nothere\.params not found"):
        weights.locate("resnet18_v1", "nothere.params", weights.search_dirs(None))


def test_missing_weights_offline_say_where_to_put_them(cache):
    with pytest.raises(DataError) as err:
        weights.locate("resnet50_v1", "", weights.search_dirs(None))
    text = str(err.value)
    assert "resnet50_v1-cc729d95.params or resnet50_v1.params" in text
    assert str(cache) in text
    assert "pretrained=false" in text and "weights=download" in text


def test_zoo_file_with_wrong_content_is_refused(cache):
    (cache / "resnet18_v1-a0666292.params").write_bytes(b"not the published file")
    with pytest.raises(DataError, match="corrupt or not the published file: sha1"):
        weights.locate("resnet18_v1", "", weights.search_dirs(None))


def test_sidecar_sha256_is_checked(cache):
    params = cache / "resnet18_v1.params"
    params.write_bytes(b"weights")
    sidecar = cache / "resnet18_v1.params.sha256"
    sidecar.write_text(hashlib.sha256(b"weights").hexdigest() + "  resnet18_v1.params\n")
    assert weights.locate("resnet18_v1", "", weights.search_dirs(None)).params == params
    sidecar.write_text("0" * 64)
    with pytest.raises(DataError, match="sha256"):
        weights.locate("resnet18_v1", "", weights.search_dirs(None))


def test_symbol_checkpoint_by_either_prefix_or_params_path(cache, tmp_path):
    for name in ("resnet-152-symbol.json", "resnet-152-0000.params"):
        (cache / name).write_text("x")
    found = weights.locate("imagenet11k-resnet-152", "", weights.search_dirs(None))
    assert (found.symbol, found.params) == (
        cache / "resnet-152-symbol.json",
        cache / "resnet-152-0000.params",
    )
    explicit = weights.locate("imagenet11k-resnet-152", str(cache / "resnet-152-0000.params"), [])
    assert explicit == found
    assert weights.locate("imagenet11k-resnet-152", str(cache / "resnet-152"), []) == found


def test_download_when_asked_but_unreachable(cache, monkeypatch):
    """weights=download reaches for the model zoo; offline, the error says what to do."""
    monkeypatch.setenv("MXNET_GLUON_REPO", "https://127.0.0.1:9/")  # nothing listens there
    with pytest.raises(DataError) as err:
        weights.locate("resnet18_v1", weights.DOWNLOAD, weights.search_dirs(None))
    assert "could not download" in str(err.value) and "pretrained=false" in str(err.value)


def test_a_recorded_symbol_file_is_checked_like_its_params(cache):
    """Issue 49: the 11k checkpoint's download records both files' sha256, so an altered
    network graph (the -symbol.json) is refused like altered weights."""
    for name in ("resnet-152-symbol.json", "resnet-152-0000.params"):
        (cache / name).write_text("x")
        (cache / f"{name}.sha256").write_text(hashlib.sha256(b"x").hexdigest() + "\n")
    assert weights.locate("imagenet11k-resnet-152", "", weights.search_dirs(None)).symbol
    (cache / "resnet-152-symbol.json").write_text('{"nodes": "another network"}')
    with pytest.raises(DataError, match=r"resnet-152-symbol\.json is corrupt"):
        weights.locate("imagenet11k-resnet-152", "", weights.search_dirs(None))
