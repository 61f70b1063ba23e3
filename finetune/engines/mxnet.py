"""The MXNet 1.9.1 + GluonCV engine's spec: the studies' engine. Its runtime is
finetune.train.engines.mxnet; nothing here imports MXNet."""

from __future__ import annotations

from typing import Any, Literal

from finetune.engines import backbones
from finetune.engines.descriptor import (
    Engine,
    EngineBuild,
    EngineOptions,
    PlanResources,
)
from finetune.errors import ConfigError

# local: sums on the CPU; device: on the GPUs; nccl: NCCL between GPUs of one host;
# dist_sync / dist_device_sync: several hosts through the parameter server
Kvstore = Literal["device", "nccl", "local", "dist_sync", "dist_device_sync"]

_DEPTHS = {
    "_v1": (18, 34, 50, 101, 152),
    "_v2": (18, 34, 50, 101, 152),
    "_v1b": (18, 34, 50, 101, 152),
    "_v1c": (50, 101, 152),
    "_v1d": (50, 101, 152),
}
SYMBOL_MODELS = {"imagenet11k-resnet-152": "resnet-152"}  # name -> checkpoint prefix


class MxnetOptions(EngineOptions):
    """The MXNet engine's own settings: its gradient exchange (kvstore)."""

    engine: Literal["mxnet"] = "mxnet"
    kvstore: Kvstore = "device"


def choose_kvstore(requested: str | None, hosts: int, device: str, devices_per_host: int) -> str:
    """The kvstore for ``hosts`` hosts of ``devices_per_host`` devices of kind ``device``
    (gpu, cpu or auto): ``requested`` when given (ConfigError when it cannot span the
    hosts), else distributed across hosts and on-device within one host of several GPUs."""
    if requested is None:
        if hosts > 1:
            return "dist_device_sync" if device == "gpu" else "dist_sync"
        return "device" if device == "gpu" and devices_per_host > 1 else "local"
    if hosts > 1 and not requested.startswith("dist"):
        raise ConfigError(
            f"train.kvstore={requested} cannot synchronise {hosts} hosts",
            "use train.kvstore=dist_sync or dist_device_sync, or leave it unset.",
        )
    return requested


def plan_options(recipe: Any, resources: PlanResources) -> MxnetOptions:
    """The kvstore a plan's resources need (the recipe's, where it names one)."""
    kv = choose_kvstore(
        recipe.train.kvstore, resources.hosts, resources.device, resources.devices_per_host
    )
    return MxnetOptions.model_validate({"kvstore": kv})


# mxnet-cu112 ships kernels for sm_50 to sm_86 and no PTX, and AWS ended its MXNet images:
# docs/decisions/001-engine-gpu-builds.md
MXNET = Engine(
    name="mxnet",
    frameworks=("mxnet",),
    # GluonCV model-zoo names, and the ImageNet-11k symbol checkpoint of the MXNet studies
    models=tuple(
        sorted(
            [f"resnet{d}{v}" for v, depths in _DEPTHS.items() for d in depths] + list(SYMBOL_MODELS)
        )
    ),
    builds="GluonCV ResNets and the ImageNet-11k ResNet-152",
    # colour and affine jitter exist in MXNet's ImageRecordIter only
    augmentations=(
        "none",
        "crop",
        "crop_color",
        "crop_color_transform",
        "resized_crop",
        "resized_crop_color",
    ),
    build=EngineBuild(
        engine="mxnet",
        framework="MXNet 1.9.1 (mxnet-cu112, CUDA 11.2)",
        version="1.9.1",
        min_capability=5.0,
        below=9.0,
        kernels="compute capability 5.0 to 8.x (Maxwell to Ada Lovelace), with no PTX for newer",
        prerequisite="our training image, built from the Dockerfile: run `finetune image push`",
    ),
    aws=None,  # AWS ended its MXNet images: ours
    decoder="mxnet-imagerecorditer",
    resident=False,
    fixed_precision="fp32",
    features=False,
    resnet="resnet{depth}_v1b",  # GluonCV's ResNet v1.5
    loop="plain MXNet-loop (finetune's mxnet engine: Gluon + ImageRecordIter)",
    runtime="finetune.train.engines.mxnet:RUNTIME",
    options=MxnetOptions,
    plan_options=plan_options,
    weights_file="gluon.params",
    smoke_recipe="smoke-resnet18",
    # a contract written before the torch engine existed is the MXNet studies' (GluonCV)
    default_model="resnet50_v1",
    mean=backbones.STUDY_MEAN,
    std=backbones.STUDY_STD,
)
