"""The Plan: recipe + dataset + resources + derived values + (later) the cost estimate.

``launch`` builds one with :func:`build_plan`, prints ``plan_summary.summary_lines`` for
``--dry-run``, hands it to a backend and stores :meth:`Plan.to_json` with the run, so a run
can be reproduced and costed from its record alone. The trainer receives only
``plan.hyperparameters.to_strings()`` (the SageMaker hyperparameters map).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from finetune.data.manifest import plain_dataset_name
from finetune.errors import ConfigError, DataError, UsageError
from finetune.hparams import TrainHyperparameters
from finetune.recipes import scaling
from finetune.recipes.model import Recipe
from finetune.report.planned import Estimate

SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Resources(_Frozen):
    """Where the run goes: backend, instance type and count, devices on each instance. What a
    backend can provide (spot, several hosts) is its own to say: see backends/base.py."""

    backend: str | None = None  # a name from finetune.backends.REGISTRY; None: the default
    instance_type: str | None = None  # None where the backend runs on this machine
    hosts: int = Field(1, ge=1)  # instance count
    devices_per_host: int = Field(1, ge=1)
    device: Literal["gpu", "cpu"] = "cpu"
    spot: bool = False

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

    # a plan read back (from the ledger, or plan.json in S3 by the EC2 agent) names files
    # NAME_train.rec ... with it: a plain name only
    _plain_name = field_validator("name")(plain_dataset_name)


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
        """Plans stored before issue 20 carry MXNet's kvstore here; it lives in the
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

    def with_estimate(self, estimate: Estimate | Mapping[str, Any]) -> Plan:
        """A copy carrying a cost estimate (report.estimate's, or its JSON as stored); its
        ``summary`` lines are what ``summary_lines`` shows."""
        if not isinstance(estimate, Estimate):
            estimate = Estimate.model_validate(dict(estimate))
        return self.model_copy(update={"estimate": estimate})

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

    def lr_schedule(self) -> scaling.LrSchedule:
        """The learning rate at every step, as the trainer will apply it."""
        return scaling.LrSchedule.from_hparams(self.hyperparameters, self.derived.steps_per_epoch)


def build_plan(
    recipe: Recipe | str | Path,
    dataset_dir: str | Path | DatasetSummary | None = None,
    resources: Resources | None = None,
    overrides: Sequence[str] = (),
    verify_checksums: bool = True,
) -> Plan:
    """Resolve recipe (name, path or Recipe) + overrides, read the dataset's manifest (or take
    a ready DatasetSummary, e.g. of a dataset already in S3), and derive global batch, scaled
    learning rate, warmup and steps for ``resources``. ``verify_checksums``: check the local
    dataset's files against the manifest's sha256 (cached by size and mtime)."""
    from finetune.recipes.loading import load_recipe, with_overrides
    from finetune.train.engines.models import check_augmentation, check_model

    if isinstance(recipe, Recipe):
        recipe = with_overrides(recipe, overrides)
    else:
        recipe = load_recipe(recipe, overrides)
    check_model(recipe.engine, recipe.model.name)  # before the dataset is read
    check_augmentation(recipe.engine, recipe.data.augmentation)
    resources = resources or Resources()
    if isinstance(dataset_dir, DatasetSummary):
        dataset = dataset_dir
    else:
        dataset = summarize_dataset(_dataset_dir(recipe, dataset_dir), verify_checksums)
    _check_fit(recipe, dataset)
    derived = derive(recipe, dataset, resources)
    hp = hyperparameters(recipe, dataset, resources, derived)
    return Plan(
        recipe=recipe,
        overrides=tuple(overrides),
        dataset=dataset,
        resources=resources,
        derived=derived,
        hyperparameters=hp,
    )


def _dataset_dir(recipe: Recipe, given: str | Path | None) -> Path:
    from finetune.settings import dataset_path

    choice = given if given is not None else recipe.data.dataset
    if not choice:
        raise UsageError(
            f"recipe {recipe.name} names no dataset and none was given",
            "pass --dataset NAME_OR_PATH (a folder made by `finetune prepare`), or set "
            "data.dataset in the recipe.",
        )
    return dataset_path(str(choice))


def summarize_dataset(directory: Path, verify_checksums: bool = True) -> DatasetSummary:
    """Read and check a prepared dataset's manifest: sizes, sha256 unless told not to, and
    every record's framing and label (finetune.data.verify.check_dataset)."""
    from finetune.data import manifest as mf
    from finetune.data.verify import check_dataset

    m = mf.load(directory)
    check_dataset(directory, m, verify_checksums)
    if m.num_classes < 2 or "train" not in m.splits or m.splits["train"].count < 1:
        raise DataError(
            f"dataset {directory} has {m.num_classes} class(es) and no usable training split",
            "prepare a dataset with at least two classes and some training images.",
        )
    val = m.splits.get("val")
    return DatasetSummary(
        path=str(Path(directory).resolve()),
        name=m.name,
        num_classes=m.num_classes,
        train_count=m.splits["train"].count,
        val_count=val.count if val else 0,
        test_count=m.splits["test"].count if "test" in m.splits else 0,
        image_side=m.params.resize if m.params.resize and not m.params.pass_through else None,
        manifest_sha256=mf.sha256_file(Path(directory) / mf.MANIFEST),
        rec_sha256={k: v.sha256 for k, v in sorted(m.files.items()) if k.endswith(".rec")},
    )


def _check_fit(recipe: Recipe, dataset: DatasetSummary) -> None:
    """Random crops larger than the stored images would fail inside the data loader."""
    size, side = recipe.data.image_size, dataset.image_side
    if side is not None and size > side:
        raise ConfigError(
            f"data.image_size={size} is larger than the prepared images (shorter side {side} px)",
            f"prepare the dataset with --resize {size} or more, or set data.image_size={side}.",
        )


def derive(recipe: Recipe, dataset: DatasetSummary, resources: Resources) -> Derived:
    """The linear scaling rule applied to recipe + resources, and the step counts."""
    per_host, hosts = resources.devices_per_host, resources.hosts
    batch = scaling.global_batch(recipe.train.batch_per_gpu, per_host, hosts)
    if batch > dataset.train_count:
        raise ConfigError(
            f"global batch {batch} ({recipe.train.batch_per_gpu} x {resources.devices} devices) "
            f"exceeds the {dataset.train_count} training images",
            "lower train.batch_per_gpu, use fewer devices, or a larger dataset.",
        )
    spe = scaling.steps_per_epoch(dataset.train_count, batch, recipe.train.max_batches_per_epoch)
    sched, opt = recipe.schedule, recipe.optimizer
    if sched.warmup_steps:
        warm_epochs = scaling.warmup_epochs_from_steps(sched.warmup_steps, spe)
    else:
        warm_epochs = sched.warmup_epochs
    lr = scaling.scaled_lr(opt.lr_per_gpu, per_host, hosts)
    # what the trainer computes with, checked before anything is launched
    scaling.check_rates(opt.lr_per_gpu, lr, resources.devices, recipe.model.head_lr_mult, opt.wd)
    return Derived(
        devices=resources.devices,
        global_batch=batch,
        lr=lr,
        warmup_epochs=warm_epochs,
        warmup_steps=scaling.warmup_steps(warm_epochs, spe),
        steps_per_epoch=spe,
        total_steps=spe * sched.epochs,
    )


def hyperparameters(
    recipe: Recipe, dataset: DatasetSummary, resources: Resources, derived: Derived
) -> TrainHyperparameters:
    """The trainer's contract, every value resolved (see finetune.hparams)."""
    from finetune.train.engines.mxnet import kvstore

    m, d, o, s, t = recipe.model, recipe.data, recipe.optimizer, recipe.schedule, recipe.train
    kv = kvstore.choose(t.kvstore, resources.hosts, resources.device, resources.devices_per_host)
    return TrainHyperparameters(
        engine=recipe.engine,
        model=m.name,
        pretrained=m.pretrained,
        weights=m.weights,
        weights_sha256=m.weights_sha256,
        num_classes=dataset.num_classes,
        freeze_backbone=m.freeze_backbone,
        head_lr_mult=m.head_lr_mult,
        num_training_samples=dataset.train_count,
        image_size=d.image_size,
        augmentation=d.augmentation,
        epochs=s.epochs,
        batch_size_per_device=t.batch_per_gpu,
        devices_per_host=resources.devices_per_host,
        hosts=resources.hosts,
        global_batch_size=derived.global_batch,
        optimizer=o.name,
        lr_per_device=o.lr_per_gpu,
        lr=derived.lr,
        momentum=o.momentum,
        wd=o.wd,
        lr_schedule=s.kind,
        lr_steps=s.steps,
        lr_factor=s.factor,
        warmup_epochs=derived.warmup_epochs,
        device=resources.device,
        kvstore=kv,
        seed=t.seed,
        # top-k with k >= classes is always 100 %: report it only when it means something
        top_k=t.top_k if t.top_k < dataset.num_classes else 0,
        checkpoint_interval_s=t.checkpoint_interval_s,
        keep_checkpoints=t.keep_checkpoints,
        max_batches_per_epoch=t.max_batches_per_epoch,
        data_path=d.path,
        loader_workers=d.loader_workers,
        precision=t.precision,
        compile=t.compile,
    )
