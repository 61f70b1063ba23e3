"""Issue 49, N2: `finetune infra check` and `infra deploy` say whether the run-role perimeter
is attached as a resource control policy, from read-only AWS Organizations calls against
moto: attached on an OU above the account, not attached (no organization, no such RCP, the
management account), and unknown, with how to check, where Organizations cannot be read."""

from __future__ import annotations

import json

import boto3
import pytest
from typer.testing import CliRunner

from finetune.aws import infra, perimeter
from finetune.cli import app

from .gateway import ACCOUNT

REGION = "eu-west-1"


def _org():
    return boto3.client("organizations", region_name="us-east-1")


@pytest.fixture
def member(gw) -> str:
    """An organization (this test account its management account) with RCPs enabled and a
    member account inside an OU; returns the member's id."""
    org = _org()
    org.create_organization(FeatureSet="ALL")
    (root,) = org.list_roots()["Roots"]
    org.enable_policy_type(RootId=root["Id"], PolicyType=perimeter.RCP)
    created = org.create_account(AccountName="ml", Email="ml@example.com")["CreateAccountStatus"]
    account = created["AccountId"]
    ou = org.create_organizational_unit(ParentId=root["Id"], Name="ml")["OrganizationalUnit"]
    org.move_account(AccountId=account, SourceParentId=root["Id"], DestinationParentId=ou["Id"])
    return account


def _rcp(account: str, statement_of=None) -> str:
    doc = infra.render(infra.policy_document("perimeter"), infra.Names(account=account))
    if statement_of:
        doc = statement_of(doc)
    created = _org().create_policy(Content=json.dumps(doc), Description="finetune",
                                   Name="perimeter", Type=perimeter.RCP)  # fmt: skip
    return created["Policy"]["PolicySummary"]["Id"]


def _ou_of(account: str) -> str:
    return _org().list_parents(ChildId=account)["Parents"][0]["Id"]


def test_an_rcp_on_the_accounts_ou_is_found(member):
    policy = _rcp(member)
    org = _org()
    assert perimeter.status(org, member, REGION).state == perimeter.MISSING  # not attached yet
    org.attach_policy(PolicyId=policy, TargetId=_ou_of(member))
    found = perimeter.status(org, member, REGION)
    assert found.state == perimeter.ATTACHED and policy in found.detail, found


def test_an_rcp_without_the_perimeters_statement_is_not_it(member):
    def lets_everyone_in(doc):  # the same statement, but no exception for AWS services
        doc["Statement"][0].pop("Condition")
        doc["Statement"][0]["Action"] = ["sts:AssumeRole"]
        return doc

    _org().attach_policy(PolicyId=_rcp(member, lets_everyone_in), TargetId=member)
    found = perimeter.status(_org(), member, REGION)
    assert found.state == perimeter.MISSING and "create-policy" in found.fix


def test_infra_check_without_an_organization_says_not_attached(gw):
    res = CliRunner().invoke(app, ["infra", "check", "--region", REGION])
    assert res.exit_code == 0, res.output  # an audit finding, not a refusal: exit as before
    text = " ".join(res.output.split())
    assert f"not attached: account {ACCOUNT} belongs to no AWS organization" in text
    assert "To fix: from the organization's management account" in text
    assert "finetune infra print --policy perimeter" in text


def test_the_management_account_is_never_covered(member):
    _org().attach_policy(PolicyId=_rcp(ACCOUNT), TargetId=_org().list_roots()["Roots"][0]["Id"])
    res = CliRunner().invoke(app, ["infra", "check", "--region", REGION])
    text = " ".join(res.output.split())
    assert "not attached" in text and "management account" in text, text


@pytest.mark.parametrize("call", ["DescribeOrganization", "ListParents", "ListPoliciesForTarget"])
def test_unreadable_organizations_is_unknown_never_attached(member, gw, call):
    _org().attach_policy(PolicyId=_rcp(member), TargetId=member)
    gw.fail(call, "AccessDeniedException", status=400, times=-1)
    found = perimeter.status(_org(), member, REGION)
    assert found.state == perimeter.UNKNOWN and "AccessDeniedException" in found.detail
    lines = " ".join(found.lines())
    assert "To check:" in lines and f"list-policies-for-target --target-id {member}" in lines
    assert "attached:" not in lines.replace("not attached", "")


@pytest.mark.filterwarnings("ignore:Tried to parse")  # moto's CFN lacks AWS::S3::BucketPolicy
def test_infra_deploy_says_it_too(gw):
    gw.fail("DescribeOrganization", "AccessDeniedException", status=400, times=-1)
    res = CliRunner().invoke(app, ["infra", "deploy", "--region", REGION])
    assert res.exit_code == 0, res.output
    assert "Run-role perimeter (resource control policy): unknown" in res.stdout
    as_json = CliRunner().invoke(app, ["infra", "deploy", "--region", REGION, "--format", "json"])
    assert "CallerPolicyArn" in json.loads(as_json.stdout)  # stdout: the outputs alone
    assert "perimeter (resource control policy): unknown" in as_json.stderr
