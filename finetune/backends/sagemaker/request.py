"""The CreateTrainingJob request for a Plan: one pure function, so tests assert on it directly
and ``launch --dry-run`` shows exactly what would be sent.

Layout in the bucket (one prefix per kind, so the IAM policies can be exact):

    s3://BUCKET/finetune/datasets/NAME-HASH/{train,validation}/   read by the job
    s3://BUCKET/finetune/output/JOB/output/{model,output}.tar.gz   written by the job
    s3://BUCKET/finetune/output/JOB/tensorboard/                   the tensorboard logger's
                                  event files, every attempt's (JOB: the run's first job name)
    s3://BUCKET/finetune/checkpoints/RUN/                          synced with /opt/ml/checkpoints
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from finetune.backends.runtime import RUNTIME_FALLBACK_S
from finetune.contracts.container import DEFAULT_ROOT, TENSORBOARD_SUBDIR
from finetune.contracts.metrics import METRIC_REGEXES
from finetune.data.channels import RECORDIO
from finetune.errors import ConfigError

OUTPUT_ROOT = "finetune/output/"
CHECKPOINT_ROOT = "finetune/checkpoints/"
CHECKPOINT_LOCAL = "/opt/ml/checkpoints"
# where the trainer writes them (Layout.tensorboard_dir): SageMaker's default TensorBoard LocalPath
TENSORBOARD_LOCAL = str(DEFAULT_ROOT / TENSORBOARD_SUBDIR)
JOB_PREFIX = "finetune-"  # the caller policy allows training-job/finetune-* only
DEFAULT_MAX_RUNTIME_S = RUNTIME_FALLBACK_S  # submit sets runtime.default_runtime's cap first
DEFAULT_RETRIES = 2  # SageMaker restarts a job after an internal error (not our bugs)
# options.json rows written before the stored names were the flags': old name -> flag name
_STORED_NAMES = {
    "max_runtime_s": "max_runtime",
    "max_wait_s": "max_wait",
    "kms_key_id": "kms_key",
    "subnets": "subnet",
    "security_group_ids": "security_group",
    "read_prefixes": "read_prefix",
}


@dataclass(frozen=True)
class JobOptions:
    """What a SageMaker job needs beyond the Plan: the launch flags (options.SageMakerOptions,
    under the same names) and what submit resolves (bucket, role, the image's digest). Stored
    with the run, so a resumed run starts the same way."""

    region: str | None = None
    bucket: str | None = None
    role_arn: str | None = None
    image: str | None = None
    max_runtime: int | None = None  # s; None: runtime.default_runtime, or what --max-eur affords
    max_wait: int | None = None  # seconds, spot only; default twice the runtime
    max_eur: float | None = None
    volume_gb: int | None = None  # default: from the dataset size
    kms_key: str | None = None
    subnet: tuple[str, ...] = ()
    security_group: tuple[str, ...] = ()
    retry_attempts: int = DEFAULT_RETRIES
    environment: dict[str, str] = field(default_factory=dict)
    read_prefix: tuple[str, ...] = ()  # s3:// prefixes the run may read (aws.datasetscope)
    run_role: bool = False  # role_arn is this run's own role (runrole), made at submit

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> JobOptions:
        data = {_STORED_NAMES.get(k, k): v for k, v in data.items()}  # older options.json
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("subnet", "security_group", "read_prefix"):
            known[key] = tuple(known.get(key) or ())
        return cls(**known)

    def runtime_seconds(self) -> int:
        return self.max_runtime or DEFAULT_MAX_RUNTIME_S

    def wait_seconds(self) -> int:
        return self.max_wait or 2 * self.runtime_seconds()


def job_name(run_id: str, attempt: int = 0) -> str:
    """'ft-20261122-101500-a3f9' -> 'finetune-20261122-101500-a3f9' ('-r1' when resumed:
    SageMaker never reuses a job name)."""
    base = JOB_PREFIX + run_id.removeprefix("ft-")
    return f"{base}-r{attempt}" if attempt else base


def checkpoint_uri(bucket: str, run_id: str) -> str:
    return f"s3://{bucket}/{CHECKPOINT_ROOT}{run_id}/"


def tensorboard_uri(bucket: str, run_id: str) -> str:
    """Where SageMaker uploads a run's TensorBoard files: under its first job's output
    prefix, which the run's own role may write (runrole WriteOwnOutput) and the SageMaker
    boundary allows; a resumed job (JOB-r1) adds its event files to the same folder."""
    return f"{output_uri(bucket)}{job_name(run_id)}/tensorboard/"


def output_uri(bucket: str) -> str:
    return f"s3://{bucket}/{OUTPUT_ROOT}"


def volume_gb(dataset_bytes: int) -> int:
    """File mode copies the data to the volume; leave room for checkpoints and the model."""
    return max(50, math.ceil(dataset_bytes * 1.5 / 2**30) + 30)


def training_request(
    plan,
    run_id: str,
    name: str,
    channels: dict[str, str],
    opts: JobOptions,
    dataset_bytes: int,
    toolkit: dict[str, str] | None = None,
    entrypoint: list[str] | None = None,
) -> dict:
    """The CreateTrainingJob request (API field names) for ``plan`` as job ``name``;
    ``toolkit``: the training toolkit's sagemaker_* hyperparameters and ``entrypoint`` the
    program that checks the source directory before it (sourcedir.py)."""
    res = plan.resources
    bucket = opts.bucket
    if not bucket:  # submit and the dry run fill it (FINETUNE_BUCKET) before asking
        raise ConfigError("a SageMaker job needs an S3 bucket for its output and checkpoints",
                          "set FINETUNE_BUCKET to a bucket in your region.")  # fmt: skip
    req: dict = {
        "TrainingJobName": name,
        "RoleArn": opts.role_arn,
        "AlgorithmSpecification": {
            "TrainingImage": opts.image,
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": k, "Regex": v} for k, v in METRIC_REGEXES.items()],
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "HyperParameters": {**plan.hyperparameters.to_strings(), **(toolkit or {})},
        "InputDataConfig": [_channel(c, uri) for c, uri in channels.items()],
        "OutputDataConfig": {"S3OutputPath": output_uri(bucket)},
        "ResourceConfig": {
            "InstanceType": sagemaker_instance(res.instance_type),
            "InstanceCount": res.hosts,
            "VolumeSizeInGB": opts.volume_gb or volume_gb(dataset_bytes),
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": opts.runtime_seconds()},
        "CheckpointConfig": {
            "S3Uri": checkpoint_uri(bucket, run_id),
            "LocalPath": CHECKPOINT_LOCAL,
        },
        "EnableManagedSpotTraining": res.spot,
        "Environment": {"FINETUNE_RUN_ID": run_id, "PYTHONUNBUFFERED": "1", **opts.environment},
        "RetryStrategy": {"MaximumRetryAttempts": opts.retry_attempts},
        "Tags": tags(plan, run_id),
    }
    if entrypoint:
        req["AlgorithmSpecification"]["ContainerEntrypoint"] = list(entrypoint)
    if "tensorboard" in plan.hyperparameters.metric_loggers:
        req["TensorBoardOutputConfig"] = {
            "LocalPath": TENSORBOARD_LOCAL,
            "S3OutputPath": tensorboard_uri(bucket, run_id),
        }
    if res.spot:
        req["StoppingCondition"]["MaxWaitTimeInSeconds"] = opts.wait_seconds()
    if opts.kms_key:
        req["OutputDataConfig"]["KmsKeyId"] = opts.kms_key
        req["ResourceConfig"]["VolumeKmsKeyId"] = opts.kms_key
    if opts.subnet or opts.security_group:
        req["VpcConfig"] = {
            "Subnets": list(opts.subnet),
            "SecurityGroupIds": list(opts.security_group),
        }
    return req


def sagemaker_instance(instance_type: str | None) -> str:
    """'p3.8xlarge' or 'ml.p3.8xlarge' -> 'ml.p3.8xlarge'."""
    name = (instance_type or "").strip().lower()
    return name if name.startswith("ml.") else f"ml.{name}"


def _channel(name: str, uri: str) -> dict:
    return {
        "ChannelName": name,
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": uri if uri.endswith("/") else uri + "/",
                "S3DataDistributionType": "FullyReplicated",
            }
        },
        "ContentType": RECORDIO,
        "CompressionType": "None",
        "RecordWrapperType": "None",
        "InputMode": "File",
    }


def tags(plan, run_id: str) -> list[dict[str, str]]:
    """project, run id and recipe: find and bill the jobs of one project or run."""
    return [
        {"Key": "project", "Value": "finetune"},
        {"Key": "finetune:run-id", "Value": run_id},
        {"Key": "finetune:recipe", "Value": _tag_value(plan.recipe.name)},
    ]


def _tag_value(text: str) -> str:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.:/=+-@")
    return "".join(c if c in allowed else "-" for c in text)[:256]


def summary_lines(req: dict, first: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """What `launch --dry-run` shows of the request (aligned ``label  value`` lines), after
    the ``first`` rows given."""
    rows = summary_rows(req, first)
    width = max(len(label) for label, _ in rows)
    return [f"{label:<{width}}  {value}" for label, value in rows]


def summary_rows(req: dict, first: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, str]]:
    """The request as (label, value) rows, after the ``first`` rows given."""
    rc, sc, spec = req["ResourceConfig"], req["StoppingCondition"], req["AlgorithmSpecification"]
    rows = [
        *first,
        ("job name", req["TrainingJobName"]),
        ("image", spec["TrainingImage"]),
        ("role", req["RoleArn"]),
        ("instances", f"{rc['InstanceCount']} x {rc['InstanceType']}, {rc['VolumeSizeInGB']} GB"),
        ("capacity", "managed spot" if req["EnableManagedSpotTraining"] else "on demand"),
        ("max runtime", _hours(sc["MaxRuntimeInSeconds"])),
    ]
    if "MaxWaitTimeInSeconds" in sc:
        rows.append(("max wait", _hours(sc["MaxWaitTimeInSeconds"])))
    rows += [(f"input {c['ChannelName']}", _uri(c)) for c in req["InputDataConfig"]]
    rows += _toolkit_rows(req["HyperParameters"])
    rows += [
        ("output", req["OutputDataConfig"]["S3OutputPath"]),
        ("checkpoints", req["CheckpointConfig"]["S3Uri"]),
        *(
            [("tensorboard", req["TensorBoardOutputConfig"]["S3OutputPath"])]
            if "TensorBoardOutputConfig" in req
            else []
        ),
        ("hyperparameters", f"{len(req['HyperParameters'])} (as strings)"),
        (
            "metrics",
            ", ".join(m["Name"] for m in req["AlgorithmSpecification"]["MetricDefinitions"]),
        ),
    ]
    return rows


def _toolkit_rows(hp: dict[str, str]) -> list[tuple[str, str]]:
    """The training toolkit's program and launcher, where the job has a source directory."""
    if "sagemaker_program" not in hp:
        return []
    source = f"{_plain(hp['sagemaker_submit_directory'])} -> {_plain(hp['sagemaker_program'])}"
    torchrun = hp.get("sagemaker_torch_distributed_enabled") == "true"
    launcher = "torchrun on every host (toolkit torch_distributed)" if torchrun else "one process"
    return [("source dir", source), ("launcher", launcher)]


def _plain(value: str) -> str:
    return value[1:-1] if value.startswith('"') and value.endswith('"') else value


def _uri(channel: dict) -> str:
    return channel["DataSource"]["S3DataSource"]["S3Uri"]


def _hours(seconds: int) -> str:
    return f"{seconds / 3600:g} h ({seconds} s)"
