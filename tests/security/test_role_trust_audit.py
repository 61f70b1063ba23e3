"""Issue 34, item 2: `finetune infra check` audits the trust of every role under
/finetune-bounded/ (against moto's IAM). A caller can mint a run role whose trust names
itself, another account, or an OIDC/SAML provider -- IAM has no condition key on a new role's
trust -- so the check lists each such role with what is wrong and the command that gives it
its service's trust; after running those commands it passes. The roles finetune itself
creates (the SageMaker run role, the EC2 instance role) are never listed."""

from __future__ import annotations

import json
import shlex

import boto3
from typer.testing import CliRunner

from finetune.backends.ec2.setup.profile import _TRUST as EC2_TRUST
from finetune.backends.sagemaker.runrole import trust as sagemaker_trust
from finetune.cli import app

ACCOUNT = "123456789012"
GITHUB = "token.actions.githubusercontent.com"
SM, EC2 = "/finetune-bounded/sagemaker/", "/finetune-bounded/ec2/"


def _trust(principal: dict, action: str = "sts:AssumeRole", **condition) -> str:
    stmt = {"Effect": "Allow", "Principal": principal, "Action": action}
    if condition:
        stmt["Condition"] = {"StringEquals": condition}
    return json.dumps({"Version": "2012-10-17", "Statement": [stmt]})


MINTED = {
    # name: (path, trust, what the report must say)
    "finetune-run-foreign": (SM, _trust({"AWS": "arn:aws:iam::999988887777:root"}), "999988887777"),
    "finetune-run-github": (
        SM,
        _trust(
            {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{GITHUB}"},
            "sts:AssumeRoleWithWebIdentity",
        ),
        "identity provider",
    ),
    "finetune-run-saml": (
        EC2,
        _trust(
            {"Federated": f"arn:aws:iam::{ACCOUNT}:saml-provider/corp"}, "sts:AssumeRoleWithSAML"
        ),
        "sts:AssumeRoleWithSAML",
    ),
    "finetune-run-confused": (
        SM,
        _trust({"Service": "sagemaker.amazonaws.com"}, **{"aws:SourceAccount": "999988887777"}),
        "another account",
    ),
    "finetune-run-wrongservice": (EC2, _trust({"Service": "lambda.amazonaws.com"}), "lambda"),
}


def test_infra_check_refuses_run_roles_with_foreign_trust_and_says_how_to_fix(aws):
    iam = boto3.client("iam")
    ours = {
        "finetune-run-ft-sm": (SM, json.dumps(sagemaker_trust(ACCOUNT))),
        "finetune-run-ft-ec2": (EC2, json.dumps(EC2_TRUST)),
    }
    for name, (path, doc, *_) in {**ours, **MINTED}.items():
        iam.create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=doc)
    res = CliRunner().invoke(app, ["infra", "check"])
    assert res.exit_code == 1, res.output
    out = res.output
    assert f"{len(MINTED)} run role(s) under /finetune-bounded/ trust more" in out
    assert "To fix:" in out and "Traceback" not in out
    for name, (_, _, said) in MINTED.items():
        assert f"/{name}\n" in out, name
        block = out.split(f"/{name}\n")[1].split("aws iam update-assume-role-policy")[0]
        assert said in block, (name, block)
    for name in ours:
        assert name not in out
    # the printed commands give each role its service's trust; then the check passes
    for line in out.splitlines():
        if line.strip().startswith("aws iam update-assume-role-policy"):
            words = shlex.split(line)
            iam.update_assume_role_policy(RoleName=words[4], PolicyDocument=words[6])
    again = CliRunner().invoke(app, ["infra", "check"])
    assert again.exit_code == 0, again.output
    assert "trusts only its AWS service" in again.output
