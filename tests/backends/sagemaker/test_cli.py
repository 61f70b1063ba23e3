"""`finetune launch --backend sagemaker` and `finetune runs` on SageMaker runs, driven through
the real CLI against moto behind the gateway."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.cli import app
from finetune.runs.charges import run_money
from finetune.runs.ledger import open_default
from tests.aws import helpers as h

SMOKE = ["launch", "smoke-resnet18", "--backend", "sagemaker"]


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(SageMakerBackend, "POLL_SECONDS", 0)


def _only_run():
    with open_default() as ledger:
        (run,) = ledger.list()
        return run


def test_dry_run_needs_no_credentials(gw, tiny_dataset, tmp_path, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    res = cli(
        *SMOKE,
        "--dataset",
        str(tiny_dataset),
        "--instance",
        "ml.p3.8xlarge",
        "--count",
        "2",
        "--spot",
        "--max-wait",
        "3h",
        "--max-runtime",
        "1h",
        "--region",
        "us-east-1",
        "--dry-run",
    )
    out = res.output
    assert "sagemaker p3.8xlarge (spot): 2 host(s) x 4 gpu" in out
    assert "(x8 devices)" in out  # the learning rate scales with 2 x 4 GPUs
    assert "2 x ml.p3.8xlarge" in out and "3 h (10800 s)" in out and "us-east-1" in out
    assert "ACCOUNT.dkr.ecr.us-east-1.amazonaws.com/finetune:0.1.0" in out
    assert "finetune-run-RUN_ID: this run's own role" in out  # no role needed: each run its own
    # the estimate from the catalog, in two lines; --verbose: every figure and source
    assert "images/s on 8x V100 by finetune's performance model" in " ".join(out.split())
    # the plan is shown, then why the real launch would fail: non-zero, like the launch
    assert res.exit_code == 2 and "no S3 bucket is set" in out and "no execution role" not in out
    assert "FINETUNE_BUCKET" in out and "To fix:" in out
    assert gw.calls == []  # nothing was asked of AWS


def test_dry_run_shows_the_runtime_the_budget_affords(cloud, tiny_dataset):
    """--max-eur shortens the runtime at submit; the dry run shows that same runtime."""
    args = [*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge", "--max-eur", "0.5"]
    res = cli(*args, "--dry-run")
    assert res.exit_code == 0, res.output
    shown = re.search(r"max runtime\s+[\d.]+ h \((\d+) s\)", res.output)
    assert shown and 60 <= int(shown[1]) < 7200  # shrunk from the 2 h default
    res = cli(*args, "--detach")
    assert res.exit_code == 0, res.output
    sent = cloud.requests("CreateTrainingJob")[-1].json["StoppingCondition"]
    assert sent["MaxRuntimeInSeconds"] == int(shown[1])


def test_dry_run_without_a_region_says_so(gw, tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "g5.xlarge", "--dry-run")
    assert res.exit_code == 2 and "no AWS region is set" in res.output and "--region" in res.output


def test_dry_run_with_settings_shows_the_dataset_prefix(cloud, tiny_dataset):
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "input train       s3://finetune-test-bucket/finetune/datasets/shapes-" in res.output
    assert "arn:aws:iam::123456789012:role/finetune-sagemaker" in res.output
    assert cloud.calls == []


def test_dry_run_says_the_job_fetches_the_published_weights(cloud, tiny_dataset):
    """This machine's cache does not reach a cloud job: the job fetches the published file
    itself, and the dry-run says so, with the size; a file only on this machine is refused."""
    args = ["launch", "caltech256-resnet50-torch", "data.image_size=32", "--backend",
            "sagemaker", "--dataset", str(tiny_dataset), "--instance", "g5.xlarge"]  # fmt: skip
    res = cli(*args, "--dry-run")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert (
        "resnet50 (pretrained, fetched by the job itself from 127.0.0.1:9 at start, 97.8 MB" in out
    )
    res = cli(*args, "model.weights=/etc/hostname", "--dry-run")
    assert res.exit_code == 3 and "a file on this machine" in res.output
    assert "To fix: give its https:// address" in res.output


def test_a_dry_run_of_caltech256_estimates_before_the_download(cloud):
    """No dataset yet: the plan and its estimate from Caltech-256's published counts, then
    the one thing left to do before launching."""
    res = cli("launch", "caltech256-resnet152", "--backend", "sagemaker", "--instance",
              "p3.8xlarge", "--dry-run")  # fmt: skip
    out = " ".join(res.output.split())
    assert "dataset caltech256 not prepared yet: its published counts" in out
    assert "257 (15420 train / 15187 val images)" in out and "EUR" in out
    assert res.exit_code == 3 and "run `finetune prepare caltech256`" in out
    assert cloud.calls == []


@pytest.mark.parametrize("columns", [80, 120])
def test_the_dry_run_reads_on_one_screen(cloud, tiny_dataset, monkeypatch, columns):
    """Warnings first, the estimate in two lines, no line past the width (a path or address
    longer than a line stays whole, to be copied), nothing of the project's own process;
    --verbose keeps every figure and source."""
    monkeypatch.setenv("COLUMNS", str(columns))
    args = [*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.8xlarge", "--dry-run"]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("Warning: p3.8xlarge (4x V100) was retired by AWS")
    assert "try --instance g5.12xlarge" in " ".join(lines[:3])
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("estimate"))
    assert lines[at + 1].strip().startswith("at ") and "--verbose" in " ".join(lines[at : at + 4])
    too_long = [ln for ln in lines if len(ln) > columns and " " in ln.strip()[:-1]]
    assert all("s3://" in ln or "/" in ln.split()[-1] for ln in too_long), too_long
    assert len(lines) <= 45 and "issue " not in res.output.lower()  # 61 before, at 100
    verbose = cli(*args, "--verbose").output
    assert "GB/s" in verbose and "EUR/h for 4x V100" in verbose  # the roofline's basis
    assert len(verbose.splitlines()) > len(lines)


def test_dry_run_still_refuses_what_cannot_work(gw, tiny_dataset):
    res = cli(
        *SMOKE,
        "--dataset",
        str(tiny_dataset),
        "--instance",
        "p3.2xlarge",
        "--spot",
        "--max-runtime",
        "2h",
        "--max-wait",
        "1h",
        "--dry-run",
    )
    assert res.exit_code == 2 and "MaxWait >= MaxRuntime" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "local", "--instance", "p3.2xlarge"], "the local backend runs on this"),
        (["--backend", "local", "--spot"], "cannot provide spot capacity: it runs on this"),
        (["--backend", "local", "--count", "2"], "cannot provide several hosts"),
        (["--backend", "local", "--region", "x"], "--region does not apply to --backend local"),
        (
            ["--backend", "ec2", "--instance", "g5.xlarge", "--kms-key", "k"],
            "(--kms-key: sagemaker)",
        ),
        (["--backend", "sagemkaer"], 'Did you mean "sagemaker"?'),
        (["--backend", "sagemaker"], "needs an instance type"),
        (["--backend", "sagemaker", "--instance", "p9.big"], "Unknown instance type"),
        (
            ["--backend", "sagemaker", "--instance", "p3.2xlarge", "--max-wait", "1h"],
            "spot jobs only",
        ),
        (
            ["--backend", "sagemaker", "--instance", "p3.2xlarge", "--max-runtime", "soon"],
            "not a duration",
        ),
    ],
)
def test_bad_options(tiny_dataset, args, message):
    res = cli("launch", "smoke-resnet18", "--dataset", str(tiny_dataset), *args, "--dry-run")
    assert res.exit_code == 2 and message in res.output and "To fix:" in res.output


def test_launch_follows_to_the_end(cloud, fast, tiny_dataset):
    cloud.script(h.ON_DEMAND)
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "Dataset at s3://finetune-test-bucket/finetune/datasets/shapes-" in out
    assert "running: Downloading: Downloading input data" in out
    assert "completed: Completed: Training job completed" in out
    run = _only_run()
    assert run.status == "completed" and run.billable_seconds == 620
    assert f"cost       EUR {run_money(run).eur:.2f}" in out


def test_detach_then_runs_show_logs_stop(cloud, fast, tiny_dataset):
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge", "--detach")
    assert res.exit_code == 0, res.output
    run = _only_run()
    job = run.backend_ref.rsplit("/", 1)[1]
    cloud.script([h.step("InProgress", "Training", 60)], job=job)
    shown = json.loads(cli("runs", "show", run.id, "--json").output)
    assert shown["status"] == "running" and shown["region"] == "eu-west-1"
    from .test_logs_metrics import _put_logs

    _put_logs(job, "algo-1", ["hello from the container"])
    assert cli("runs", "logs", run.id).output == "hello from the container\n"
    res = cli("runs", "stop", run.id)
    assert res.exit_code == 0, res.output
    assert [c.json["TrainingJobName"] for c in cloud.requests("StopTrainingJob")] == [job]
    assert _only_run().status == "stopping"


def test_resume_starts_a_new_job_on_the_same_checkpoints(cloud, fast, tiny_dataset):
    cloud.script(h.SPOT_MAX_WAIT)
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge", "--spot")
    assert res.exit_code == 1 and "interrupted" in res.output  # not completed: non-zero
    run = _only_run()
    cloud.script(h.ON_DEMAND)
    res = cli("launch", "--resume", run.id)
    assert res.exit_code == 0, res.output
    first, second = (c.json for c in cloud.requests("CreateTrainingJob"))
    assert second["TrainingJobName"] == first["TrainingJobName"] + "-r1"
    assert second["CheckpointConfig"] == first["CheckpointConfig"]
    assert second["EnableManagedSpotTraining"] is True  # the stored options
    assert _only_run().status == "completed"


# How SageMaker reports a container that exited 75 after the trainer's stop: the failure
# file our entrypoint writes, or (the PyTorch toolkit's launcher) its own ExitCode report.
_STOPPED_REASONS = [
    "AlgorithmError: finetune-stopped: stopped by SIGTERM after a checkpoint (epoch 1, batch "
    "1, step 1); the run is unfinished and resumes from that checkpoint when started again, "
    "exit code: 75",
    'AlgorithmError: ExecuteUserScriptError:\nExitCode 75\nErrorMessage ""\nCommand '
    '"/opt/conda/bin/python3.11 finetune_entry.py", exit code: 75',
]


@pytest.mark.parametrize("reason", _STOPPED_REASONS, ids=["entrypoint", "toolkit"])
def test_a_job_whose_trainer_stopped_after_a_checkpoint_is_interrupted(
    cloud, fast, tiny_dataset, reason
):
    """The trainer got SIGTERM early (epoch 1, step 1), checkpointed and exited with
    EXIT_STOPPED: SageMaker says Failed. The run is interrupted -- neither completed without
    a model nor failed -- and `launch --resume` finishes it."""
    stopped = h.step(
        "Failed", "Failed", 120, "Training job failed", FailureReason=reason,
        TrainingTimeInSeconds=120, BillableTimeInSeconds=120,
    )  # fmt: skip
    cloud.script([h.step("InProgress", "Training", 90), stopped])
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge")
    assert res.exit_code == 1 and "interrupted" in res.output, res.output
    run = _only_run()
    assert run.status == "interrupted"
    assert "stopped by a signal after a checkpoint" in run.exit_reason
    assert f"finetune launch --resume {run.id}" in run.exit_reason
    shown = json.loads(cli("runs", "show", run.id, "--json").output)
    assert shown["status"] == "interrupted"
    cloud.script(h.ON_DEMAND)
    res = cli("launch", "--resume", run.id)
    assert res.exit_code == 0, res.output
    assert _only_run().status == "completed"


def test_a_dataset_already_in_s3_is_used_as_is(cloud, fast, tiny_dataset):
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge", "--detach")
    assert res.exit_code == 0, res.output
    (first,) = (c.json for c in cloud.requests("CreateTrainingJob"))
    train = first["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
    prefix = train.removesuffix("train/")
    cloud.reset()
    res = cli(*SMOKE, "--dataset", prefix.rstrip("/"), "--instance", "p3.2xlarge", "--detach")
    assert res.exit_code == 0, res.output
    (second,) = (c.json for c in cloud.requests("CreateTrainingJob"))
    assert second["InputDataConfig"] == first["InputDataConfig"]
    assert second["HyperParameters"] == first["HyperParameters"]
    assert "PutObject" not in cloud.actions()


def test_an_s3_dataset_that_is_not_there(cloud, tiny_dataset):
    uri = "s3://finetune-test-bucket/finetune/datasets/nothing-000000000000/"
    res = cli(*SMOKE, "--dataset", uri, "--instance", "p3.2xlarge", "--dry-run")
    assert res.exit_code == 3 and "no dataset was uploaded there" in res.output


def test_spot_jobs_checkpoint_at_least_every_5_minutes(cloud, tiny_dataset):
    """A stop's SIGTERM may never reach the trainer in AWS's image (options.SPOT_CHECKPOINTS):
    a spot job checkpoints at least every 300 s, the dry run says so and why, and the request
    carries it; on demand, and below the cap, the recipe's own interval stands."""
    args = ["launch", "caltech256-resnet50-torch", "data.image_size=32", "--backend", "sagemaker"]
    args += ["--dataset", str(tiny_dataset), "--instance", "g5.xlarge"]
    spot = cli(*args, "--spot", "--dry-run")  # the recipe says 600 s
    assert spot.exit_code == 0, spot.output
    row = re.search(r"checkpoints\s+(every .*?)\n\s+optimizer", spot.output, re.S)
    assert row, spot.output
    text = " ".join(row[1].split())
    assert text.startswith("every 300 s and at each epoch's end (at most 300 s on SageMaker spot")
    assert "SIGTERM may never reach the trainer" in text
    on_demand = cli(*args, "--dry-run")
    assert re.search(r"checkpoints\s+every 600 s and at each epoch's end\n", on_demand.output)
    own = cli(*args, "train.checkpoint_interval_s=120", "--spot", "--dry-run")
    assert re.search(r"checkpoints\s+every 120 s and at each epoch's end\n", own.output)
    res = cli(*args, "--spot", "--detach")
    assert res.exit_code == 0, res.output
    sent = cloud.requests("CreateTrainingJob")[-1].json["HyperParameters"]
    assert sent["checkpoint_interval_s"] == "300.0"


# What the job's code can write into /opt/ml/output/failure (SageMaker's FailureReason) or a
# status message: set the clipboard (OSC 52), retitle the window (OSC 0), move the cursor and
# clear the screen (CSI), reverse the text's direction (a bidi override), in 7- and 8-bit form.
HOSTILE = (
    "AlgorithmError: \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]0;owned\x07"
    "\x1b[2J\x1b[1;1Hall good\u202etxt.exe\x9b31m done\r"
)
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_remote_failure_reasons_print_inert(cloud, fast, tiny_dataset):
    """Issue 34, N3: a FailureReason or status message holding terminal escapes reaches the
    ledger and the terminal inert, through `launch` (following) and `runs show` in every
    format, and through `runs stop` of the ended run."""
    failed = h.step("Failed", "Failed", 120, "\x1b]0;title\x07Training job failed",
                    FailureReason=HOSTILE)  # fmt: skip
    cloud.script([h.step("InProgress", "Training", 90), failed])
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge")
    assert res.exit_code == 1, res.output
    assert not CONTROLS.search(res.output), repr(res.output)
    run = _only_run()
    assert not CONTROLS.search(run.exit_reason) and "all good" in run.exit_reason
    for args in ([], ["--format", "csv"], ["--json"]):
        shown = cli("runs", "show", run.id, *args)
        assert shown.exit_code == 0, shown.output
        assert not CONTROLS.search(shown.output), (args, repr(shown.output))
        assert "all good" in shown.output
    stop = cli("runs", "stop", run.id)
    assert not CONTROLS.search(stop.output), repr(stop.output)


def test_a_reason_stored_raw_by_an_older_version_prints_inert(cloud, fast, tiny_dataset):
    res = cli(*SMOKE, "--dataset", str(tiny_dataset), "--instance", "p3.2xlarge", "--detach")
    assert res.exit_code == 0, res.output
    run = _only_run()
    with open_default() as ledger:
        ledger.update(run.id, status="failed", exit_reason=HOSTILE)
    for args in ([], ["--format", "csv"], ["--json"]):
        shown = cli("runs", "show", run.id, *args)
        assert not CONTROLS.search(shown.output), (args, repr(shown.output))
    listed = cli("runs", "list")
    assert not CONTROLS.search(listed.output), repr(listed.output)


def test_dry_run_shows_the_runtime_cap_every_cloud_backend_gives(cloud, tiny_dataset):
    """Without --max-runtime: 1.5 x the estimate's slow end, at least 1 h (a tiny set: 1 h,
    as on EC2; was 2 h here and 6 h there); --max-runtime, the same flag on both, wins; the
    launch sends what the dry run shows."""
    args = [*SMOKE, "--dataset", str(tiny_dataset), "--instance", "ml.g5.xlarge"]
    res = cli(*args, "--dry-run")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # (rows wrap at the terminal's width)
    assert "max runtime 1 h (3600 s)" in out, out
    assert "runtime cap 1.5 x the estimate's slow end (" in out, out
    assert "at least 1h 00m; --max-runtime to change" in out, out
    res = cli(*args, "--dry-run", "--max-runtime", "90m")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "max runtime 1.5 h (5400 s)" in out and "runtime cap --max-runtime" in out, out
    res = cli(*args, "--detach")
    assert res.exit_code == 0, res.output
    sent = cloud.requests("CreateTrainingJob")[-1].json["StoppingCondition"]
    assert sent == {"MaxRuntimeInSeconds": 3600}
