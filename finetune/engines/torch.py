"""The PyTorch engine's spec: torchvision's ImageNet networks (finetune.engines.backbones)
and timm's zoo (finetune.engines.timmzoo, ``timm/<model>``) on today's GPUs. Its runtime is
finetune.train.engines.torch; importing this imports no torch (a timm model's rules do)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from finetune.engines import backbones
from finetune.engines.descriptor import (
    AwsFramework,
    Engine,
    EngineBuild,
    EngineOptions,
    PlanResources,
)


class TorchOptions(EngineOptions):
    """The torch engine's own settings."""

    engine: Literal["torch"] = "torch"
    # where decoded images live: resident (decoded once, kept on the device), stream
    # (decoded every epoch by loader workers), auto (resident when they fit)
    data_path: Literal["auto", "resident", "stream"] = "auto"
    loader_workers: int = Field(-1, ge=-1)  # stream: worker processes (-1: cores - 2)
    compile: bool = False  # torch.compile the network
    # BatchNorm: "batch" normalises with each device's batch statistics, "frozen" with the
    # stored running statistics (a process's output then does not depend on how the global
    # batch is split), "sync" with the global batch's (SyncBatchNorm, GPUs only)
    batchnorm: Literal["batch", "frozen", "sync"] = "batch"


def plan_options(recipe: Any, resources: PlanResources) -> TorchOptions:
    """The recipe's data path, loader workers and compile switch."""
    return TorchOptions(
        data_path=recipe.data.path,
        loader_workers=recipe.data.loader_workers,
        compile=recipe.train.compile,
    )


# AWS's PyTorch 2.10 builds (CUDA 13: Turing and newer), the image and the AMI alike:
# docs/decisions/001-engine-gpu-builds.md
TORCH = Engine(
    name="torch",
    frameworks=("torch", "torchvision"),
    models=tuple(backbones.TABLE),  # torchvision's ImageNet classification networks
    builds="torchvision's networks and timm's (timm/<model>)",
    augmentations=("none", "crop", "resized_crop"),
    build=EngineBuild(
        engine="torch",
        framework="PyTorch 2.10 (AWS build, CUDA 13)",
        version="2.10.0",
        min_capability=7.5,
        below=None,
        kernels="compute capability 7.5 and newer (Turing to Blackwell)",
        prerequisite="",
    ),
    aws=AwsFramework(
        image_framework="pytorch",
        image_python="py313",  # the only Python of AWS's pytorch-training 2.10.0 image
        ami_slug="pytorch",
        ami_title="PyTorch",
        python="/opt/pytorch/bin/python",  # the AMI's release notes: python_location
        title="PyTorch",
    ),
    decoder="torch-streaming",
    resident=True,
    fixed_precision="",
    features=True,
    resnet="resnet{depth}",  # torchvision's resnet50 is ResNet v1.5
    loop="plain PyTorch-loop (finetune's torch engine)",
    runtime="finetune.train.engines.torch:RUNTIME",
    options=TorchOptions,
    plan_options=plan_options,
    weights_file="model.pt",
    smoke_recipe="smoke-resnet18-torch",
    rules=backbones.Rules(),  # mean/std and image sizes per model, timm's from its config
)
