"""The Plan: recipe + dataset + resources + derived values + (later) the cost estimate.

``launch`` builds one with build.build_plan, prints ``cli._plan_view.summary_lines`` for
``--dry-run``, hands it to a backend and stores :meth:`Plan.to_json` with the run, so a run
can be reproduced and costed from its record alone. The trainer receives only
``plan.hyperparameters.to_strings()`` (the SageMaker hyperparameters map).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from finetune.contracts.hparams import TrainHyperparameters
from finetune.data.manifest import plain_dataset_name
from finetune.errors import ConfigError, UsageError
from finetune.estimate.planned import Estimate
from finetune.recipes import lr_scaling
from finetune.recipes.schema import Recipe

if TYPE_CHECKING:
    from finetune.data.manifest import DatasetManifest

SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Resources(_Frozen):
    """Where the run goes: backend, instance type and count, devices on each instance. What a
    backend can provide (spot, several hosts) is its own to say: see backends/base.py."""

    backend: str | None = None  # a name from finetune.backends.BACKENDS; None: the default
    instance_type: str | None = None  # None where the backend runs on this machine
    hosts: int = Field(1, ge=1)  # instance count
    devices_per_host: int = Field(1, ge=1)
    device: Literal["gpu", "cpu"] = "cpu"
    spot: bool = False
    # The longest checkpoint interval the backend allows where a stop may never reach the
    # trainer (SageMaker spot): train.checkpoint_interval_s is capped at it; the note says why.
    checkpoint_max_s: float | None = Field(None, gt=0)
    checkpoint_note: str = ""

    @property
    def devices(self) -> int:
        return self.devices_per_host * self.hosts

    @classmethod
    def create(cls, **fields: Any) -> Resources:
        """Like the constructor, but an impossible combination is a UsageError, not a traceback."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "resources"
            raise UsageError(
                f"cannot run there: {where}: {first['msg'].removeprefix('Value error, ')}",
                "check --backend, --instance, --count and --spot.",
            ) from None


class DatasetSummary(_Frozen):
    """What the run trains on, and the checksums that prove which bytes those were."""

    path: str
    name: str
    num_classes: int
    train_count: int
    val_count: int
    test_count: int = 0  # a held-out test split, scored once with the best model
    image_side: int | None  # shorter side of the stored images in px; None: originals kept
    manifest_sha256: str
    rec_sha256: dict[str, str]  # file name -> sha256, from the manifest
    # a known dataset not prepared yet: published counts, enough to plan, never to train
    counts_only: bool = False

    # a plan read back (from the ledger, or plan.json in S3 by the EC2 agent) names files
    # NAME_train.rec ... with it: a plain name only
    _plain_name = field_validator("name")(plain_dataset_name)

    @classmethod
    def from_manifest(cls, manifest: DatasetManifest, path: str, sha: str) -> DatasetSummary:
        """The summary of a dataset whose manifest is ``manifest`` (its sha256 ``sha``), found
        at ``path`` (a local folder, or an S3 prefix): one rule for local and uploaded sets."""
        m, val = manifest, manifest.splits.get("val")
        return cls(
            path=path,
            name=m.name,
            num_classes=m.num_classes,
            train_count=m.splits["train"].count,
            val_count=val.count if val else 0,
            test_count=m.splits["test"].count if "test" in m.splits else 0,
            image_side=m.params.resize if m.params.resize and not m.params.pass_through else None,
            manifest_sha256=sha,
            rec_sha256={k: v.sha256 for k, v in sorted(m.files.items()) if k.endswith(".rec")},
        )


class Derived(_Frozen):
    """Values that follow from recipe + dataset + resources (the linear scaling rule)."""

    devices: int
    global_batch: int
    lr: float
    warmup_epochs: float
    warmup_steps: int
    steps_per_epoch: int
    total_steps: int

    @model_validator(mode="before")
    @classmethod
    def _stored_kvstore(cls, data: Any) -> Any:
        """Plans stored by older versions carry MXNet's kvstore here; it lives in the
        hyperparameters (chosen by finetune.train.engines.mxnet.kvstore)."""
        if isinstance(data, dict) and "kvstore" in data:
            data = {k: v for k, v in data.items() if k != "kvstore"}
        return data


class Plan(_Frozen):
    """Everything a backend needs to start a run, and everything a report needs to explain it."""

    schema_version: int = SCHEMA_VERSION
    recipe: Recipe
    overrides: tuple[str, ...] = ()
    dataset: DatasetSummary
    resources: Resources
    derived: Derived
    hyperparameters: TrainHyperparameters
    estimate: Estimate | None = None  # filled by the cost estimator, see with_estimate
    # what runs the engine there (image or AMI, its framework, what it needs): by the backend
    runtime: dict[str, str] | None = None
    image: str | None = None  # cloud runs: the training image by digest, set at launch
    max_eur: float | None = None  # --max-eur: checked against the projected total as it runs
    # where the pretrained weights come from on the chosen backend (service.weights), in words
    weights_from: str | None = None

    def with_estimate(self, estimate: Estimate | Mapping[str, Any]) -> Plan:
        """A copy carrying a cost estimate (estimate.estimator's, or its JSON as stored); its
        ``summary`` lines are what ``summary_lines`` shows."""
        if not isinstance(estimate, Estimate):
            estimate = Estimate.model_validate(dict(estimate))
        # the trainer's "euros so far" (finetune.train.metriclog) at the same price
        hp = self.hyperparameters.model_copy(update={"eur_per_hour": estimate.eur_per_hour or 0.0})
        return self.model_copy(update={"estimate": estimate, "hyperparameters": hp})

    def with_runtime(self, runtime: Mapping[str, str]) -> Plan:
        """A copy recording what runs the engine (a backend's image or AMI choice)."""
        return self.model_copy(update={"runtime": {k: str(v) for k, v in runtime.items()}})

    def to_json(self) -> str:
        """The plan as indented JSON, to store with the run."""
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        """Read a plan written by ``to_json``."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise ConfigError(
                f"not a valid plan: {str(exc).splitlines()[0]}",
                "use the plan.json stored with a run, or build a new one with `launch --dry-run`.",
            ) from None

    def lr_schedule(self) -> lr_scaling.LrSchedule:
        """The learning rate at every step, as the trainer will apply it."""
        return lr_scaling.LrSchedule.from_hparams(
            self.hyperparameters, self.derived.steps_per_epoch
        )
