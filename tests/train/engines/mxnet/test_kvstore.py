"""MXNet's kvstore, chosen by the engine from plain numbers when a run is planned (no MXNet)."""

from __future__ import annotations

import pytest

from finetune.errors import ConfigError
from finetune.plan import Resources, build_plan
from finetune.train.engines.mxnet import kvstore


@pytest.mark.parametrize(
    ("requested", "hosts", "per_host", "device", "expect"),
    [
        (None, 1, 1, "cpu", "local"),
        (None, 1, 1, "gpu", "local"),
        (None, 1, 8, "gpu", "device"),
        (None, 2, 8, "gpu", "dist_device_sync"),
        (None, 2, 1, "cpu", "dist_sync"),
        ("nccl", 1, 8, "gpu", "nccl"),
    ],
)
def test_choose_kvstore(requested, hosts, per_host, device, expect):
    assert kvstore.choose(requested, hosts, device, per_host) == expect


def test_single_host_kvstore_cannot_span_hosts():
    with pytest.raises(ConfigError, match="cannot synchronise 2 hosts") as info:
        kvstore.choose("device", 2, "gpu", 8)
    assert "To fix:" in str(info.value)


def test_the_plan_carries_the_engines_choice(tiny_dataset):
    res = Resources(backend="sagemaker", instance_type="ml.p3.8xlarge", hosts=2,
                    devices_per_host=4, device="gpu")  # fmt: skip
    plan = build_plan("smoke-resnet18", tiny_dataset, res, ["batch_per_device=2"])
    assert plan.hyperparameters.kvstore == kvstore.choose(None, 2, "gpu", 4)
    with pytest.raises(ConfigError, match="cannot synchronise 2 hosts"):
        build_plan(
            "smoke-resnet18", tiny_dataset, res, ["batch_per_device=2", "train.kvstore=local"]
        )
