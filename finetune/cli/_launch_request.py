"""What `finetune launch` is asked to run, as one typed flag set (``LaunchFlags``), and the one
place those flags become a ``service.LaunchRequest`` (``LaunchFlags.request``).

Each flag is an ``Annotated`` alias below. A backend's own flag also carries ``TO_BACKEND``: it
travels in ``LaunchRequest.options`` under its field name in ``LaunchFlags``, which must be
the name of a field of a backend's ``Options`` model (``finetune.backends.options_for``;
tests/test_cli_options.py holds the two together). The backend a launch runs on refuses a
flag it does not take, naming the backends that do.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Annotated

import typer

from finetune import service
from finetune.backends.base import ResourceRequest
from finetune.cli._options import (
    Backend,
    Budget,
    Dataset,
    Deadline,
    Help,
    Instance,
    MaxEur,
    Region,
    Spot,
    fields_marked,
    flag_set,
)
from finetune.ranking import choose as pick
from finetune.units.durations import parse_duration
from finetune.units.eurocap import check_max_eur


class _ToBackend:
    """Marks a flag that goes to the backend's Options model, under its own name."""

    def __repr__(self) -> str:
        return "TO_BACKEND"


TO_BACKEND = _ToBackend()
Option = typer.Option

# -- what to run, and where -------------------------------------------------------------------
LaunchDataset = Annotated[
    Dataset,
    Help(
        "Prepared dataset: folder or name under the data dir (default: the recipe's); for "
        "sagemaker and ec2 also the s3:// prefix an earlier launch uploaded it to."
    ),
]
LaunchBackend = Annotated[
    Backend[str | None], Help("Where to run: local (the default: this machine), sagemaker or ec2.")
]
LaunchInstance = Annotated[
    Instance,
    Help(
        "EC2/SageMaker: instance type, e.g. g5.xlarge, p3.8xlarge or ml.p3.8xlarge; or "
        "cheapest / fastest: picked (with the backend and --count) from `finetune plan`."
    ),
]
LaunchDeadline = Annotated[
    Deadline, Help("With --instance cheapest: the cheapest that finishes within this, e.g. 3h.")
]
LaunchBudget = Annotated[
    Budget, Help("With --instance fastest: the fastest that costs at most this many euros.")
]
Count = Annotated[
    int,
    Option(min=1, help="EC2: instances (one per run); SageMaker: hosts of one job (lr scales)."),
]
LaunchSpot = Annotated[Spot, Help("EC2/SageMaker: spot capacity (cheaper, interruptible).")]
SkipChecksums = Annotated[
    bool,
    Option(
        "--skip-data-checksums",
        help="Do not check the local dataset's files against the manifest's sha256 "
        "(checked by default; cached by size and mtime, so only changed files are read).",
    ),
]

# -- each backend's own flags (TO_BACKEND) ----------------------------------------------------
Gpus = Annotated[
    str | None,
    Option(help="Local backend: GPU numbers to use, e.g. 0,1 (default: all)."),
    TO_BACKEND,
]
Cpus = Annotated[
    int | None,
    Option(min=1, help="Local backend: train data-parallel over this many CPU contexts."),
    TO_BACKEND,
]
MaxRuntime = Annotated[
    str | None,
    Option(
        help="EC2/SageMaker: stop after this long, e.g. 2h (default: 1.5 x the estimate's slow "
        "end, at least 1h; 6h without an estimate)."
    ),
    TO_BACKEND,
]
MaxWait = Annotated[
    str | None,
    Option(
        help="SageMaker --spot: give up waiting for capacity after this long (default 2x runtime)."
    ),
    TO_BACKEND,
]
LaunchMaxEur = Annotated[
    MaxEur, Help("EC2/SageMaker: never spend more than this many euros."), TO_BACKEND
]
Image = Annotated[
    str | None,
    Option(help="SageMaker: training image URI (default: the one `finetune image push` pushed)."),
    TO_BACKEND,
]
LaunchRegion = Annotated[
    Region[str | None],
    Help("EC2/SageMaker: AWS region (default: FINETUNE_REGION, then your AWS config)."),
    TO_BACKEND,
]
SecurityGroup = Annotated[
    list[str] | None,
    Option(help="SageMaker: VPC security group id (repeat; needs --subnet)."),
    TO_BACKEND,
]
KmsKey = Annotated[
    str | None, Option(help="SageMaker: KMS key for the volume and the output."), TO_BACKEND
]
Ami = Annotated[
    str | None, Option(help="EC2: AMI id (default: the Deep Learning Base GPU AMI)."), TO_BACKEND
]
Subnet = Annotated[
    list[str] | None,
    Option(help="EC2: subnet to try (repeat; in order). SageMaker: VPC subnet (repeat)."),
    TO_BACKEND,
]
Az = Annotated[list[str] | None, Option(help="EC2: availability zone to try (repeat)."), TO_BACKEND]
ReadPrefix = Annotated[
    list[str] | None,
    Option(
        help="EC2/SageMaker: an s3:// prefix in FINETUNE_BUCKET the run may read besides its "
        "dataset's own (repeat); needed for an s3:// --dataset outside finetune/datasets/."
    ),
    TO_BACKEND,
]
MaxRestarts = Annotated[
    int | None,
    Option(
        min=0,
        help="EC2: relaunches after spot interruptions, resuming from checkpoints (default 3).",
    ),
    TO_BACKEND,
]
OnDemandFallback = Annotated[
    bool,
    Option("--allow-on-demand-fallback", help="EC2: relaunch on-demand when spot has none."),
    TO_BACKEND,
]
FallbackInstance = Annotated[
    list[str] | None,
    Option(help="EC2: another instance type a relaunch may use (repeat)."),
    TO_BACKEND,
]


@flag_set
class LaunchFlags:
    """The flags of `finetune launch` that say what to run and where, in --help's order."""

    dataset: LaunchDataset = None
    backend: LaunchBackend = None
    gpus: Gpus = None
    cpus: Cpus = None
    instance: LaunchInstance = None
    deadline: LaunchDeadline = None
    budget: LaunchBudget = None
    count: Count = 1
    spot: LaunchSpot = False
    max_runtime: MaxRuntime = None
    max_wait: MaxWait = None
    max_eur: LaunchMaxEur = None
    image: Image = None
    region: LaunchRegion = None
    security_group: SecurityGroup = None
    kms_key: KmsKey = None
    ami: Ami = None
    subnet: Subnet = None
    az: Az = None
    read_prefix: ReadPrefix = None
    max_restarts: MaxRestarts = None
    allow_on_demand_fallback: OnDemandFallback = False
    fallback_instance: FallbackInstance = None
    skip_data_checksums: SkipChecksums = False

    @classmethod
    def backend_options(cls) -> tuple[str, ...]:
        """The fields that go to the backend's Options model, each under its own name."""
        return fields_marked(cls, TO_BACKEND)

    def options(self) -> dict[str, object]:
        """The backend options as ``LaunchRequest.options`` takes them (a repeatable flag as a
        tuple, () when not given)."""
        hints = typing.get_type_hints(type(self))
        out = {}
        for name in self.backend_options():
            value = getattr(self, name)
            repeatable = any(typing.get_origin(a) is list for a in typing.get_args(hints[name]))
            out[name] = tuple(value or ()) if repeatable else value
        return out

    def request(self, recipe: str, overrides) -> service.LaunchRequest:
        """The service.LaunchRequest these flags ask for. --instance cheapest|fastest is
        replaced by the plan's pick (backend, instance, count, market, region; said on
        stderr); --deadline/--budget without a pick are refused (finetune.ranking.choose)."""
        overrides = tuple(overrides or ())
        flags = self._picked(recipe, overrides)
        return service.LaunchRequest(
            backend=flags.backend,
            recipe=recipe,
            dataset=flags.dataset,
            overrides=overrides,
            resources=ResourceRequest(instance=flags.instance, count=flags.count, spot=flags.spot),
            options=flags.options(),
            verify_checksums=not flags.skip_data_checksums,
        )

    def _picked(self, recipe: str, overrides: tuple[str, ...]) -> LaunchFlags:
        pick.check_flags(self.instance, self.deadline, self.budget)
        if self.instance is None or not pick.is_pick(self.instance):
            return self
        deadline_s = parse_duration(self.deadline, "--deadline") if self.deadline else None
        choice = pick.choose(
            self.instance, recipe, self.dataset, overrides, backend=self.backend,
            spot=self.spot, region=self.region, deadline_s=deadline_s,
            budget_eur=check_max_eur(self.budget, "--budget"),
        )  # fmt: skip
        typer.echo("\n".join(choice.lines), err=True)
        return dataclasses.replace(
            self, backend=choice.backend, instance=choice.instance, count=choice.count,
            spot=choice.spot, region=choice.region,
        )  # fmt: skip
