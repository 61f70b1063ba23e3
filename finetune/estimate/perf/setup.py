"""``Setup``: what a prediction of training images/s is for (network, GPU, precision, batch,
hosts, the CPU decoder, compile and layout). Its own module so that the predictor
(perf/predict.py) and the measured rows it prefers (perf/measured.py) both take it from one
place below them."""

from __future__ import annotations

from dataclasses import dataclass, field

from finetune.engines.descriptor import Engine
from finetune.engines.torch import TORCH
from finetune.estimate.perf import pipeline


@dataclass(frozen=True)
class Setup:
    """What a prediction is for."""

    network: str  # a recipe's model name ('resnet50', 'imagenet11k-resnet-152')
    gpu_model: str  # as instances.csv or gpu_peaks.csv name it
    precision: str  # fp32 | tf32 | fp16 | bf16 (resolve 'auto' with gpus.resolve_precision)
    batch_per_device: int
    image_size: int = 224
    gpus_per_host: int = 1
    hosts: int = 1
    kind: str = "plain"  # the kind class predicted: plain, or record/reference (tuned)
    family: str | None = None  # instance family, for the interconnect
    vcpus: int | None = None  # per host; None: no CPU cap known
    decoder: pipeline.Decoder | None = None  # None: nothing decoded per epoch on the CPU
    engine: Engine = field(default=TORCH)  # finetune's engine the prediction is for
    compile: bool = False  # torch.compile (inductor) or eager: +43 % on an H200 (RN50)
    layout: str = "channels_last"  # the torch engine's memory format (NCHW: "contiguous")
    # a published row's software (the backtest): framework (pytorch, mxnet, tensorflow) and
    # data pipeline (synthetic, dali, cpu); None: finetune's own engine (``engine``)
    framework: str | None = None
    pipeline_kind: str | None = None

    @property
    def devices(self) -> int:
        return self.gpus_per_host * self.hosts
