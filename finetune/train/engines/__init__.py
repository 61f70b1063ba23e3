"""Training engines behind one call, ``fit(job)``. MXNet (GluonCV) is the only one so far;
a PyTorch engine for current GPUs follows behind the same contract."""

from __future__ import annotations

from finetune.errors import require_module


def fit(job, stop=None):
    """Run ``job`` with the MXNet engine (imported here: MXNet is heavy and optional);
    ``stop`` is a finetune.train.signals.StopRequest, checked after every batch."""
    require_module("mxnet")
    from finetune.train.engines.mxnet import fit as mxnet_fit

    return mxnet_fit(job, stop)
