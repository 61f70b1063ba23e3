"""The contract between `launch` and the trainer: SageMaker-style string hyperparameters.

`launch` builds a :class:`TrainHyperparameters` from recipe + manifest + resources (the Plan)
and writes ``to_strings()`` into hyperparameters.json (SageMaker carries a map<string,string>,
at most 100 entries, values at most 2,500 characters). The trainer reads them back with
``from_strings()``. Derived values (global batch, scaled learning rate, warmup) travel too, so
a run can be reproduced from its record alone. Pure data: no heavy imports.

Each engine's own settings (kvstore, data path...) are its options model (``options``: a
union discriminated on the engine, finetune.engines); on the wire they sit flat beside the
shared ones, as they always did, so old maps and hand-written ones keep reading. Names renamed
since are still read (RENAMED).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from finetune.engines import registry
from finetune.engines.descriptor import Engine, EngineOptions
from finetune.engines.models import check_model
from finetune.errors import ConfigError, did_you_mean

# training presets of the preprocessing contract (finetune.train.preprocess)
Augmentation = Literal[
    "none", "crop", "crop_color", "crop_color_transform", "resized_crop", "resized_crop_color"
]


def _known_engine(name: str) -> str:
    if name not in registry.ENGINES:
        hint = did_you_mean(name, registry.NAMES)
        raise ValueError(f'unknown engine "{name}".{hint} Use one of: {", ".join(registry.NAMES)}')
    return name


# an engine's name, as a recipe or a plan gives it (the registry holds the one list)
EngineName = Annotated[str, AfterValidator(_known_engine)]
# The longest published image-classification schedules train about 1,600 epochs (MAE's
# pre-training); ten thousand is well past any fine-tune, and refuses a typo's years of
# plan (an epoch count of 1e11 priced as a launchable run).
MAX_EPOCHS = 10_000
# an epoch of the schedule (a step's decay, a warmup): a number, never NaN or infinite
EpochPoint = Annotated[float, Field(allow_inf_nan=False)]

if TYPE_CHECKING:
    AnyEngineOptions = EngineOptions
else:  # every engine's options model, told apart by its ``engine`` literal
    AnyEngineOptions = Annotated[
        Union[tuple(e.options for e in registry.all_engines())],  # noqa: UP007
        Field(discriminator="engine"),
    ]
# the settings of every engine's options, by name (a map names them flat)
OPTION_FIELDS = frozenset(f for e in registry.all_engines() for f in e.options.model_fields)
# the optional metric loggers (finetune.train.metriclog): the one list of their names
MetricLoggerName = Literal["tensorboard", "mlflow"]
METRIC_LOGGERS: tuple[MetricLoggerName, ...] = get_args(MetricLoggerName)
# old hyperparameter name -> its name now; accepted on reading, never written
RENAMED = {"batch_size_per_device": "batch_per_device", "global_batch_size": "global_batch"}


# the hyperparameters of the torch engine's recipe features (off by default)
FEATURES = ("auto_augment", "rand_augment_ops", "rand_augment_magnitude", "random_erasing",
            "mixup_alpha", "cutmix_alpha", "mix_prob", "mix_switch_prob", "label_smoothing",
            "class_weights", "ema_decay", "ema_warmup_steps", "ema_evaluate", "betas",
            "layer_decay", "clip_grad_norm", "wd_norm_bias")  # fmt: skip


class TrainHyperparameters(BaseModel):
    """Everything the trainer needs, already resolved (no recipe lookups at train time)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    options: AnyEngineOptions  # the engine and its own settings
    # model: a name the engine builds (finetune.engines.models); left out, the engine's
    # default where it has one (_engine_defaults), else the contract is refused
    model: str
    pretrained: bool = True
    # "" = search the pretrained channel, then $MXNET_HOME/models; a file path; or
    # "download" to allow fetching from the model zoo (checksummed)
    weights: str = ""
    weights_sha256: str = ""  # the weight file's full sha256, checked when given
    num_classes: int = Field(gt=1)
    freeze_backbone: bool = False
    head_lr_mult: float = Field(1.0, gt=0, allow_inf_nan=False)
    # data
    # sha256 of the dataset's manifest.json as `launch` planned it ("" = not checked): the
    # trainer checks the channel's manifest against it, then every record file against the
    # manifest -- a dataset in S3 may have been rewritten since by anyone who can write there
    dataset_manifest_sha256: str = Field("", pattern=r"^([0-9a-f]{64})?$")
    num_training_samples: int = Field(gt=0)
    image_size: int = Field(224, ge=16)
    augmentation: Augmentation = "crop"
    # 0-255 units; left out, the engine's own for the model (_engine_defaults)
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    # the weights' own evaluation transform (finetune.engines.backbones, filled in at
    # plan time): the shorter side both splits are resized to (0: image_size / 0.875) and
    # the resampling filter of that resize
    resize_shorter: int = Field(0, ge=0)
    interpolation: Literal["bilinear", "bicubic"] = "bilinear"
    # optimisation, already scaled by the linear scaling rule
    epochs: int = Field(gt=0, le=MAX_EPOCHS)
    batch_per_device: int = Field(gt=0)
    devices_per_host: int = Field(1, gt=0)
    hosts: int = Field(1, gt=0)
    global_batch: int = Field(gt=0)
    optimizer: Literal["sgd", "nag", "adam", "adamw"] = "sgd"
    lr_per_device: float = Field(gt=0, allow_inf_nan=False)
    lr: float = Field(gt=0, allow_inf_nan=False)  # = lr_per_device x devices_per_host x hosts
    momentum: float = Field(0.9, ge=0, lt=1)
    wd: float = Field(1e-4, ge=0, allow_inf_nan=False)
    lr_schedule: Literal["constant", "step", "cosine"] = "step"
    lr_steps: tuple[EpochPoint, ...] = ()  # epochs where the step schedule multiplies by lr_factor
    lr_factor: float = Field(0.1, gt=0, le=1)
    # the warmup in the unit the recipe gave it (one of the two, 0 = none): steps stay steps
    # when the trainer finds other devices than planned (a rescale changes steps per epoch)
    warmup_epochs: float = Field(0.0, ge=0, allow_inf_nan=False)
    warmup_steps: int = Field(0, ge=0)
    # execution
    device: Literal["auto", "gpu", "cpu"] = "auto"
    seed: int = 0
    top_k: int = Field(5, ge=0)  # also report top-k accuracy (0: off)
    checkpoint_interval_s: float = Field(600.0, gt=0)
    keep_checkpoints: int = Field(2, ge=1)  # newest checkpoints kept (and the best one)
    warmup_batches: int = Field(5, ge=0)  # batches excluded from samples/s
    max_batches_per_epoch: int = Field(0, ge=0)  # 0: all; >0 for smoke runs and benchmarks
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 or fp16 on GPUs
    # copies of the metrics where people watch training (finetune.train.metriclog); the
    # tracking URI "" is a SQLite store in the run's output folder
    metric_loggers: tuple[MetricLoggerName, ...] = ()
    mlflow_tracking_uri: str = ""
    mlflow_experiment: str = ""
    # euros per hour of all the run's instances at the planned price (the estimate's, from
    # finetune.estimate.money); 0 on this machine. The loggers' "euros so far".
    eur_per_hour: float = Field(0.0, ge=0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: object) -> object:
        """A map as stored or sent (flat, or nested as model_dump writes it): old names read
        as the new ones, the engine's defaults filled in, and ``engine`` with that engine's
        settings gathered into ``options``."""
        if not isinstance(data, dict):
            return data
        data = renamed(data)
        nested = data.get("options")
        name = nested.get("engine") if isinstance(nested, dict) else getattr(nested, "engine", None)
        engine = registry.get(str(name or data.get("engine", registry.DEFAULT)))
        data = _engine_defaults(engine, data)
        if nested is not None:
            return data
        # another engine's settings, which older maps carry for every run, are dropped
        own = engine.options.model_fields
        out = {k: v for k, v in data.items() if k not in OPTION_FIELDS}
        out["options"] = {k: v for k, v in data.items() if k in own} | {"engine": engine.name}
        return out

    @property
    def engine(self) -> str:
        """The engine that trains this run (its options' discriminator)."""
        return self.options.engine

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Stored and sent flat, as before the options had a model of their own: a stored
        plan's JSON and hyperparameters.json keep their shape."""
        data = handler(self)
        options = data.pop("options")
        return {"engine": options.pop("engine"), **data, **options}

    # torch engine, the recipe features (finetune.recipes.features; each default is "off")
    auto_augment: Literal["none", "trivial_augment_wide", "rand_augment"] = "none"
    rand_augment_ops: int = Field(2, ge=1)
    rand_augment_magnitude: int = Field(9, ge=0, le=30)
    random_erasing: float = Field(0.0, ge=0, le=1)
    mixup_alpha: float = Field(0.0, ge=0)
    cutmix_alpha: float = Field(0.0, ge=0)
    mix_prob: float = Field(1.0, ge=0, le=1)
    mix_switch_prob: float = Field(0.5, ge=0, le=1)
    label_smoothing: float = Field(0.0, ge=0, lt=1)
    class_weights: Literal["none", "balanced"] | tuple[float, ...] = "none"
    ema_decay: float = Field(0.0, ge=0, lt=1)  # 0: no average of the weights
    ema_warmup_steps: int = Field(0, ge=0)
    ema_evaluate: bool = True  # validation, best, test and the artifact use the average
    betas: tuple[float, float] = (0.9, 0.999)  # adam, adamw
    layer_decay: float = Field(1.0, gt=0, le=1)  # layer-wise rate decay (1: off)
    clip_grad_norm: float = Field(0.0, ge=0)  # 0: no clipping
    wd_norm_bias: bool = True  # weight decay on norm layers and biases too

    @model_validator(mode="after")
    def _one_warmup_unit(self) -> TrainHyperparameters:
        if self.warmup_epochs and self.warmup_steps:
            raise ValueError("give warmup_epochs or warmup_steps, not both")
        return self

    @model_validator(mode="after")
    def _features_need_torch(self) -> TrainHyperparameters:
        if not registry.get(self.engine).features:
            on = [k for k in FEATURES if getattr(self, k) != type(self).model_fields[k].default]
            if on or self.optimizer == "adamw":
                raise ValueError(
                    f"{', '.join(on or ['optimizer=adamw'])} need the {registry.with_features()} "
                    f"engine (the {self.engine} engine does not implement them)"
                )
        return self

    def to_strings(self) -> dict[str, str]:
        """The SageMaker hyperparameters map: every value a string (JSON for non-strings),
        the engine's options flat beside the shared values (as model_dump writes them)."""
        values = self.model_dump(mode="json")
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}

    @classmethod
    def names(cls) -> set[str]:
        """Every name a map may hold: the shared fields and every engine's settings."""
        return (set(cls.model_fields) - {"options"}) | OPTION_FIELDS

    @classmethod
    def from_strings(cls, raw: dict[str, str]) -> TrainHyperparameters:
        """Parse the map written by ``to_strings`` (or by hand: plain numbers and words work)."""
        raw = renamed(raw)
        unknown = sorted(set(raw) - cls.names())
        if unknown:
            hint = did_you_mean(unknown[0], sorted(cls.names()))
            raise ConfigError(
                f"unknown hyperparameter(s): {', '.join(unknown)}.{hint}",
                "remove them; the accepted names are the fields of TrainHyperparameters "
                "and of its engine's options.",
            )
        values = {k: _decode(v) for k, v in raw.items()}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            # an engine's setting is at ("options", ENGINE, NAME): the map names it flat
            loc = first["loc"][2:] if first["loc"][:1] == ("options",) else first["loc"]
            where = ".".join(str(p) for p in loc)
            got = f" (got {raw.get(str(loc[0]))!r})" if loc else ""
            raise ConfigError(
                f"hyperparameter {where or 'set'}: {first['msg']}{got}",
                "fix the recipe or the override that produced it.",
            ) from None


def _engine_defaults(engine: Engine, data: dict[str, Any]) -> dict[str, Any]:
    """The fields a map leaves out that its engine fills: the MXNet engine's model (a map
    written before the torch engine is MXNet's), the model's own mean/std. Never another
    engine's: a torch map without a model is refused rather than given a GluonCV name."""
    out = dict(data)
    if "model" not in out:
        if not engine.default_model:
            raise ValueError(f"the {engine.name} engine needs a model (it has no default)")
        out["model"] = engine.default_model
    if "mean" not in out or "std" not in out:
        given = engine.model_preprocessing(str(out["model"]))
        if not given:  # a model the engine does not build: its ConfigError says why
            check_model(engine.name, str(out["model"]))
        out = {**{k: v for k, v in given.items() if k in ("mean", "std")}, **out}
    return out


def renamed(values: dict) -> dict:
    """``values`` with the names in RENAMED under their new names (where the new one is absent)."""
    out = dict(values)
    for old, new in RENAMED.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def _decode(value: str):
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # a bare word such as resnet50_v1
