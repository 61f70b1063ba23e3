"""The /opt/ml contract: config files, channels, resources, checkpoint path (no MXNet)."""

from __future__ import annotations

import json

import pytest

from finetune.contracts.container import DEFAULT_ROOT, ROOT_ENV, Layout
from finetune.errors import ConfigError, DataError
from finetune.train.layout import load_job

from .conftest import hparams, make_tree


def test_layout_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(ROOT_ENV, raising=False)
    assert Layout.from_env().root == DEFAULT_ROOT
    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    layout = Layout.from_env()
    assert layout.model_dir == tmp_path / "model"
    assert layout.failure_file == tmp_path / "output" / "failure"
    assert layout.channel_dir("train") == tmp_path / "input" / "data" / "train"


def test_load_job_reads_every_config_file(ml_root):
    job = load_job(Layout(ml_root))
    assert job.hparams == hparams()
    assert set(job.channels) == {"train", "validation"}
    assert job.pretrained_dir is None
    assert (job.current_host, job.hosts) == ("algo-1", ("algo-1",))
    # SageMaker's absolute LocalPath lands inside the temporary tree, not in /opt/ml
    assert job.checkpoint_dir == ml_root / "checkpoints"
    assert job.metrics_file == ml_root / "output" / "data" / "metrics.jsonl"


def test_defaults_without_optional_files(tmp_path, tiny_dataset):
    root = make_tree(tmp_path / "ml", tiny_dataset, hparams(), checkpoint_local_path=None)
    (root / "input" / "config" / "resourceconfig.json").unlink()
    (root / "input" / "config" / "inputdataconfig.json").unlink()  # channels = the folders
    job = load_job(Layout(root))
    assert job.checkpoint_dir == root / "checkpoints"
    assert job.hosts == ("algo-1",)
    assert set(job.channels) == {"train", "validation"}


def test_pretrained_channel_is_accepted(tmp_path, tiny_dataset):
    root = make_tree(
        tmp_path / "ml", tiny_dataset, hparams(), ("train", "validation", "pretrained")
    )
    assert load_job(Layout(root)).pretrained_dir == root / "input" / "data" / "pretrained"


def test_misnamed_channel_names_the_expected_ones(tmp_path, tiny_dataset):
    root = make_tree(tmp_path / "ml", tiny_dataset, hparams(), ("training", "validation"))
    with pytest.raises(ConfigError) as err:
        load_job(Layout(root))
    text = str(err.value)
    assert "'training'" in text and 'Did you mean "train"?' in text
    assert "Missing channel(s): train" in text
    assert "Expected channels: train, validation" in text and "To fix:" in text


def test_pipe_mode_is_refused(ml_root):
    path = ml_root / "input" / "config" / "inputdataconfig.json"
    config = json.loads(path.read_text())
    config["train"]["TrainingInputMode"] = "Pipe"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="input mode Pipe"):
        load_job(Layout(ml_root))


def test_declared_channel_without_folder(ml_root):
    (ml_root / "input" / "data" / "validation").rename(ml_root / "elsewhere")
    with pytest.raises(DataError, match="'validation' is declared but"):
        load_job(Layout(ml_root))


def test_missing_or_bad_hyperparameters(ml_root):
    path = ml_root / "input" / "config" / "hyperparameters.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_job(Layout(ml_root))
    path.write_text(json.dumps({**hparams().to_strings(), "learning_rate": "0.1"}))
    with pytest.raises(ConfigError, match="unknown hyperparameter"):
        load_job(Layout(ml_root))
    path.unlink()
    with pytest.raises(ConfigError, match=r"hyperparameters\.json is missing"):
        load_job(Layout(ml_root))


def test_current_host_must_be_a_host(ml_root):
    path = ml_root / "input" / "config" / "resourceconfig.json"
    path.write_text(json.dumps({"current_host": "algo-3", "hosts": ["algo-1", "algo-2"]}))
    with pytest.raises(ConfigError, match="algo-3"):
        load_job(Layout(ml_root))
