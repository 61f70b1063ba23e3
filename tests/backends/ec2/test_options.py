"""The EC2 backend's one options model: the launch flags, stored in ec2.json as given, and the
ec2.json files written before (renamed fields) still read."""

from __future__ import annotations

import json

from finetune.backends import options_for
from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.state import STATE_FILE, Ec2State

# RUN_DIR/ec2.json as the backend wrote it before the options were stored as given
OLD_STATE = {
    "region": "us-east-1",
    "bucket": "b",
    "prefix": "finetune/runs/ft-1/",
    "dataset_uri": "s3://b/datasets/x/",
    "image": "",
    "owner": "arn:aws:iam::123456789012:user/me",
    "options": {
        "ami": None,
        "subnets": ["subnet-1", "subnet-2"],
        "azs": ["us-east-1a"],
        "max_runtime_s": 7200,
        "max_eur": 3.5,
        "max_restarts": 1,
        "allow_on_demand_fallback": True,
        "fallback_instances": ["g5.2xlarge"],
        "volume_gib": 100,
        "upload_interval_s": 30,
        "image": None,
        "read_prefixes": ["s3://b/extra/"],
    },
    "instance_profile": "finetune-run-ft-1",
    "attempts": [],
    "stop_requested": False,
    "done": False,
    "restarts": 0,
    "tried": [],
    "intent": None,
}


def test_an_old_ec2_json_reads_into_the_flags_model(tmp_path):
    (tmp_path / STATE_FILE).write_text(json.dumps(OLD_STATE))
    opts = Ec2State.load(tmp_path).options
    assert opts == Ec2Options(
        subnet=("subnet-1", "subnet-2"),
        az=("us-east-1a",),
        max_runtime=7200,
        max_eur=3.5,
        max_restarts=1,
        allow_on_demand_fallback=True,
        fallback_instance=("g5.2xlarge",),
        read_prefix=("s3://b/extra/",),
    )


def test_options_are_stored_as_given(tmp_path):
    given = options_for("ec2", {"subnet": ("subnet-9",), "max_runtime": "2h", "max_eur": 4.0})
    state = Ec2State("us-east-1", "b", "p/", "s3://b/d/", "", "me", given)
    state.save(tmp_path)
    stored = json.loads((tmp_path / STATE_FILE).read_text())["options"]
    assert stored["subnet"] == ["subnet-9"] and stored["max_runtime"] == 2 * 3600
    assert set(stored) == set(Ec2Options.model_fields)  # the flags' own names, nothing else
    assert Ec2State.load(tmp_path).options == given
