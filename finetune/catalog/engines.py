"""Which training engine runs on which GPU: one table keyed by engine, the framework build AWS
runs it with (training image or Deep Learning AMI), and the GPU architecture (CUDA compute
capability) that build has kernels for.

Why the bounds are what they are:
- mxnet: our Dockerfile's mxnet-cu112 1.9.1 ships kernels for sm_50 to sm_86 and no PTX. A
  kernel built for 8.6 runs on any later 8.x GPU (CUDA's binary compatibility within a major
  version: L4 and L40S, 8.9), but Hopper (H100, H200: 9.0) and Blackwell (B200: 10.0) have
  nothing to run. AWS ended its MXNet
  images in 2023 (last: mxnet-training:1.9.0-gpu-py38-cu112), so the image is ours to build:
  `finetune image push`.
- torch: AWS's own PyTorch 2.10 builds (SageMaker's pytorch-training image, the EC2 Deep
  Learning AMI "OSS Nvidia Driver GPU PyTorch 2.10"). They are CUDA 13 builds, and CUDA 13
  dropped Maxwell, Pascal and Volta: Turing (7.5) is the oldest GPU they run on, Blackwell is
  included. 2.10 is the newest pytorch-training image sagemaker-core 2.27 knows, it meets our
  engine's pins (torch>=2.6, torchvision>=0.21), and the AMI carries the same version, so a
  SageMaker and an EC2 run of one recipe train with the same framework. (sagemaker-core also
  knows a newer line, repository "pytorch" on Amazon Linux 2023, 2.11 to 2.14; its training
  toolkit contract is not documented where we could read it, so it is not used yet.)
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.contracts.hparams import ENGINES
from finetune.errors import UsageError


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


BUILDS: dict[str, EngineBuild] = {
    "mxnet": EngineBuild(
        engine="mxnet",
        framework="MXNet 1.9.1 (mxnet-cu112, CUDA 11.2)",
        version="1.9.1",
        min_capability=5.0,
        below=9.0,
        kernels="compute capability 5.0 to 8.x (Maxwell to Ada Lovelace), with no PTX for newer",
        prerequisite="our training image, built from the Dockerfile: run `finetune image push`",
    ),
    "torch": EngineBuild(
        engine="torch",
        framework="PyTorch 2.10 (AWS build, CUDA 13)",
        version="2.10.0",
        min_capability=7.5,
        below=None,
        kernels="compute capability 7.5 and newer (Turing to Blackwell)",
        prerequisite="",
    ),
}


def build(engine: str) -> EngineBuild:
    """The build of ``engine`` (mxnet or torch)."""
    try:
        return BUILDS[engine]
    except KeyError:
        raise UsageError(
            f'unknown engine "{engine}"', f"use one of: {', '.join(ENGINES)}."
        ) from None


def engines_for(compute_capability: str | float) -> tuple[str, ...]:
    """The engines whose AWS build runs on a GPU of this compute capability."""
    return tuple(name for name, b in BUILDS.items() if b.runs_on(compute_capability))


def needs(engine: str) -> str:
    """What a cloud run of ``engine`` needs, said plainly (shown with the plan)."""
    b = build(engine)
    gpus = f"a GPU of compute capability {b.min_capability:g}"
    gpus += f" to below {b.below:g} (older than Hopper)" if b.below else " or newer"
    return f"{b.framework}: {gpus}" + (f"; {b.prerequisite}" if b.prerequisite else "")
