"""`finetune predict` with a completed SageMaker run's id: the job's model.tar.gz (where
DescribeTrainingJob's ModelArtifacts points) is downloaded once, unpacked with every member
checked, and gives the same classes as the model folder it was made from."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from finetune import service, settings
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.cli import app
from finetune.inference import artifact
from finetune.runs.ledger import open_default
from tests.aws import helpers as h
from tests.aws.conftest import BUCKET
from tests.modelfolder import make_torch_model, model_tar_gz

from .test_logs_metrics import container_client

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_torch_model(tmp_path_factory.mktemp("model") / "model")


def _completed_run(cloud, dataset, tmp_path):
    """A run whose SageMaker job completed, in the default ledger (what `predict` reads)."""
    plan = h.sm_plan(dataset)
    with open_default() as ledger:
        run = service.submit(
            plan, SageMakerBackend(poll_seconds=0), ledger, ledger.create(h.new_run(tmp_path, plan))
        )
        cloud.script(h.ON_DEMAND[-1:], job=run.backend_ref.rsplit("/", 1)[1])
        run, status, _ = service.sync(run, SageMakerBackend(poll_seconds=0), ledger)
    assert status.state == "completed"
    return run, run.backend_ref.rsplit("/", 1)[1]


def _put_model(job: str, body: bytes) -> None:
    """model.tar.gz where SageMaker uploads /opt/ml/model (the job's ModelArtifacts)."""
    key = f"finetune/output/{job}/output/model.tar.gz"
    container_client("s3").put_object(Bucket=BUCKET, Key=key, Body=body)


def _top1(model: str, images) -> list[tuple[str, str]]:
    res = CliRunner().invoke(app, ["predict", model, str(images), "--format", "json"])
    assert res.exit_code == 0, res.output
    return [(p["image"], p["top"][0]["class"]) for p in json.loads(res.output)["predictions"]]


def _cache():
    return settings.get().cache_dir / "models"


def test_predict_downloads_the_jobs_model_once(
    cloud, tiny_dataset, image_folder, model_dir, tmp_path
):
    run, job = _completed_run(cloud, tiny_dataset, tmp_path)
    _put_model(job, model_tar_gz(model_dir))
    images = sorted(p for p in image_folder.iterdir() if p.is_dir())[0]
    cloud.reset()
    assert _top1(run.id, images) == _top1(str(model_dir), images)
    assert "DescribeTrainingJob" in cloud.actions("sagemaker")
    assert [p.name for p in _cache().iterdir()] == [run.id]
    (fetched,) = (_cache() / run.id).iterdir()  # one copy, of this job; no temporary beside it
    assert sorted(p.name for p in fetched.iterdir()) == sorted(p.name for p in model_dir.iterdir())
    cloud.reset()
    assert artifact.locate(run.id).path == fetched  # the second time: from the cache
    assert cloud.actions() == []


def test_a_member_climbing_out_refuses_the_archive(cloud, tiny_dataset, model_dir, tmp_path):
    run, job = _completed_run(cloud, tiny_dataset, tmp_path)
    _put_model(job, model_tar_gz(model_dir, {"../escaped.txt": b"gotcha"}, weights=False))
    res = CliRunner().invoke(app, ["export", run.id, "--out", str(tmp_path / "out")])
    assert res.exit_code != 0
    assert "refusing member '../escaped.txt'" in res.output and "To fix:" in res.output
    assert not any(p.name == "escaped.txt" for p in _cache().rglob("*"))
    assert not any(p.is_file() for p in _cache().rglob("*"))  # nothing half-unpacked is kept
    assert not (tmp_path / "out").exists()


def test_a_missing_model_object_says_so(cloud, tiny_dataset, tmp_path):
    run, job = _completed_run(cloud, tiny_dataset, tmp_path)
    res = CliRunner().invoke(app, ["export", run.id, "--out", str(tmp_path / "out")])
    assert res.exit_code != 0
    assert f"{job}/output/model.tar.gz is not in S3" in res.output and "To fix:" in res.output
