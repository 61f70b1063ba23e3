"""checkov on the CloudFormation template and on the policies finetune generates per run, and
bandit on the package: no finding that is not justified where it is skipped.

The scanners live in .venv-tools (scripts/setup.sh installs requirements/tools.lock there;
checkov's own pins clash with ours). Neither needs the network: checkov runs with
--skip-download. A skip must say why: checkov's in the template's Metadata, bandit's as a
`# bandit BXXX (...)` comment line right above its `# nosec BXXX`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from finetune.aws import infra
from finetune.backends.ec2.request import instance_policy
from finetune.backends.sagemaker import runrole

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".venv-tools" / "bin"
ACCOUNT, REGION, BUCKET = "123456789012", "us-east-1", "finetune-test-bucket"
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/finetune@sha256:" + "a" * 64


def _tool(name: str) -> Path:
    path = TOOLS / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `bash scripts/setup.sh` (it creates .venv-tools)")
    return path


def _run(args: list, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


def _generated_template(path: Path) -> Path:
    """The per-run roles finetune creates (EC2 instance role, SageMaker execution role) as
    CloudFormation resources, so checkov judges exactly what the code sends."""
    reads = ["finetune/datasets/shapes-ec0c329c5a10/"]
    ec2 = instance_policy(BUCKET, "finetune/runs/ft-1/", reads, IMAGE)
    sagemaker = runrole.policy("ft-1", BUCKET, reads, IMAGE, REGION, ACCOUNT)
    ec2_trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }

    def role(trust: dict, policy: dict) -> dict:
        props = {"AssumeRolePolicyDocument": trust, "PermissionsBoundary": "arn:aws:iam::x"}
        props["Policies"] = [{"PolicyName": "run-access", "PolicyDocument": policy}]
        return {"Type": "AWS::IAM::Role", "Properties": props}

    doc = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {
            "Ec2RunRole": role(ec2_trust, ec2),
            "SageMakerRunRole": role(runrole.trust(ACCOUNT), sagemaker),
        },
    }
    path.write_text(json.dumps(doc, indent=1))
    return path


def test_checkov_passes_the_template_and_the_generated_policies(tmp_path):
    template = infra.infra_dir() / infra.TEMPLATE
    generated = _generated_template(tmp_path / "generated-run-roles.json")
    args = [_tool("checkov"), "-f", template, "-f", generated, "--framework", "cloudformation"]
    done = _run([*args, "--skip-download", "-o", "json"], tmp_path)
    reports = json.loads(done.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = [
        (c["check_id"], c["resource"], c["file_path"])
        for r in reports
        for c in r["results"]["failed_checks"]
    ]
    assert failed == [], done.stdout[-2000:]
    summary = {k: sum(r["summary"][k] for r in reports) for k in ("resource_count", "passed")}
    assert summary["resource_count"] >= 10 and summary["passed"] > 30  # it did look
    assert all(r["summary"]["parsing_errors"] == 0 for r in reports)
    skipped = [c for r in reports for c in r["results"]["skipped_checks"]]
    why = {c["check_id"]: c["check_result"].get("suppress_comment") or "" for c in skipped}
    assert sorted(why) == ["CKV_AWS_111", "CKV_AWS_136", "CKV_AWS_18"]  # each one justified
    assert all(len(reason) > 30 for reason in why.values()), why


def test_bandit_finds_no_unjustified_medium_or_high_issue():
    done = _run([_tool("bandit"), "-r", "finetune", "-ll", "-f", "json", "-q"])
    report = json.loads(done.stdout)
    issues = [(i["test_id"], i["filename"], i["line_number"]) for i in report["results"]]
    assert issues == [] and done.returncode == 0, issues
    assert report["metrics"]["_totals"]["loc"] > 10_000  # it scanned the package


def test_every_bandit_skip_says_why():
    unjustified = []
    for path in sorted((ROOT / "finetune").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            m = re.search(r"#\s*nosec\b\s*(B\d{3})?", line)
            if not m:
                continue
            above = "\n".join(lines[max(0, n - 4) : n])
            if not m[1] or f"# bandit {m[1]} (" not in above:
                unjustified.append(f"{path.relative_to(ROOT)}:{n + 1}")
    assert unjustified == []
