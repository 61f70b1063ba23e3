"""Issue 49, S5-3: `finetune cleanup` shows EC2 tag values -- which any EC2 caller sets, with
any character -- inert: in its table, its "skipped" lines, its CSV (no formula cell) and its
messages; its JSON keeps them exact. EC2 answers in XML, where a 7-bit ESC cannot travel
(moto's answer would not parse), so the tags carry the 8-bit forms of OSC 52, OSC 0 and CSI
(C1 controls, valid XML), a right-to-left override and a spreadsheet formula."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys

import boto3

from finetune.backends.ec2.setup.infra import owner

from .conftest import REGION, stand_in_ami

HOSTILE_RUN = "=cmd|' /C calc'!A0\x9d52;c;Y3VybCBldmls\x9c\u202eexe.txt"
HOSTILE_OWNER = "\x9d0;owned\x9c\x9b2J\x9b1;1Hsomeone else"
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


def _instance(ec2, run_id: str, who: str) -> str:
    tags = [{"Key": "project", "Value": "finetune"}, {"Key": "finetune:run-id", "Value": run_id},
            {"Key": "finetune:owner", "Value": who}]  # fmt: skip
    spec = [{"ResourceType": "instance", "Tags": tags}]
    made = ec2.run_instances(ImageId=stand_in_ami(ec2), MinCount=1, MaxCount=1,
                             InstanceType="g5.xlarge", TagSpecifications=spec)  # fmt: skip
    return made["Instances"][0]["InstanceId"]


def _cleanup(*args: str) -> tuple[str, str]:
    # --owner: the run is in no ledger of this machine (cleanup's scope, S5-10); others skipped
    me = owner(boto3.client("sts", region_name=REGION))
    cmd = ["cleanup", "--older-than", "0s", "--owner", me, *args]
    res = subprocess.run([sys.executable, "-m", "finetune", *cmd],
                         capture_output=True, env={**os.environ, "COLUMNS": "300"},
                         timeout=120)  # fmt: skip
    out, err = res.stdout.decode(), res.stderr.decode()
    assert res.returncode == 0, out + err
    assert not UNSAFE.search(out + err), (args, repr(out + err))
    return out, err


def test_cleanup_prints_hostile_tags_inert_and_json_keeps_them(ec2_aws):
    ec2 = boto3.client("ec2", region_name=REGION)
    mine = _instance(ec2, HOSTILE_RUN, owner(boto3.client("sts", region_name=REGION)))
    theirs = _instance(ec2, HOSTILE_RUN, HOSTILE_OWNER)
    try:
        table, _ = _cleanup()
        assert mine in table and "exe.txt" in table and "Nothing removed" in table
        assert f"launched by {HOSTILE_OWNER[-12:]}" in table  # the skipped line, its owner inert
        rows = list(csv.DictReader(io.StringIO(_cleanup("--format", "csv")[0])))
        (row,) = [r for r in rows if r["id"] == mine]
        assert row["run_id"] == "'=cmd|' /C calc'!A0exe.txt"
        found = json.loads(_cleanup("--format", "json")[0])
        assert {r["run_id"] for r in found if r["id"] == mine} == {HOSTILE_RUN}
        _, said = _cleanup("--yes", "--format", "json")  # messages go to stderr, inert too
        assert f"terminated {mine}" in said and theirs in said
    finally:  # (theirs is skipped by --yes; the fixture wants nothing left running)
        ec2.terminate_instances(InstanceIds=[mine, theirs])
