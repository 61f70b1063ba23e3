"""Issue 23, finding 1, the part the evaluator cannot model: roles that already exist.

Older versions left run roles at /finetune/ (the oldest with no boundary and AWS's Session
Manager policy). Against moto's IAM: `finetune infra check` lists every such role -- those
without a boundary first -- with the commands that remove it (and its profile); running
exactly those commands leaves nothing, and this version's roles are never listed. The
shipped EC2 caller policy, replayed, cannot pass the listed role.
"""

from __future__ import annotations

import json
import shlex

import boto3
from typer.testing import CliRunner

from finetune.aws import infra
from finetune.cli import app

from .iam_eval import Request, allowed

TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
)
ANYTHING = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)


def _legacy_account(iam) -> dict[str, str]:
    """What an account that ran older finetune versions holds (and one current role)."""
    managed = iam.create_policy(PolicyName="ssm-core-standin", PolicyDocument=ANYTHING)
    old = iam.create_policy(PolicyName="old-boundary", Path="/finetune/", PolicyDocument=ANYTHING)
    arns = {}
    for name, path, boundary in (
        ("finetune-run-ft-20261101-000000-aaaa", "/finetune/", None),  # <= 1d38f95
        ("finetune-run-ft-20261123-000000-bbbb", "/finetune/", old["Policy"]["Arn"]),
        ("finetune-run-ft-20261124-000000-cccc", "/finetune-bounded/ec2/", old["Policy"]["Arn"]),
    ):
        extra = {"PermissionsBoundary": boundary} if boundary else {}
        role = iam.create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=TRUST, **extra)[
            "Role"
        ]
        arns[name] = role["Arn"]
    unbounded = "finetune-run-ft-20261101-000000-aaaa"
    iam.attach_role_policy(RoleName=unbounded, PolicyArn=managed["Policy"]["Arn"])
    iam.put_role_policy(RoleName=unbounded, PolicyName="run-access", PolicyDocument=ANYTHING)
    iam.create_instance_profile(InstanceProfileName=unbounded, Path="/finetune/")
    iam.add_role_to_instance_profile(InstanceProfileName=unbounded, RoleName=unbounded)
    return arns


def _run_aws_cli(iam, line: str) -> None:
    """One `aws iam VERB --name value ...` line, made by boto3 (no AWS CLI here)."""
    words = shlex.split(line)
    assert words[:2] == ["aws", "iam"], line
    verb = words[2].replace("-", "_")
    args = words[3:]
    kwargs = {  # --instance-profile-name -> InstanceProfileName
        "".join(p.capitalize() for p in k[2:].split("-")): v
        for k, v in zip(args[::2], args[1::2], strict=True)
    }
    getattr(iam, verb)(**kwargs)


def test_infra_check_lists_legacy_roles_and_how_to_remove_them(aws):
    iam = boto3.client("iam")
    arns = _legacy_account(iam)
    res = CliRunner().invoke(app, ["infra", "check"])
    assert res.exit_code == 1, res.output
    out = res.output
    a, b, c = sorted(arns)
    assert arns[a] in out and arns[b] in out and arns[c] not in out  # this version's: never
    assert out.index(arns[a]) < out.index(arns[b])  # without a boundary first
    assert "NO permissions boundary" in out.split(arns[b])[0].split(arns[a])[1]
    assert "2 run role(s)" in out and "1 without a permissions boundary" in out
    # the policy shipped now cannot pass it (the evaluator replays the request)
    caller = infra.render(
        infra.policy_document("ec2-caller"),
        infra.Names("123456789012", "us-east-1", "finetune-test-bucket"),
    )
    to = {"iam:PassedToService": "ec2.amazonaws.com"}
    assert not allowed(caller, Request("iam:PassRole", arns[a], to))
    assert allowed(caller, Request("iam:PassRole", arns[c], to))
    # the printed commands remove them, profile and policies first
    commands = [line.strip() for line in out.splitlines() if line.strip().startswith("aws iam")]
    assert commands[-1] == f"aws iam delete-role --role-name {b}"
    for line in commands:
        _run_aws_cli(iam, line)
    again = CliRunner().invoke(app, ["infra", "check"])
    assert again.exit_code == 0 and "nothing to remove" in again.output
    assert [r["RoleName"] for r in iam.list_roles()["Roles"]] == [c]
    assert iam.list_instance_profiles()["InstanceProfiles"] == []
