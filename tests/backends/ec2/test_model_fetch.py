"""`finetune predict` with a completed EC2 run's id: the model/ files the agent uploaded under
the run's prefix are downloaded once (keys checked to stay inside the folder) and give the
same classes as the model folder they came from; `runs show RUN --tensorboard` names the
prefix the agent mirrors the TensorBoard files to."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from finetune import service, settings
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.s3sync import RunStore
from finetune.backends.ec2.backend import Ec2Backend
from finetune.backends.ec2.options import Ec2Options
from finetune.cli import app
from finetune.plan import Resources, build_plan
from finetune.runs.ledger import open_default
from tests.modelfolder import make_torch_model

from .conftest import BUCKET, REGION
from .control import agent_says, sync

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_torch_model(tmp_path_factory.mktemp("model") / "model")


def _completed_run(dataset, *overrides: str):
    """A run the agent reported completed, in the default ledger (what `predict` reads)."""
    resources = Resources(backend="ec2", instance_type="g5.xlarge", device="gpu", spot=True)
    plan = build_plan("smoke-resnet18", dataset, resources, overrides)
    with open_default() as ledger:
        backend = Ec2Backend(Ec2Options())
        run = service.launch(plan, backend, ledger)
        agent_says(run.id, "completed", 1)
        run, status, _ = sync(run, backend, ledger)
    assert status.state == "completed"
    return run


def _store(run_id: str) -> RunStore:
    """The run's prefix as the agent writes it."""
    return RunStore(boto3.client("s3", region_name=REGION), BUCKET, p.run_prefix(run_id))


def _top1(model: str, images) -> list[tuple[str, str]]:
    res = CliRunner().invoke(app, ["predict", model, str(images), "--format", "json"])
    assert res.exit_code == 0, res.output
    return [(x["image"], x["top"][0]["class"]) for x in json.loads(res.output)["predictions"]]


def test_predict_downloads_the_agents_model(ec2_aws, tiny_dataset, image_folder, model_dir):
    run = _completed_run(tiny_dataset)
    _store(run.id).upload_tree(model_dir, p.MODEL)  # as the agent does when training succeeds
    images = sorted(f for f in image_folder.iterdir() if f.is_dir())[0]
    assert _top1(run.id, images) == _top1(str(model_dir), images)
    (fetched,) = (settings.get().cache_dir / "models" / run.id).iterdir()  # this job's copy
    assert sorted(f.name for f in fetched.iterdir()) == sorted(f.name for f in model_dir.iterdir())


def test_a_key_climbing_out_is_refused(ec2_aws, tiny_dataset, model_dir):
    run = _completed_run(tiny_dataset)
    store = _store(run.id)
    for name in ("classes.json", "preprocessing.json", "hyperparameters.json"):
        store.upload_file(model_dir / name, p.MODEL + name)
    store.write_text(p.MODEL + "../escaped.txt", "gotcha")
    res = CliRunner().invoke(app, ["predict", run.id, str(model_dir)])
    assert res.exit_code != 0
    assert "refusing S3 key" in res.output and "To fix:" in res.output
    assert not any(p.is_file() for p in (settings.get().cache_dir / "models").rglob("*"))


def test_no_model_uploaded_says_so(ec2_aws, tiny_dataset, model_dir):
    run = _completed_run(tiny_dataset)
    res = CliRunner().invoke(app, ["predict", run.id, str(model_dir)])
    assert res.exit_code != 0
    assert "no model under s3://" in res.output and "To fix:" in res.output


def test_a_new_job_of_the_run_brings_its_own_model(ec2_aws, tiny_dataset, model_dir):
    """The cache holds one copy per job: once the run's reference changes (a resumed run
    completed by a new attempt), the model is fetched again, not served from the old copy."""
    from finetune.inference import artifact

    run = _completed_run(tiny_dataset)
    _store(run.id).upload_tree(model_dir, p.MODEL)
    first = artifact.locate(run.id).path
    assert artifact.locate(run.id).path == first  # the same job: the cached copy
    with open_default() as ledger:
        ledger.update(run.id, backend_ref="i-0newattempt0000000")
    second = artifact.locate(run.id).path
    assert second != first and (second / "classes.json").is_file()


def test_runs_show_names_the_prefix_the_agent_uploads_tensorboard_files_to(
    ec2_aws, tiny_dataset, tmp_path
):
    pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboardX import SummaryWriter

    run = _completed_run(tiny_dataset, "metric_logging.loggers=[tensorboard]")
    written = tmp_path / "ml" / "output" / "tensorboard"  # what the trainer wrote there
    with SummaryWriter(logdir=str(written)) as writer:
        writer.add_scalar("epoch/val_acc", 0.75, global_step=4)
    _store(run.id).upload_tree(written, p.TENSORBOARD)  # as the agent's upload() does
    res = CliRunner().invoke(app, ["runs", "show", run.id, "--tensorboard"])
    assert res.exit_code == 0, res.output
    prefix = f"s3://{BUCKET}/finetune/runs/{run.id}/tensorboard/"
    assert f"(S3 prefix): {prefix}\n" in res.output
    dest = Path(run.run_dir) / "tensorboard"
    assert f"Open them: aws s3 sync {prefix} {dest} && tensorboard --logdir {dest}" in res.output
    # what `aws s3 sync` would copy from that prefix, read by TensorBoard's own loader
    s3 = boto3.client("s3", region_name=REGION)
    key_prefix = prefix.removeprefix(f"s3://{BUCKET}/")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=key_prefix)["Contents"]]
    dest.mkdir()
    for key in keys:
        s3.download_file(BUCKET, key, str(dest / key.removeprefix(key_prefix)))
    acc = EventAccumulator(str(dest)).Reload()
    assert [(e.step, e.value) for e in acc.Scalars("epoch/val_acc")] == [(4, 0.75)]
