"""`launch --backend ec2` options: the one options model (the launch flags this backend
takes, stored as given in RUN_DIR/ec2.json for status, stop and resume), resources from the
catalog, and a dataset already in S3. The dry run's pre-flight is in checks.py."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from finetune.aws.session import configured_region
from finetune.backends import base, s3dataset
from finetune.catalog import instances
from finetune.errors import UsageError
from finetune.plan import Resources
from finetune.settings.names import check_region
from finetune.units.durations import Duration
from finetune.units.eurocap import EuroCap

# ec2.json rows written before the options were stored as given: old name -> flag name
_STORED_NAMES = {
    "subnets": "subnet",
    "azs": "az",
    "max_runtime_s": "max_runtime",
    "fallback_instances": "fallback_instance",
    "read_prefixes": "read_prefix",
}
_NEVER_FLAGS = ("volume_gib", "upload_interval_s", "image")  # stored once, always defaults


class Ec2Options(base.Options):
    """The EC2 backend's launch flags, as given (--subnet, --az, --max-runtime, ...)."""

    region: str | None = None  # --region; default FINETUNE_REGION, then your AWS config
    ami: str | None = None
    subnet: tuple[str, ...] = ()
    az: tuple[str, ...] = ()
    # None: the cap every cloud backend gives (backends/runtime.py), set before the launch
    max_runtime: Duration | None = Field(None, gt=0)
    max_eur: EuroCap = None
    max_restarts: int = Field(3, ge=0)
    allow_on_demand_fallback: bool = False
    fallback_instance: tuple[str, ...] = ()
    read_prefix: tuple[str, ...] = ()  # s3:// prefixes the run may read besides its dataset

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str | None) -> str | None:
        return check_region(value, "--region") if value else value

    @classmethod
    def stored(cls, data: dict[str, Any]) -> Ec2Options:
        """The options kept in an ec2.json, older ones (renamed fields) included."""
        data = {_STORED_NAMES.get(k, k): v for k, v in data.items() if k not in _NEVER_FLAGS}
        return cls.model_validate(data)


def resources(request: base.ResourceRequest):
    """All GPUs of ``count`` instances of one type from the catalog (CPU-only types: cpu)."""
    if not request.instance:
        raise UsageError(
            "--backend ec2 needs an instance type",
            "pass --instance TYPE, e.g. --instance g5.xlarge (`finetune prices` lists them).",
        )
    inst = instances.get(request.instance)
    return Resources.create(
        backend="ec2",
        instance_type=inst.name,
        hosts=request.count,
        devices_per_host=max(inst.gpu_count, 1),
        device="gpu" if inst.gpu_count else "cpu",
        spot=request.spot,
    )


def dataset_summary(uri: str, region: str | None = None):
    return s3dataset.summarize(uri, configured_region(region))
