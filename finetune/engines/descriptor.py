"""What one training engine is, as plain data (its spec): the frameworks it imports, the
models it builds, its preprocessing, the framework build AWS runs it with, its per-epoch
decoder, its own settings (``options``, with the hook that fills them for a plan) and where
its runtime lives. Each engine's spec module (finetune.engines.mxnet, finetune.engines.torch)
declares one; callers ask it a question instead of comparing engine names. Light: no engine
library is imported here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

OptionsT = TypeVar("OptionsT", bound="EngineOptions")


class EngineOptions(BaseModel):
    """An engine's own settings in the trainer's contract; each engine subclasses it with
    ``engine: Literal["<its name>"]`` (the union's discriminator) and its fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str

    @classmethod
    def of(cls: type[OptionsT], hparams: Any) -> OptionsT:
        """``hparams.options`` as this engine's model (TypeError for another engine's)."""
        options = hparams.options
        if not isinstance(options, cls):
            raise TypeError(f"{cls.__name__} asked of a {options.engine} engine's settings")
        return options


class PlanResources(Protocol):
    """What an engine's plan hook reads of a plan's resources (finetune.plan.Resources)."""

    @property
    def hosts(self) -> int: ...

    @property
    def device(self) -> str: ...

    @property
    def devices_per_host(self) -> int: ...


class ModelRules(Protocol):
    """Per-model rules of an engine whose models differ (the torch engine's table)."""

    def known(self) -> str:
        """Every model name, as a hint lists them."""

    def builds(self, model: str) -> bool:
        """Whether ``model`` is one of its names beyond its fixed list (a zoo's, by form)."""

    def check(self, model: str, image_size: int, layer_decay: float) -> None:
        """ConfigError for what ``model`` cannot take (an image size, layer-wise decay)."""

    def preprocessing(self, model: str, image_size: int) -> dict[str, Any]:
        """The weights' own evaluation transform at ``image_size``."""

    def mean_std(self, model: str) -> dict[str, Any]:
        """{"mean", "std"} of ``model``'s weights ({} for an unknown model)."""


# (recipe, resources) -> the engine's options for that plan; the recipe is a
# finetune.recipes.schema.Recipe (typed loosely: recipes sit above the engines)
PlanHook = Callable[[Any, PlanResources], EngineOptions]


@dataclass(frozen=True)
class EngineBuild:
    """One engine as AWS runs it: framework build and the compute capabilities it supports."""

    engine: str
    framework: str  # the framework and version of the build
    version: str  # its version, as the image and AMI lookups take it
    min_capability: float
    below: float | None  # the first compute capability it cannot run on (None: no limit)
    kernels: str  # what the build was compiled for, said plainly
    prerequisite: str  # what the user must do before a cloud launch ("" for nothing)

    def runs_on(self, compute_capability: str | float) -> bool:
        cc = float(compute_capability)
        return cc >= self.min_capability and (self.below is None or cc < self.below)

    @property
    def minor(self) -> str:
        """'2.10' of '2.10.0': the version as AWS's machine-image names carry it."""
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class AwsFramework:
    """AWS's own environment for an engine's framework: its prebuilt training images (looked
    up by framework name and Python tag) and its Deep Learning AMI (found by the name's
    framework word; the framework's interpreter on it). An engine without one runs in our
    image, built from the Dockerfile (`finetune image push`)."""

    image_framework: str  # the framework name of AWS's training images ("pytorch")
    image_python: str  # the Python tag of the pinned build's image ("py313")
    ami_slug: str  # the framework in the AMI's public parameter name ("pytorch")
    ami_title: str  # the framework in the AMI's name ("PyTorch")
    python: str  # the interpreter that runs our wheel on that AMI
    title: str  # what the plan says runs it


@dataclass(frozen=True)
class Engine:
    """One training engine. Callers ask for a capability (``aws``, ``features``,
    ``fixed_precision``...), never for a name."""

    name: str
    frameworks: tuple[str, ...]  # import names the engine needs where it trains
    models: tuple[str, ...]  # every model name it builds
    builds: str  # those models, said plainly (in errors)
    augmentations: tuple[str, ...]  # the training presets it implements
    build: EngineBuild
    aws: AwsFramework | None  # None: it runs in our image (the Dockerfile's)
    decoder: str  # the per-epoch decoding pipeline (estimate/perf data: decoders.csv)
    resident: bool  # keeps decoded images on the device when they fit (no per-epoch decoder)
    fixed_precision: str  # the one precision it trains at ("": the recipe's, resolved per GPU)
    features: bool  # implements the recipe features (finetune.recipes.features) and adamw
    resnet: str  # its name of the ResNet v1.5 of depth {depth}
    loop: str  # its training loop, as the performance model's basis names it
    runtime: str  # "module:attribute" of its EngineRuntime (finetune.contracts.engine)
    options: type[EngineOptions]  # its own settings in the trainer's contract
    plan_options: PlanHook  # fills ``options`` for a recipe on a plan's resources
    weights_file: str  # the file of its model folder that holds the trained weights
    smoke_recipe: str  # its built-in smoke recipe (the demo's)
    default_model: str = ""  # a contract without a model: this one ("": the model is required)
    # preprocessing, 0-255 units: fixed for every model, or None: each model's own (rules)
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    rules: ModelRules | None = None  # per-model rules, where its models differ

    @property
    def needs_our_image(self) -> bool:
        """True when no AWS environment runs its framework: clouds run our image."""
        return self.aws is None

    def builds_model(self, model: str) -> bool:
        """Whether it builds ``model``: one of ``models``, or a name its rules take."""
        return model in self.models or bool(self.rules and self.rules.builds(model))

    def listed(self) -> str:
        """Its models as a hint lists them."""
        return self.rules.known() if self.rules else ", ".join(self.models)

    def check_recipe_model(self, model: str, image_size: int, layer_decay: float) -> None:
        """ConfigError for a model's own rules (image size, layer decay) where it has them."""
        if self.rules:
            self.rules.check(model, image_size, layer_decay)

    def preprocessing(self, model: str, image_size: int) -> dict[str, Any]:
        """The contract's evaluation transform for ``model``: the weights' own (resize ratio,
        interpolation, mean/std) where the engine has per-model rules, else its fixed mean/std
        (shorter side image_size / 0.875, bilinear: the contract's defaults)."""
        if self.rules:
            return self.rules.preprocessing(model, image_size)
        return {"mean": self.mean, "std": self.std}

    def model_preprocessing(self, model: str) -> dict[str, Any]:
        """mean/std for ``model`` when a contract leaves them out: the engine's fixed values,
        or the model's own (an unknown model: {} -- the model check explains it)."""
        return self.rules.mean_std(model) if self.rules else {"mean": self.mean, "std": self.std}
