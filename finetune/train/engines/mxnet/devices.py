"""Which devices train, and the kvstore that sums their gradients.

One code path for every case: a list of contexts, ``split_and_load`` and a gluon Trainer on
a kvstore. GPUs when there are any (or when asked), else ``devices_per_host`` CPU contexts
-- MXNet runs them on the same cores, which is how the tests drive the multi-device path.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from finetune.contracts.hparams import TrainHyperparameters
from finetune.engines.mxnet import MxnetOptions
from finetune.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Devices:
    """The contexts of this host, the kvstore (None: one device, nothing to reduce) and this
    host's place among the hosts (the ImageRecordIter's part_index / num_parts; MXNet's
    kvstore calls a host a worker: ``rank`` / ``num_workers``)."""

    contexts: list
    kvstore: Any
    rank: int = 0
    hosts: int = 1

    @property
    def kind(self) -> str:
        return self.contexts[0].device_type


def select(hp: TrainHyperparameters) -> Devices:
    """Contexts from ``hp.device``, a kvstore from its MxnetOptions."""
    import mxnet as mx

    gpus = mx.context.num_gpus()
    if hp.device == "gpu" and gpus == 0:
        raise ConfigError(
            "device=gpu but MXNet sees no GPU on this host",
            "run on a GPU instance with the CUDA build (mxnet-cu112), or set device=cpu.",
        )
    if hp.device != "cpu" and gpus > 0:
        contexts = [mx.gpu(i) for i in range(gpus)]
        if gpus != hp.devices_per_host:
            log.warning(
                "found %d GPU(s), the plan assumed %d: using all %d",
                gpus,
                hp.devices_per_host,
                gpus,
            )
    else:
        contexts = [mx.cpu(i) for i in range(hp.devices_per_host)]
    kvstore = _kvstore(MxnetOptions.of(hp).kvstore, contexts, hp.hosts)
    if kvstore is not None and kvstore.type.startswith("dist"):
        return Devices(contexts, kvstore, kvstore.rank, hosts=kvstore.num_workers)
    return Devices(contexts, kvstore)


def _kvstore(name: str, contexts: list, hosts: int):
    """A kvstore object, or None for a single device on a single host."""
    import mxnet as mx

    if name.startswith("dist"):
        if os.environ.get("DMLC_ROLE") == "worker":
            # a parameter-server cluster is up (finetune.train.engines.mxnet.cluster set DMLC_*)
            return mx.kv.create(name)
        log.info(
            "kvstore %s without a parameter-server cluster (planned for %d host(s), this job "
            "has one): using 'device' instead",
            name,
            hosts,
        )
        name = "device"
    if len(contexts) == 1:
        return None
    if name == "nccl" and contexts[0].device_type != "gpu":
        log.info("kvstore nccl needs GPUs: using 'device' on CPU contexts")
        name = "device"
    return mx.kv.create(name)
