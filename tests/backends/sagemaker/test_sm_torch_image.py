"""The torch engine on SageMaker without AWS: AWS's PyTorch image URI (sagemaker-core, offline),
the toolkit hyperparameters in the request (valid for the API), and the source directory."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from finetune.backends.sagemaker import images, sourcedir
from finetune.backends.sagemaker import request as rq
from finetune.errors import ConfigError
from finetune.plan import Resources, build_plan

ROLE = "arn:aws:iam::123456789012:role/finetune-sagemaker"
CHANNELS = {"train": "s3://b/finetune/datasets/x/train/", "validation": "s3://b/d/validation/"}


@pytest.mark.parametrize(
    ("region", "instance", "expected"),
    [
        (
            "eu-west-1",
            "p5.48xlarge",
            "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313",
        ),
        (
            "us-east-1",
            "ml.g6e.xlarge",
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313",
        ),
        (
            "cn-north-1",
            "p6-b200.48xlarge",
            "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.10.0-gpu-py313",
        ),
    ],
)
def test_pytorch_image_per_region_and_instance(region, instance, expected):
    assert images.framework_image("torch", region, instance) == expected


def test_unknown_region_says_what_to_do():
    with pytest.raises(ConfigError) as err:
        images.framework_image("torch", "xx-nowhere-1", "g5.xlarge")
    assert "no PyTorch 2.10.0 training image" in str(err.value) and "To fix:" in str(err.value)


def test_default_image_follows_the_engine():
    torch = images.default_image("torch", "eu-west-1", "g5.xlarge", "123456789012")
    assert "/pytorch-training:2.10.0-gpu-py313" in torch
    ours = images.default_image("mxnet", "eu-west-1", "g5.xlarge", "123456789012")
    assert ours == "123456789012.dkr.ecr.eu-west-1.amazonaws.com/finetune:0.1.0"
    assert "finetune image push" in images.runtime("mxnet", ours)["needs"]


def _torch_request(dataset, hosts: int):
    res = Resources(
        backend="sagemaker",
        instance_type="g5.12xlarge",
        hosts=hosts,
        devices_per_host=4,
        device="gpu",
        spot=True,
    )
    plan = build_plan("smoke-resnet18-torch", dataset, res)
    image = images.framework_image("torch", "eu-west-1", "g5.12xlarge")
    opts = rq.JobOptions(region="eu-west-1", bucket="b", role_arn=ROLE, image=image)
    code = sourcedir.build("b", "ft-1-a")
    toolkit = code.hyperparameters("eu-west-1", hosts)
    return rq.training_request(plan, "ft-1-a", "finetune-1-a", CHANNELS, opts, 2**30, toolkit)


@pytest.mark.parametrize("hosts", [1, 2])
def test_torch_request_is_valid_for_the_api(tiny_dataset, hosts):
    import botocore.session
    from botocore.validate import validate_parameters

    from finetune.backends.sagemaker import validate

    req = _torch_request(tiny_dataset, hosts)
    model = botocore.session.get_session().get_service_model("sagemaker")
    validate_parameters(req, model.operation_model("CreateTrainingJob").input_shape)
    assert validate.check_request(req, "eu-west-1") == []


def test_toolkit_hyperparameters_and_the_multi_instance_launcher(tiny_dataset):
    one = _torch_request(tiny_dataset, 1)["HyperParameters"]
    assert one["sagemaker_program"] == '"finetune_entry.py"'  # JSON, as the SDK sends them
    submit = json.loads(one["sagemaker_submit_directory"])
    assert submit.startswith("s3://b/finetune/code/ft-1-a/sourcedir-")
    assert submit.endswith(".tar.gz")
    assert one["sagemaker_region"] == '"eu-west-1"'
    assert "sagemaker_torch_distributed_enabled" not in one  # our entrypoint spawns torchrun
    assert one["engine"] == "torch"
    two = _torch_request(tiny_dataset, 2)["HyperParameters"]
    assert two["sagemaker_torch_distributed_enabled"] == "true"
    lines = rq.summary_lines(_torch_request(tiny_dataset, 2))
    assert any("torchrun on every host" in line for line in lines)


def test_source_dir_holds_package_requirements_and_program():
    code = sourcedir.build("b", "ft-1-a")
    assert sourcedir.build("b", "ft-1-a") == code  # reproducible: same code, same key
    with tarfile.open(fileobj=io.BytesIO(code.data), mode="r:gz") as tar:
        names = set(tar.getnames())
        requirements = tar.extractfile("requirements.txt").read().decode().split()
        program = tar.extractfile("finetune_entry.py").read().decode()
    assert {"finetune/__init__.py", "finetune/train/entrypoint.py"} <= names
    assert "finetune/catalog/instances.csv" in names  # package data travels too
    assert "setup.py" not in names and "pyproject.toml" not in names  # a program, not a package
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert any(r.startswith("pydantic<") for r in requirements)
    assert not any(
        r.split("<")[0].split(">")[0] in ("torch", "torchvision", "numpy") for r in requirements
    )  # the image's torch stays
    assert "finetune.train.entrypoint" in program


def _plan(dataset, recipe, instance):
    res = Resources(backend="sagemaker", instance_type=instance, devices_per_host=1, device="gpu")
    return build_plan(recipe, dataset, res)


def test_dry_run_shows_the_image_and_the_source_dir_and_refuses_mxnet_on_hopper(tiny_dataset):
    from finetune.backends.sagemaker.preflight import dry_run
    from finetune.errors import UsageError

    opts = rq.JobOptions(region="eu-west-1")
    checked = dry_run(_plan(tiny_dataset, "smoke-resnet18-torch", "p5.4xlarge"), opts)
    text = "\n".join(f"{label} {value}" for label, value in checked.rows)
    assert "eu-west-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313" in text
    assert "finetune_entry.py" in text and "one process" in text
    with pytest.raises(UsageError, match=r"mxnet engine cannot run on p5\.4xlarge"):
        dry_run(_plan(tiny_dataset, "smoke-resnet18", "p5.4xlarge"), opts)


def test_the_plan_records_the_image_and_what_it_needs(tiny_dataset):
    from finetune.backends.sagemaker.preflight import dry_run
    from finetune.cli._plan_view import summary_lines

    opts = rq.JobOptions(region="eu-west-1")
    torch = dry_run(_plan(tiny_dataset, "smoke-resnet18-torch", "g6.xlarge"), opts).plan
    assert torch.runtime["image"].endswith("/pytorch-training:2.10.0-gpu-py313")
    [shown] = [line for line in summary_lines(torch, 250) if line.startswith("runtime ")]
    assert shown.endswith("torch on " + torch.runtime["image"])
    mine = rq.JobOptions(region="eu-west-1", image="my/img:1")
    mxnet = dry_run(_plan(tiny_dataset, "smoke-resnet18", "g6.xlarge"), mine).plan
    assert mxnet.runtime["image"] == "my/img:1"
    assert "finetune image push" in mxnet.runtime["needs"]


def test_a_recipe_with_metric_loggers_has_the_job_install_their_checked_lock(tiny_dataset):
    from finetune.backends import shipping
    from finetune.backends.sagemaker import submit as sub

    opts = rq.JobOptions(region="eu-west-1", bucket="b")
    res = _plan(tiny_dataset, "smoke-resnet18-torch", "g5.xlarge").resources
    logged = build_plan(
        "smoke-resnet18-torch", tiny_dataset, res, ["metric_logging.loggers=[mlflow]"]
    )
    code = sub.source_dir(logged, opts, "ft-1-a")
    entry = code.entrypoint("eu-west-1")
    assert len(entry) <= 100 and all(len(item) <= 256 for item in entry)  # the API's limits
    last = f"main({code.uri!r}, {code.sha256!r}, 'eu-west-1', {shipping.METRICS_LOCK!r}))\n"
    assert "".join(entry[3:]).endswith(last)
    with tarfile.open(fileobj=io.BytesIO(code.data), mode="r:gz") as tar:
        assert shipping.METRICS_LOCK in tar.getnames()  # inside what the job checks
    plain = sub.source_dir(_plan(tiny_dataset, "smoke-resnet18-torch", "g5.xlarge"), opts, "ft-1")
    assert "".join(plain.entrypoint("eu-west-1")[3:]).endswith(", 'eu-west-1'))\n")  # no lock
