"""`launch --backend sagemaker` as library calls: the options model (the launch flags this
backend takes), resources from the catalog and a dataset already in S3. The pre-flight that
--dry-run shows is preflight.py."""

from __future__ import annotations

from pydantic import Field

from finetune.aws.session import configured_region
from finetune.backends import base, s3dataset
from finetune.backends.sagemaker import request as rq
from finetune.catalog import instances
from finetune.errors import UsageError
from finetune.plan import Resources
from finetune.settings.names import Region
from finetune.units.durations import Duration
from finetune.units.eurocap import EuroCap


class SageMakerOptions(base.Options):
    """The SageMaker backend's launch flags (settings fill the rest at submit time)."""

    region: Region = None
    max_runtime: Duration | None = Field(None, gt=0)
    max_wait: Duration | None = Field(None, gt=0)  # spot only; default twice the runtime
    max_eur: EuroCap = None
    image: str | None = None
    subnet: tuple[str, ...] = ()
    security_group: tuple[str, ...] = ()
    kms_key: str | None = None
    read_prefix: tuple[str, ...] = ()  # s3:// prefixes the run may read besides its dataset

    def job_options(self) -> rq.JobOptions:
        """The options as stored with the run (options.json), so a resume starts the same."""
        return rq.JobOptions(**self.model_dump())  # the same names: nothing renamed


# a stop's SIGTERM most likely never reaches the trainer in AWS's image, so the last periodic
# checkpoint is what survives (docs/decisions/041-sagemaker-spot-checkpoints.md)
SPOT_CHECKPOINTS = {
    "checkpoint_max_s": 300.0,
    "checkpoint_note": "at most 300 s on SageMaker spot: a stop's SIGTERM may never reach the "
    "trainer in AWS's image",
}


def resources(request: base.ResourceRequest, opts: rq.JobOptions):
    """Every GPU of ``count`` instances of ``instance``: hosts = count, so the learning rate
    scales with the total GPU count."""
    if not request.instance:
        raise UsageError(
            "--backend sagemaker needs an instance type",
            "pass --instance TYPE, e.g. --instance p3.8xlarge (`finetune prices` lists them).",
        )
    if opts.max_wait and not request.spot:
        raise UsageError("--max-wait applies to spot jobs only", "add --spot, or drop --max-wait.")
    inst = instances.get(request.instance)
    if inst.gpu_count < 1:
        raise UsageError(f"{inst.name} has no GPU", "pick a GPU instance type.")
    return Resources.create(
        backend="sagemaker",
        instance_type=inst.name,
        hosts=request.count,
        devices_per_host=inst.gpu_count,
        device="gpu",
        spot=request.spot,
        **(SPOT_CHECKPOINTS if request.spot else {}),
    )


def dataset_summary(uri: str, opts: rq.JobOptions):
    """The summary of a dataset finetune uploaded to ``uri`` (its manifest is read there)."""
    return s3dataset.summarize(uri, configured_region(opts.region))
