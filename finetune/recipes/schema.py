"""The Recipe: what to train and how, as data. Validated before anything runs or costs money.

Every section is frozen and rejects unknown keys, so a typo (``epoch:`` for ``epochs:``) fails
at load time with a did-you-mean instead of being silently ignored. Per-device values
(``batch_per_device``, ``lr_per_device``) are what a recipe states; the totals follow from the
linear scaling rule once the resources are known (see ``finetune.recipes.lr_scaling``). Keys
renamed since (``*_per_gpu``) are still read: see ``finetune.recipes.renamed``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from finetune.contracts.hparams import (
    MAX_EPOCHS,
    Augmentation,
    EngineName,
    EpochPoint,
    MetricLoggerName,
)
from finetune.engines import registry
from finetune.errors import ConfigError, did_you_mean
from finetune.recipes.features import AugmentSection, EmaSection, LossSection, torch_only_keys
from finetune.recipes.renamed import renamed_in_section

Kvstore = Literal["device", "nccl", "local", "dist_sync", "dist_device_sync"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelSection(_Section):
    """The network and where its starting weights come from."""

    name: str = Field(min_length=1)  # GluonCV model-zoo name, or "imagenet11k-resnet-152"
    pretrained: bool = True
    weights: str = ""  # file name or path of pretrained weights; "" = the engine's cache
    weights_sha256: str = Field("", pattern=r"^([0-9a-fA-F]{64})?$")  # checked if given
    freeze_backbone: bool = False
    head_lr_mult: float = Field(1.0, gt=0, allow_inf_nan=False)


class DataSection(_Section):
    """Input pipeline settings, and the dataset a recipe is meant for (a default only)."""

    dataset: str | None = None  # name under the data dir or a path; --dataset wins
    image_size: int = Field(224, ge=16)
    augmentation: Augmentation = "crop"
    # torch: decoded images kept on the device (resident), decoded each epoch (stream), or
    # chosen by size (auto)
    path: Literal["auto", "resident", "stream"] = "auto"
    loader_workers: int = Field(-1, ge=-1)  # stream: worker processes (-1: one per core)


class OptimizerSection(_Section):
    """The optimizer, with the learning rate of ONE device (scaled later by the device count)."""

    name: Literal["sgd", "nag", "adam", "adamw"] = "sgd"
    lr_per_device: float = Field(gt=0, allow_inf_nan=False)
    momentum: float = Field(0.9, ge=0, lt=1)
    wd: float = Field(1e-4, ge=0, allow_inf_nan=False)
    # torch engine (finetune.recipes.features): Adam/AdamW betas, layer-wise rate decay
    # (1: off), the gradients' largest norm (0: off), weight decay on norm layers and biases
    # (None: not for adamw, as timm; for the others, as before)
    betas: tuple[float, float] = (0.9, 0.999)
    layer_decay: float = Field(1.0, gt=0, le=1)
    clip_grad_norm: float = Field(0.0, ge=0, allow_inf_nan=False)
    decay_norm_bias: bool | None = None

    @field_validator("betas")
    @classmethod
    def _betas(cls, betas: tuple[float, float]) -> tuple[float, float]:
        if not all(0 <= b < 1 for b in betas):
            raise ValueError("betas must lie in [0, 1)")
        return betas


class ScheduleSection(_Section):
    """Epochs, learning-rate decay and gradual warmup (in epochs OR in steps, not both)."""

    epochs: int = Field(gt=0, le=MAX_EPOCHS)
    kind: Literal["constant", "step", "cosine"] = "step"
    steps: tuple[EpochPoint, ...] = ()  # epochs at which a step schedule multiplies lr by factor
    factor: float = Field(0.1, gt=0, le=1)
    warmup_epochs: float = Field(0.0, ge=0, allow_inf_nan=False)
    warmup_steps: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> ScheduleSection:
        if self.warmup_epochs and self.warmup_steps:
            raise ValueError("give warmup_epochs or warmup_steps, not both")
        if list(self.steps) != sorted(set(self.steps)) or any(s <= 0 for s in self.steps):
            raise ValueError(f"steps must be increasing positive epochs, got {list(self.steps)}")
        late = [s for s in self.steps if s >= self.epochs]
        if late and self.kind == "step":  # other kinds never use the steps
            keep = [f"{s:g}" for s in self.steps if s < self.epochs]
            raise ValueError(
                f"step(s) at epoch {', '.join(f'{s:g}' for s in late)} not before "
                f"epochs={self.epochs}: set schedule.steps=[{', '.join(keep)}] (or "
                "schedule.kind=constant), or more epochs"
            )
        if self.warmup_epochs >= self.epochs:
            raise ValueError(f"warmup_epochs={self.warmup_epochs} must be below {self.epochs}")
        return self


class TrainSection(_Section):
    """Execution: batch of ONE device, seed, evaluation and checkpointing, gradient exchange."""

    batch_per_device: int = Field(gt=0)
    seed: int = 0
    top_k: int = Field(5, ge=0)  # also report top-k accuracy (0: off)
    checkpoint_interval_s: float = Field(600.0, gt=0, allow_inf_nan=False)
    keep_checkpoints: int = Field(2, ge=1)  # newest kept on disk (the best one is kept too)
    # None: chosen from the resources (finetune.train.engines.mxnet.kvstore)
    kvstore: Kvstore | None = None
    max_batches_per_epoch: int = Field(0, ge=0)  # 0: all; >0 for smoke runs
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # torch: auto picks per GPU
    compile: bool = False  # torch: torch.compile the network


class MetricLoggingSection(_Section):
    """Copies of the metrics where people watch training (finetune.train.metriclog): none by
    default; the JSON-lines metrics and the ledger stay the record."""

    loggers: tuple[MetricLoggerName, ...] = ()  # tensorboard, mlflow
    mlflow_tracking_uri: str = ""  # "": SQLite in the run's output folder; any MLflow URI
    mlflow_experiment: str = ""  # "": the recipe's name

    @model_validator(mode="after")
    def _once(self) -> MetricLoggingSection:
        if len(set(self.loggers)) != len(self.loggers):
            raise ValueError(f"loggers names one twice: {list(self.loggers)}")
        return self


class Recipe(_Section):
    """A complete, validated recipe. Build it with ``finetune.recipes.loading.load_recipe``."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    engine: EngineName = registry.DEFAULT  # which training engine runs it (finetune.train.engines)
    model: ModelSection
    data: DataSection = DataSection()
    optimizer: OptimizerSection
    schedule: ScheduleSection
    train: TrainSection
    metric_logging: MetricLoggingSection = MetricLoggingSection()

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: object) -> object:
        """Recipes stored by older versions (with a run's plan) say ``*_per_gpu``: read them
        under the new names (files and overrides are upgraded, with a note, when loaded)."""
        if not isinstance(data, dict):
            return data
        return {k: renamed_in_section(k, v) for k, v in data.items()}

    # torch engine only (finetune.recipes.features)
    augment: AugmentSection = AugmentSection()
    loss: LossSection = LossSection()
    ema: EmaSection = EmaSection()

    @model_validator(mode="after")
    def _engine_has_features(self) -> Recipe:
        keys = [] if registry.get(self.engine).features else torch_only_keys(self)
        if keys:
            have = registry.with_features()
            raise ValueError(
                f"the {self.engine} engine does not implement {', '.join(keys)} (the {have} "
                f"engine's recipe features): set engine: {have}, or remove them"
            )
        return self


def field_paths(cls: type[BaseModel] = Recipe, prefix: str = "") -> list[str]:
    """Every settable dotted path of a model, leaves only: ``['name', 'model.name', ...]``."""
    paths = []
    for name, field in cls.model_fields.items():
        sub = section_type(field.annotation)
        if sub is not None:
            paths.extend(field_paths(sub, f"{prefix}{name}."))
        else:
            paths.append(prefix + name)
    return paths


def section_type(annotation) -> type[BaseModel] | None:
    """The section model behind a field annotation, or None for a plain value."""
    # Annotations are strings under `from __future__ import annotations`; pydantic resolves
    # them into real types on model_fields, so a plain issubclass check is enough.
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def validate_recipe(data: object, source: str) -> Recipe:
    """Validate a parsed mapping into a Recipe, or raise a ConfigError naming every bad key."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a recipe must be a mapping of sections, got {type(data).__name__}",
            "start from `finetune recipes show caltech256-resnet50` and edit it.",
        )
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        raise explain(exc, source) from None


def explain(exc: ValidationError, source: str) -> ConfigError:
    """One line per problem: the dotted key, what is wrong, the allowed values, a did-you-mean."""
    lines = [_explain_one(err) for err in exc.errors()]
    head = f"{source}: invalid recipe ({len(lines)} problem{'s' if len(lines) > 1 else ''})"
    return ConfigError(
        "\n  ".join([head, *lines]),
        "correct the keys named above (`finetune recipes show NAME` prints a valid recipe).",
    )


def _explain_one(err) -> str:
    key = ".".join(str(p) for p in err["loc"]) or "(recipe)"
    if err["type"] == "extra_forbidden":
        choices = [*field_paths(), *Recipe.model_fields]  # sections too: "optimiser:"
        return f"{key}: unknown key.{did_you_mean(key, choices)}"
    if err["type"] == "missing":
        return f"{key}: required key is missing"
    got = err.get("input")
    msg = err["msg"].removeprefix("Value error, ")
    line = f"{key}: {msg} (got {got!r})" if not isinstance(got, dict) else f"{key}: {msg}"
    expected = (err.get("ctx") or {}).get("expected")
    if not (expected and isinstance(got, str)):
        return line
    hint = did_you_mean(got, re.findall(r"'([^']*)'", str(expected)))
    return f"{line}.{hint}" if hint else line
