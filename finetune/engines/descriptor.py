"""What one training engine is, as plain data: the frameworks it imports, the models it
builds, its preprocessing, the framework build AWS runs it with (and the GPUs that build has
kernels for), whether AWS keeps an environment of its own for that framework, its per-epoch
decoder, and where its ``fit`` lives. The registry (finetune.engines.registry) holds one
per engine; every module outside finetune/train/engines/ asks a descriptor a question instead
of comparing engine names. No engine library is imported here."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from finetune.errors import require_module


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
    model_table: bool  # its models have per-model rules (finetune.engines.backbones)
    resnet: str  # its name of the ResNet v1.5 of depth {depth}
    loop: str  # its training loop, as the performance model's basis names it
    fit_path: str  # "module:function" of its fit, imported only when a job runs
    fit_checks: tuple[str, ...]  # frameworks checked before its fit module is imported
    weights_file: str  # the file of its model folder that holds the trained weights
    smoke_recipe: str  # its built-in smoke recipe (the demo's)
    export_needs: tuple[str, ...] = ()  # extra modules its model export imports
    default_model: str = ""  # a contract without a model: this one ("": the model is required)
    # preprocessing, 0-255 units: fixed for every model, or None: each model's own (model_table)
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None

    @property
    def needs_our_image(self) -> bool:
        """True when no AWS environment runs its framework: clouds run our image."""
        return self.aws is None

    def fit(self):
        """Its ``fit(job, stop)``, imported now (engines are heavy and optional)."""
        for module in self.fit_checks:
            require_module(module)
        module, _, func = self.fit_path.partition(":")
        return getattr(importlib.import_module(module), func)

    def module(self, name: str):
        """``finetune.train.engines.<engine>.<name>``, its frameworks checked first."""
        for module in self.frameworks:
            require_module(module)
        return importlib.import_module(f"finetune.train.engines.{self.name}.{name}")

    def listed(self) -> str:
        """Its models as a hint lists them."""
        if self.model_table:
            from finetune.engines import backbones

            return backbones.known()
        return ", ".join(self.models)

    def check_recipe_model(self, model: str, image_size: int, layer_decay: float) -> None:
        """ConfigError for a model's own rules (image size, layer decay) where it has them."""
        if self.model_table:
            from finetune.engines.backbones import check_image_size, check_layer_decay

            check_image_size(model, image_size)
            check_layer_decay(model, layer_decay)

    def preprocessing(self, model: str, image_size: int) -> dict[str, Any]:
        """The contract's evaluation transform for ``model``: the weights' own (resize ratio,
        interpolation, mean/std) where the engine has a model table, else its fixed mean/std
        (shorter side image_size / 0.875, bilinear: the contract's defaults)."""
        if self.model_table:
            from finetune.engines.backbones import preprocessing

            return preprocessing(model, image_size)
        return {"mean": self.mean, "std": self.std}

    def model_preprocessing(self, model: str) -> dict[str, Any]:
        """mean/std for ``model`` when a contract leaves them out: the engine's fixed values,
        or the model's own row (an unknown model: {} -- the model check explains it)."""
        if not self.model_table:
            return {"mean": self.mean, "std": self.std}
        from finetune.engines import backbones

        row = backbones.TABLE.get(model)
        return {"mean": row.mean, "std": row.std} if row else {}
