"""Instance facts: lookup by EC2 or ml.* name, did-you-mean, retirement and successors."""

from datetime import date

import pytest

from finetune.catalog import instances
from finetune.errors import UsageError


def test_ec2_and_sagemaker_names_give_the_same_facts():
    p3 = instances.get("p3.8xlarge")
    assert instances.get("ml.p3.8xlarge") is p3
    assert instances.get(" ML.P3.8XLARGE ") is p3
    assert (p3.gpu_model, p3.gpu_count, p3.gpu_memory_gib, p3.vcpus) == ("V100", 4, 16, 32)
    assert p3.compute_capability == "7.0" and p3.sagemaker_name() == "ml.p3.8xlarge"


def test_unknown_instance_suggests_the_closest_name():
    with pytest.raises(UsageError) as err:
        instances.get("p3.8xlarg")
    message = str(err.value)
    assert 'Unknown instance type "p3.8xlarg". Did you mean "p3.8xlarge"?' in message
    assert "To fix:" in message


def test_the_issue_instances_are_all_in_the_catalog():
    wanted = "p2.xlarge p2.8xlarge p2.16xlarge p3.2xlarge p3.8xlarge p3.16xlarge p3dn.24xlarge"
    wanted += " g4dn.xlarge g5.xlarge g5.12xlarge g5.48xlarge g6.xlarge g6e.xlarge"
    wanted += " p4d.24xlarge p5.48xlarge"
    assert set(wanted.split()) <= set(instances.all_instances())


def test_every_retired_type_has_a_current_successor_with_the_same_gpu_count():
    for inst in instances.all_instances().values():
        if not inst.retired:
            assert not inst.successor
            continue
        nxt = instances.successor(inst)
        assert nxt is not None and not nxt.retired, inst.name
        # No current type has 16 GPUs: p2.16xlarge maps to an 8-GPU type and says so.
        assert nxt.gpu_count == min(inst.gpu_count, 8), inst.name
    assert "8 GPUs" in instances.get("p2.16xlarge").notes


def test_retirement_warning_names_the_date_and_the_successor():
    before = instances.retirement_warning("p3.8xlarge", today=date(2025, 7, 1))
    assert "being retired by AWS (migrate by 2025-12-20)" in before
    assert "g5.12xlarge (4x A10G" in before and "--instance g5.12xlarge" in before
    after = instances.retirement_warning("p3.8xlarge", today=date(2026, 1, 1))
    assert "was retired by AWS (2025-12-20)" in after
    assert "has been retired" in instances.retirement_warning("p2.xlarge")
    assert instances.retirement_warning("g5.xlarge") is None


def test_filter_by_gpu_model_is_case_insensitive_and_checks_the_name():
    assert {i.name for i in instances.with_gpu("v100")} == {
        "p3.2xlarge",
        "p3.8xlarge",
        "p3.16xlarge",
        "p3dn.24xlarge",
    }
    with pytest.raises(UsageError, match='Did you mean "A10G"'):
        instances.with_gpu("a10")
