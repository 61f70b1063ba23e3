"""Plans, runs and job scripts shared by the SageMaker tests."""

from __future__ import annotations

from finetune import service
from finetune.plan import Resources, build_plan
from finetune.runs.ledger import Ledger
from finetune.runs.run import Run, new_run_id


def sm_plan(
    dataset, hosts: int = 1, spot: bool = False, instance: str = "p3.8xlarge", overrides=()
):
    """The smoke recipe (with ``overrides``) on ``dataset`` for SageMaker (GPUs per host
    from the catalog)."""
    from finetune.catalog import instances

    resources = Resources(
        backend="sagemaker",
        instance_type=instance,
        hosts=hosts,
        devices_per_host=instances.get(instance).gpu_count,
        device="gpu",
        spot=spot,
    )
    return build_plan("smoke-resnet18", dataset, resources, overrides)


def new_run(tmp_path, plan) -> Run:
    run_id = new_run_id()
    run_dir = tmp_path / "runs" / run_id
    run_dir.mkdir(parents=True)
    return service.new_run(plan, "sagemaker", run_id, run_dir)


OPEN_LEDGERS: list[Ledger] = []  # closed after each test (tests/aws/conftest.py)


def ledger_at(tmp_path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    OPEN_LEDGERS.append(ledger)
    return ledger


def step(status: str, secondary: str, at: float, message: str = "", **fields) -> dict:
    """One scripted DescribeTrainingJob state (At: seconds after the job was created)."""
    out = {"TrainingJobStatus": status, "SecondaryStatus": secondary, "At": at, **fields}
    if message:
        out["StatusMessage"] = message
    return out


# SageMaker's documented sequences (DescribeTrainingJob SecondaryStatus).
ON_DEMAND = [
    step("InProgress", "Starting", 0, "Launching requested ML instances"),
    step("InProgress", "Downloading", 60, "Downloading input data"),
    step("InProgress", "Training", 90, "Training image download completed. Training in progress."),
    step("InProgress", "Uploading", 600, "Uploading generated training model"),
    step(
        "Completed",
        "Completed",
        620,
        "Training job completed",
        TrainingTimeInSeconds=620,
        BillableTimeInSeconds=620,
    ),
]

SPOT_INTERRUPTED_ONCE = [
    step("InProgress", "Starting", 0, "Launching requested ML instances"),
    step("InProgress", "Downloading", 60),
    step("InProgress", "Training", 90),
    step("InProgress", "Interrupted", 300, "Spot instances were interrupted"),
    step("InProgress", "Starting", 400, "Launching requested ML instances"),
    step("InProgress", "Downloading", 460),
    step("InProgress", "Training", 500),
    step("InProgress", "Uploading", 900),
    step(
        "Completed",
        "Completed",
        920,
        "Training job completed",
        TrainingTimeInSeconds=920,
        BillableTimeInSeconds=320,
    ),
]

SPOT_MAX_WAIT = [
    step("InProgress", "Starting", 0),
    step("InProgress", "Training", 90),
    step("InProgress", "Interrupted", 300, "Spot instances were interrupted"),
    step(
        "Stopped",
        "MaxWaitTimeExceeded",
        7200,
        "The job exceeded the maximum wait time",
        TrainingTimeInSeconds=7200,
        BillableTimeInSeconds=210,
    ),
]

FAILED = [
    step("InProgress", "Starting", 0),
    step("InProgress", "Training", 90),
    step(
        "Failed",
        "Failed",
        120,
        "Training job failed",
        FailureReason="AlgorithmError: ExecuteUserScriptError: CUDA out of memory",
        TrainingTimeInSeconds=120,
        BillableTimeInSeconds=120,
    ),
]

CAPACITY = [
    step("InProgress", "Starting", 0, "Insufficient capacity error from EC2 while launching"),
    step(
        "Failed",
        "Failed",
        30,
        FailureReason="CapacityError: Unable to provision requested ML compute capacity. "
        "Please retry using a different ML instance type.",
        TrainingTimeInSeconds=0,
        BillableTimeInSeconds=0,
    ),
]
