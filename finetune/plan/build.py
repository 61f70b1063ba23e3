"""Building a Plan: the recipe (with overrides) and the dataset's manifest, checked against
each other, and the values derived for the resources (the linear scaling rule, step counts,
each engine's own settings) down to the trainer's hyperparameters."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from finetune.contracts.hparams import TrainHyperparameters
from finetune.data import manifest as mf
from finetune.data.verify import check_dataset
from finetune.engines import registry
from finetune.engines.models import check_augmentation, check_model
from finetune.errors import ConfigError, DataError, UsageError
from finetune.plan.known import counts_summary
from finetune.plan.plan import DatasetSummary, Derived, Plan, Resources
from finetune.recipes import lr_scaling
from finetune.recipes.features import hparams_fields
from finetune.recipes.loading import load_recipe, with_overrides
from finetune.recipes.schema import Recipe
from finetune.settings import dataset_path


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

    if isinstance(recipe, Recipe):
        recipe = with_overrides(recipe, overrides)
    else:
        recipe = load_recipe(recipe, overrides)
    check_model(recipe.engine, recipe.model.name)  # before the dataset is read
    registry.get(recipe.engine).check_recipe_model(
        recipe.model.name, recipe.data.image_size, recipe.optimizer.layer_decay
    )  # a model's own rules (image size, layer decay), where its engine has them
    check_augmentation(recipe.engine, recipe.data.augmentation)
    resources = resources or Resources()
    if isinstance(dataset_dir, DatasetSummary):
        dataset = dataset_dir
    else:
        dataset = _summary(recipe, dataset_dir, verify_checksums)
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


def _summary(recipe: Recipe, given: str | Path | None, verify_checksums: bool) -> DatasetSummary:
    """The prepared dataset's summary; for a known dataset (finetune.plan.known) that is not
    prepared yet, its published counts (``counts_only``: enough to plan, not to train)."""

    directory = _dataset_dir(recipe, given)
    if not (directory / mf.MANIFEST).is_file():
        name = str(given if given is not None else recipe.data.dataset)
        known = counts_summary(name, str(directory))
        if known is not None:
            return known
    return summarize_dataset(directory, verify_checksums)


def _dataset_dir(recipe: Recipe, given: str | Path | None) -> Path:

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

    m = mf.load(directory)
    check_dataset(directory, m, verify_checksums)
    if m.num_classes < 2 or "train" not in m.splits or m.splits["train"].count < 1:
        raise DataError(
            f"dataset {directory} has {m.num_classes} class(es) and no usable training split",
            "prepare a dataset with at least two classes and some training images.",
        )
    sha = mf.sha256_file(Path(directory) / mf.MANIFEST)
    return DatasetSummary.from_manifest(m, str(Path(directory).resolve()), sha)


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
    batch = lr_scaling.global_batch(recipe.train.batch_per_device, per_host, hosts)
    if batch > dataset.train_count:
        raise ConfigError(
            f"global batch {batch} ({recipe.train.batch_per_device} x {resources.devices} devices) "
            f"exceeds the {dataset.train_count} training images",
            "lower train.batch_per_device, use fewer devices, or a larger dataset.",
        )
    spe = lr_scaling.steps_per_epoch(dataset.train_count, batch, recipe.train.max_batches_per_epoch)
    sched, opt = recipe.schedule, recipe.optimizer
    if sched.warmup_steps:
        warm_epochs = lr_scaling.warmup_epochs_from_steps(sched.warmup_steps, spe)
    else:
        warm_epochs = sched.warmup_epochs
    lr = lr_scaling.scaled_lr(opt.lr_per_device, per_host, hosts)
    # what the trainer computes with, checked before anything is launched
    lr_scaling.check_rates(
        opt.lr_per_device, lr, resources.devices, recipe.model.head_lr_mult, opt.wd
    )
    return Derived(
        devices=resources.devices,
        global_batch=batch,
        lr=lr,
        warmup_epochs=warm_epochs,
        warmup_steps=lr_scaling.warmup_steps(warm_epochs, spe),
        steps_per_epoch=spe,
        total_steps=spe * sched.epochs,
    )


def hyperparameters(
    recipe: Recipe, dataset: DatasetSummary, resources: Resources, derived: Derived
) -> TrainHyperparameters:
    """The trainer's contract, every value resolved (see finetune.contracts.hparams)."""
    m, d, o, s, t = recipe.model, recipe.data, recipe.optimizer, recipe.schedule, recipe.train
    engine = registry.get(recipe.engine)
    return TrainHyperparameters(
        options=engine.plan_options(recipe, resources),  # the engine's own settings
        model=m.name,
        pretrained=m.pretrained,
        weights=m.weights,
        weights_sha256=m.weights_sha256,
        num_classes=dataset.num_classes,
        freeze_backbone=m.freeze_backbone,
        head_lr_mult=m.head_lr_mult,
        num_training_samples=dataset.train_count,
        dataset_manifest_sha256=dataset.manifest_sha256,
        image_size=d.image_size,
        augmentation=d.augmentation,
        epochs=s.epochs,
        batch_per_device=t.batch_per_device,
        devices_per_host=resources.devices_per_host,
        hosts=resources.hosts,
        global_batch=derived.global_batch,
        optimizer=o.name,
        lr_per_device=o.lr_per_device,
        lr=derived.lr,
        momentum=o.momentum,
        wd=o.wd,
        lr_schedule=s.kind,
        lr_steps=s.steps,
        lr_factor=s.factor,
        # as the recipe gave it (Derived has both, for the plan): the trainer converts once,
        # with the steps per epoch it finds
        warmup_epochs=s.warmup_epochs,
        warmup_steps=s.warmup_steps,
        device=resources.device,
        seed=t.seed,
        # top-k with k >= classes is always 100 %: report it only when it means something
        top_k=t.top_k if t.top_k < dataset.num_classes else 0,
        checkpoint_interval_s=checkpoint_interval(t, resources),
        keep_checkpoints=t.keep_checkpoints,
        max_batches_per_epoch=t.max_batches_per_epoch,
        precision=t.precision,
        metric_loggers=recipe.metric_logging.loggers,
        mlflow_tracking_uri=recipe.metric_logging.mlflow_tracking_uri,
        mlflow_experiment=recipe.metric_logging.mlflow_experiment or recipe.name,
        **_preprocessing(recipe),
        **hparams_fields(recipe, dataset.num_classes),
    )


def _preprocessing(recipe: Recipe) -> dict:
    """The evaluation transform (resize ratio, interpolation, mean/std) the engine's
    descriptor gives the model: the weights' own where it has a model table."""

    return registry.get(recipe.engine).preprocessing(recipe.model.name, recipe.data.image_size)


def checkpoint_interval(train, resources: Resources) -> float:
    """The recipe's train.checkpoint_interval_s, capped at the backend's longest for these
    resources (Resources.checkpoint_max_s)."""
    if resources.checkpoint_max_s is None:
        return train.checkpoint_interval_s
    return min(train.checkpoint_interval_s, resources.checkpoint_max_s)
