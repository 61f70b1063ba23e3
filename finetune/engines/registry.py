"""The training engines, one descriptor each (finetune.engines.descriptor), registered
as the backends are (finetune.backends): this module is the only place that lists their
names, and the facts about each engine live here, not in if-branches elsewhere. Nothing
heavy is imported: an engine's fit is imported only when a job runs (Engine.fit).

Why the GPU bounds of each engine's AWS build are what they are:
- mxnet: our Dockerfile's mxnet-cu112 1.9.1 ships kernels for sm_50 to sm_86 and no PTX. A
  kernel built for 8.6 runs on any later 8.x GPU (CUDA's binary compatibility within a major
  version: L4 and L40S, 8.9), but Hopper (H100, H200: 9.0) and Blackwell (B200: 10.0) have
  nothing to run. AWS ended its MXNet images in 2023 (last: mxnet-training:1.9.0-gpu-py38-
  cu112), so the image is ours to build: `finetune image push`.
- torch: AWS's own PyTorch 2.10 builds (the pytorch-training image, the Deep Learning AMI
  "OSS Nvidia Driver GPU PyTorch 2.10"). They are CUDA 13 builds, and CUDA 13 dropped
  Maxwell, Pascal and Volta: Turing (7.5) is the oldest GPU they run on, Blackwell is
  included. 2.10 is the newest pytorch-training image sagemaker-core 2.27 knows, it meets our
  engine's pins (torch>=2.6, torchvision>=0.21), and the AMI carries the same version, so
  both clouds train one recipe with the same framework. (sagemaker-core also knows a newer
  line, repository "pytorch" on Amazon Linux 2023, 2.11 to 2.14; its training toolkit
  contract is not documented where we could read it, so it is not used yet.)
"""

from __future__ import annotations

from typing import Literal, get_args

from finetune.engines import backbones
from finetune.engines.descriptor import AwsFramework, Engine, EngineBuild
from finetune.errors import ConfigError, did_you_mean

_MXNET_DEPTHS = {
    "_v1": (18, 34, 50, 101, 152),
    "_v2": (18, 34, 50, 101, 152),
    "_v1b": (18, 34, 50, 101, 152),
    "_v1c": (50, 101, 152),
    "_v1d": (50, 101, 152),
}
MXNET_SYMBOL_MODELS = {"imagenet11k-resnet-152": "resnet-152"}  # name -> checkpoint prefix

MXNET = Engine(
    name="mxnet",
    frameworks=("mxnet",),
    # GluonCV model-zoo names, and the ImageNet-11k symbol checkpoint of the MXNet studies
    models=tuple(
        sorted(
            [f"resnet{d}{v}" for v, depths in _MXNET_DEPTHS.items() for d in depths]
            + list(MXNET_SYMBOL_MODELS)
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
    model_table=False,
    resnet="resnet{depth}_v1b",  # GluonCV's ResNet v1.5
    loop="plain MXNet-loop (finetune's mxnet engine: Gluon + ImageRecordIter)",
    fit_path="finetune.train.engines.mxnet:fit",
    # (none: its fit imports MXNet itself, after its parameter-server launcher set DMLC_*)
    fit_checks=(),
    weights_file="gluon.params",  # finetune.train.engines.mxnet.artifact.GLUON_PARAMS
    smoke_recipe="smoke-resnet18",
    # a contract written before the torch engine existed is the MXNet studies' (GluonCV)
    default_model="resnet50_v1",
    mean=backbones.STUDY_MEAN,
    std=backbones.STUDY_STD,
)

TORCH = Engine(
    name="torch",
    frameworks=("torch", "torchvision"),
    models=tuple(backbones.TABLE),  # torchvision's ImageNet classification networks
    builds="torchvision",
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
    model_table=True,
    resnet="resnet{depth}",  # torchvision's resnet50 is ResNet v1.5
    loop="plain PyTorch-loop (finetune's torch engine)",
    fit_path="finetune.train.engines.torch:fit",
    # (torchvision: its fit checks it where a process trains; a launcher of torchrun's
    # workers needs torch alone, and torchvision's import is ~3 CPU-s of its start-up)
    fit_checks=("torch",),
    weights_file="model.pt",  # finetune.train.engines.torch.files.WEIGHTS
    smoke_recipe="smoke-resnet18-torch",
    export_needs=("onnxscript",),  # torch.onnx's exporter needs it
    # no default model, and mean/std per model (backbones): a contract must say which
)

REGISTRY: dict[str, Engine] = {e.name: e for e in (MXNET, TORCH)}
# the names as a type (contracts.hparams.Engine): a type checker needs them written out, and
# tests/train/engines/test_registry.py keeps them equal to REGISTRY's keys
EngineName = Literal["mxnet", "torch"]
NAMES: tuple[EngineName, ...] = get_args(EngineName)
DEFAULT: EngineName = "mxnet"  # a recipe or contract that names no engine: the studies' engine


def get(name: str, error: type[Exception] = ConfigError) -> Engine:
    """The descriptor of engine ``name``; an unknown name is ``error`` (a ConfigError, or the
    caller's UsageError) with a suggestion."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise error(
            f'unknown engine "{name}".{did_you_mean(str(name), NAMES)}',
            f"use one of: {', '.join(NAMES)}.",
        ) from None


def with_build_on(compute_capability: str | float) -> tuple[str, ...]:
    """The engines whose AWS build runs on a GPU of this compute capability."""
    return tuple(e.name for e in REGISTRY.values() if e.build.runs_on(compute_capability))


def with_features() -> str:
    """The engines that implement the recipe features, said plainly ("torch")."""
    return " or ".join(e.name for e in REGISTRY.values() if e.features)
