"""MXNet's kvstore, chosen by its spec's plan hook from plain numbers (no MXNet import)."""

from __future__ import annotations

import pytest

from finetune.engines.mxnet import choose_kvstore
from finetune.errors import ConfigError
from finetune.plan import Resources, build_plan


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
    assert choose_kvstore(requested, hosts, device, per_host) == expect


def test_single_host_kvstore_cannot_span_hosts():
    with pytest.raises(ConfigError, match="cannot synchronise 2 hosts") as info:
        choose_kvstore("device", 2, "gpu", 8)
    assert "To fix:" in str(info.value)


def test_the_plan_carries_the_engines_choice(tiny_dataset):
    res = Resources(backend="sagemaker", instance_type="ml.p3.8xlarge", hosts=2,
                    devices_per_host=4, device="gpu")  # fmt: skip
    plan = build_plan("smoke-resnet18", tiny_dataset, res, ["batch_per_device=2"])
    assert plan.hyperparameters.options.kvstore == choose_kvstore(None, 2, "gpu", 4)
    with pytest.raises(ConfigError, match="cannot synchronise 2 hosts"):
        build_plan(
            "smoke-resnet18", tiny_dataset, res, ["batch_per_device=2", "train.kvstore=local"]
        )
