"""Today's GPU families in the catalog, and which engine runs on which GPU (one table)."""

from __future__ import annotations

import pytest

from finetune.catalog import engines, instances
from finetune.errors import UsageError


@pytest.mark.parametrize(
    ("name", "gpu", "count", "memory", "vcpus", "ram", "cc", "arch"),
    [
        ("g6.xlarge", "L4", 1, 24, 4, 16, "8.9", "Ada Lovelace"),
        ("g6e.xlarge", "L40S", 1, 48, 4, 32, "8.9", "Ada Lovelace"),
        ("p5.4xlarge", "H100", 1, 80, 16, 256, "9.0", "Hopper"),
        ("p5e.48xlarge", "H200", 8, 141, 192, 2048, "9.0", "Hopper"),
        ("p5en.48xlarge", "H200", 8, 141, 192, 2048, "9.0", "Hopper"),
        ("p6-b200.48xlarge", "B200", 8, 179, 192, 2048, "10.0", "Blackwell"),
    ],
)
def test_todays_families_are_in_the_catalog(name, gpu, count, memory, vcpus, ram, cc, arch):
    inst = instances.get(name)
    assert (inst.gpu_model, inst.gpu_count, inst.gpu_memory_gib) == (gpu, count, memory)
    assert (inst.vcpus, inst.memory_gib, inst.compute_capability) == (vcpus, ram, cc)
    assert inst.gpu_architecture == arch and not inst.retired
    assert instances.get(f"ml.{name}") is inst


def test_new_rows_name_their_source():
    for name in ("p5.4xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"):
        assert "aws.amazon.com/ec2/instance-types/" in instances.get(name).notes


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("g4dn.xlarge", ("mxnet", "torch")),
        ("g5.12xlarge", ("mxnet", "torch")),
        ("g6.xlarge", ("mxnet", "torch")),  # sm_86 kernels run on 8.9 (same major version)
        ("g6e.48xlarge", ("mxnet", "torch")),
        ("p4d.24xlarge", ("mxnet", "torch")),
        ("p5.4xlarge", ("torch",)),
        ("p5.48xlarge", ("torch",)),
        ("p5e.48xlarge", ("torch",)),
        ("p5en.48xlarge", ("torch",)),
        ("p6-b200.48xlarge", ("torch",)),
        ("p3.8xlarge", ("mxnet",)),  # AWS's CUDA 13 PyTorch builds dropped Volta
    ],
)
def test_engines_each_family_supports(name, expected):
    assert instances.get(name).engines == expected


@pytest.mark.parametrize("name", ["p5.4xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"])
def test_mxnet_on_hopper_or_newer_is_refused_with_reason_and_fix(name):
    with pytest.raises(UsageError) as err:
        instances.check_engine("mxnet", name)
    text = str(err.value)
    assert f"mxnet engine cannot run on {name}" in text and "compute capability" in text
    assert "engine=torch" in text and "To fix:" in text
    assert "g5" in text.split("To fix:")[1]  # an older family it does run on


def test_supported_pairs_pass_and_cpu_types_are_not_judged():
    instances.check_engine("mxnet", "g5.xlarge")
    instances.check_engine("torch", "p6-b200.48xlarge")
    instances.check_engine("torch", instances.get("g6e.xlarge"))


def test_mxnet_says_plainly_what_it_needs():
    text = engines.needs("mxnet")
    assert "finetune image push" in text and "older than Hopper" in text
    assert "image push" not in engines.needs("torch")
    with pytest.raises(UsageError, match="unknown engine"):
        engines.build("jax")
