"""The torch engine on SageMaker over HTTP (moto behind the gateway): the CreateTrainingJob
request as sent, the source directory in S3, the engine/GPU refusal before any AWS call, and
the source directory's program run the way the training toolkit runs it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile

import boto3
import pytest

from finetune.backends.sagemaker import sourcedir
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.backends.sagemaker.request import JobOptions
from finetune.errors import ConfigError, UsageError
from finetune.plan import Resources, build_plan
from tests.aws.conftest import BUCKET, REGION
from tests.aws.helpers import new_run, sm_plan


def _torch_plan(dataset, instance: str, hosts: int, spot: bool):
    from finetune.catalog import instances

    res = Resources(
        backend="sagemaker",
        instance_type=instance,
        hosts=hosts,
        devices_per_host=instances.get(instance).gpu_count,
        device="gpu",
        spot=spot,
    )
    return build_plan("smoke-resnet18-torch", dataset, res)


def test_torch_job_as_sent_with_its_source_dir(cloud, tiny_dataset, tmp_path):
    plan = _torch_plan(tiny_dataset, "p5.4xlarge", hosts=2, spot=True)
    run = new_run(tmp_path, plan)
    SageMakerBackend(JobOptions(max_runtime=3600)).submit(plan, run)
    (call,) = cloud.requests("CreateTrainingJob")
    req = call.json
    image = req["AlgorithmSpecification"]["TrainingImage"]
    assert image == f"763104351884.dkr.ecr.{REGION}.amazonaws.com/pytorch-training:2.10.0-gpu-py313"
    assert not cloud.requests("DescribeImages")  # AWS's image: no ECR check in our account
    hp = req["HyperParameters"]
    assert hp["sagemaker_program"] == '"finetune_entry.py"'
    assert hp["sagemaker_torch_distributed_enabled"] == "true"  # 2 instances: toolkit torchrun
    assert hp["engine"] == "torch" and hp["hosts"] == "2"
    assert req["ResourceConfig"]["InstanceType"] == "ml.p5.4xlarge"
    assert req["EnableManagedSpotTraining"] is True  # managed spot and checkpoints as before
    assert req["CheckpointConfig"]["S3Uri"] == f"s3://{BUCKET}/finetune/checkpoints/{run.id}/"
    uri = json.loads(hp["sagemaker_submit_directory"])
    assert uri.startswith(f"s3://{BUCKET}/finetune/code/{run.id}/sourcedir-")
    key = uri.split("/", 3)[3]
    body = boto3.client("s3", region_name=REGION).get_object(Bucket=BUCKET, Key=key)["Body"]
    assert body.read() == sourcedir.build(BUCKET, run.id).data
    actions = cloud.actions()
    assert actions.index("CreateTrainingJob") > max(
        i for i, a in enumerate(actions) if a == "PutObject"
    )  # the code is in S3 before the job starts


def test_mxnet_on_hopper_is_refused_before_any_aws_call(cloud, tiny_dataset, tmp_path):
    plan = sm_plan(tiny_dataset, instance="p5.48xlarge")
    assert plan.hyperparameters.engine == "mxnet"
    with pytest.raises(UsageError) as err:
        SageMakerBackend().submit(plan, new_run(tmp_path, plan))
    assert "engine=torch" in str(err.value)
    assert cloud.actions() == []  # no upload, no CreateTrainingJob, not even a describe


def test_source_dir_program_starts_our_trainer_as_the_toolkit_runs_it(tiny_dataset, tmp_path):
    """Unpacked like /opt/ml/code and run as `python finetune_entry.py --key value ...` with the
    toolkit's sagemaker_* keys in hyperparameters.json: the package inside the source dir is the
    one that runs, the arguments are ignored and the toolkit's keys are not taken for ours. (One
    foreign key makes the trainer stop at reading its hyperparameters, before any training.)"""
    from finetune.contracts import mltree

    code_dir = tmp_path / "code"
    code = sourcedir.build("b", "ft-1-a")
    with tarfile.open(fileobj=io.BytesIO(code.data), mode="r:gz") as tar:
        tar.extractall(code_dir, filter="data")
    with (code_dir / "finetune" / "__init__.py").open("a") as f:
        f.write('\nprint("finetune from the source dir", flush=True)\n')
    plan = build_plan("smoke-resnet18-torch", tiny_dataset, Resources(backend="local"))
    root = mltree.layout(tmp_path / "ml", plan)
    config = root / "input" / "config" / "hyperparameters.json"
    hp = {**json.loads(config.read_text()), **code.hyperparameters("eu-west-1", 2)}
    config.write_text(json.dumps({**hp, "not_ours": "1"}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["FINETUNE_ML_ROOT"] = str(root)
    args = [a for k, v in hp.items() for a in (f"--{k}", v)]  # what the toolkit passes
    out = subprocess.run(
        [sys.executable, sourcedir.PROGRAM, *args],
        cwd=code_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "finetune from the source dir" in out.stdout
    assert "unexpected arguments" not in out.stderr
    assert "unknown hyperparameter(s): not_ours." in out.stderr  # sagemaker_* were set aside
    assert out.returncode == ConfigError.exit_code, out.stderr[-2000:]
    failure = (root / "output" / "failure").read_text()
    assert "not_ours" in failure and "To fix:" in failure


def test_policies_let_the_caller_upload_and_the_job_read_its_code(
    cloud, tiny_dataset, tmp_path, monkeypatch
):
    import fnmatch

    from finetune import settings
    from finetune.aws import infra

    monkeypatch.delenv("FINETUNE_ROLE_ARN")  # the job runs under its own role (issue 16)
    settings.get.cache_clear()
    plan = _torch_plan(tiny_dataset, "g6e.xlarge", hosts=1, spot=False)
    SageMakerBackend().submit(plan, new_run(tmp_path, plan))
    names = infra.Names(account="123456789012", region=REGION, bucket=BUCKET)
    (put_role,) = cloud.requests("PutRolePolicy")
    docs = {
        "caller": infra.render(infra.policy_document("caller"), names),
        "run": json.loads(put_role.form["PolicyDocument"]),
        "boundary": infra.render(infra.policy_document("sagemaker-boundary"), names),
    }

    def allowed(kind: str, action: str, resource: str) -> bool:
        for s in docs[kind]["Statement"]:
            if s["Effect"] != "Allow":
                continue
            actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
            resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
            if any(fnmatch.fnmatchcase(action, a) for a in actions) and any(
                fnmatch.fnmatchcase(resource, r) for r in resources
            ):
                return True
        return False

    def job_may(action: str, resource: str) -> bool:  # the run's role, within the boundary
        return allowed("run", action, resource) and allowed("boundary", action, resource)

    (put,) = [c for c in cloud.requests("PutObject") if "/finetune/code/" in c.path]
    code = f"arn:aws:s3:::{put.path.lstrip('/')}"
    assert allowed("caller", "s3:PutObject", code)
    assert job_may("s3:GetObject", code)  # the toolkit downloads it as the job
    image = cloud.requests("CreateTrainingJob")[0].json["AlgorithmSpecification"]["TrainingImage"]
    repo = f"arn:aws:ecr:{REGION}:{image.split('.')[0]}:repository/pytorch-training"
    assert job_may("ecr:BatchGetImage", repo)
    assert not allowed("run", "s3:PutObject", code)
    other = code.replace("/finetune/code/", "/finetune/code/ft-someone-else/")
    assert not allowed("run", "s3:GetObject", other)  # another run's code is not its business
