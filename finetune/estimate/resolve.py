"""Stage 1 of an estimate: the setup resolved once -- the instance, the precision the engine
trains at on its GPU, the decoder that runs every epoch, and the performance model's Setup --
and carried through the other stages."""

from __future__ import annotations

from dataclasses import dataclass

from finetune.catalog import instances
from finetune.estimate.perf import gpus, pipeline
from finetune.estimate.perf.setup import Setup
from finetune.estimate.request import EstimateRequest, Workload


@dataclass(frozen=True)
class Resolved:
    """The request with everything derived from it that the later stages share."""

    request: EstimateRequest
    instance: instances.InstanceType
    precision: str
    setup: Setup

    @property
    def work(self) -> Workload:
        return self.request.work


def precision_for(work: Workload, gpu_model: str) -> str:
    """The precision the engine trains at on this GPU (a fixed one, or the recipe's resolved)."""
    return work.engine.fixed_precision or gpus.resolve_precision(work.precision, gpu_model)


def resolve(request: EstimateRequest) -> Resolved:
    """The instance (the catalog's UsageError for an unknown one) and the model's Setup."""
    work, inst = request.work, instances.get(request.instance_type)
    images = request.images_per_epoch + request.other_images
    decoder = pipeline.per_epoch_decoder(work.engine, images, work.image_size, inst.gpu_memory_gib)
    precision = precision_for(work, inst.gpu_model)
    setup = Setup(
        network=work.model,
        gpu_model=inst.gpu_model,
        precision=precision,
        batch_per_device=work.batch_per_device,
        image_size=work.image_size,
        gpus_per_host=inst.gpu_count,
        hosts=request.hosts,
        family=inst.family,
        vcpus=inst.vcpus,
        decoder=decoder,
        engine=work.engine,
        compile=work.compile,
    )
    return Resolved(request, inst, precision, setup)
