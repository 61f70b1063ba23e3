"""Whether the run-role perimeter (infra/policies/run-role-perimeter.json) is attached as a
resource control policy over this account: `finetune infra check` and `infra deploy` say so.

Read-only AWS Organizations calls: the account's organization, its parents up to the root,
and the RCPs attached to each (an RCP attached to an OU or the root applies to every account
below it). Only the management account or a delegated administrator may read them; when these
credentials cannot, the answer is "unknown" with how to check by hand, never "attached".
RCPs never apply to the management account's own resources.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from finetune.aws import retries
from finetune.aws.infra import BOUNDARIES, Names, policy_document, render
from finetune.aws.session import partition_of

ATTACHED, MISSING, UNKNOWN = "attached", "not attached", "unknown"
RCP = "RESOURCE_CONTROL_POLICY"
_ID = re.compile(r"(p|ou|r)-[0-9a-z_-]{1,64}|\d{12}")  # what is printed must look like an id
_PROBE = "arn:{partition}:iam::{account}:role/finetune-bounded/{kind}/finetune-run-probe"


@dataclass(frozen=True)
class Perimeter:
    """``state`` attached | not attached | unknown; ``detail`` why; ``fix`` what to do."""

    state: str
    detail: str
    fix: str = ""

    def lines(self) -> list[str]:
        """What `finetune infra check` and `infra deploy` print."""
        out = [f"Run-role perimeter (resource control policy): {self.state}: {self.detail}."]
        if self.fix:
            out.append(("To check: " if self.state == UNKNOWN else "To fix: ") + self.fix)
        return out


def status(org, account: str, region: str) -> Perimeter:
    """Whether an RCP holding the perimeter's statement applies to ``account`` (``org``: an
    Organizations client)."""
    try:
        found = retries.call(org.describe_organization)["Organization"]
    except Exception as exc:
        if retries.error_code(exc) == "AWSOrganizationsNotInUseException":
            return Perimeter(MISSING, f"account {account} belongs to no AWS organization, so no "
                             "resource control policy applies to it", _attach(account))  # fmt: skip
        return _unknown(exc, account)
    if found.get("MasterAccountId") == account:
        return Perimeter(
            MISSING,
            f"account {account} is its organization's management account, whose resources "
            "no resource control policy governs",
            "deploy finetune's stack in a member account of the organization; the caller "
            "policies' own Deny still keeps their holders out of the run roles.",
        )
    try:
        targets = _targets(org, account)
        for target in targets:
            for policy_id in _rcps(org, target):
                doc = retries.call(org.describe_policy, PolicyId=policy_id)["Policy"]
                if covers(json.loads(doc["Content"]), partition_of(region), account):
                    where = target if target != account else f"the account {account}"
                    return Perimeter(ATTACHED, f"policy {_safe(policy_id)} on {_safe(where)}")
    except Exception as exc:
        return _unknown(exc, account)
    return Perimeter(
        MISSING,
        f"no resource control policy on account {account}, its OUs or its root holds the "
        "perimeter's statement",
        _attach(account),
    )


def covers(content: dict, partition: str, account: str) -> bool:
    """Whether a policy document denies every STS action of the perimeter on both backends'
    run roles to principals that are not AWS services (and lets the services through)."""
    wanted = render(policy_document("perimeter"), Names(account=account))["Statement"][0]
    probes = [_PROBE.format(partition=partition, account=account, kind=k) for k in BOUNDARIES]
    statements = content.get("Statement", [])
    for s in statements if isinstance(statements, list) else [statements]:
        if s.get("Effect") != "Deny" or "Action" not in s or "Resource" not in s:
            continue
        actions, resources = _listed(s["Action"]), _listed(s["Resource"])
        if not all(any(_glob(a, w, True) for a in actions) for w in wanted["Action"]):
            continue
        if not all(any(_glob(r, probe) for r in resources) for probe in probes):
            continue
        if s.get("Condition", wanted["Condition"]) == wanted["Condition"]:
            return True
    return False


def _targets(org, account: str) -> list[str]:
    """The account, then each parent up to the root."""
    targets, child = [account], account
    while True:
        (parent,) = retries.call(org.list_parents, ChildId=child)["Parents"][:1]
        targets.append(parent["Id"])
        if parent["Type"] == "ROOT":
            return targets
        child = parent["Id"]


def _rcps(org, target: str) -> list[str]:
    """The ids of the customer-managed RCPs attached to ``target``."""
    out: list[str] = []
    kwargs: dict[str, Any] = {"TargetId": target, "Filter": RCP}
    while True:
        page = retries.call(org.list_policies_for_target, **kwargs)
        out += [p["Id"] for p in page["Policies"] if not p.get("AwsManaged")]
        if not page.get("NextToken"):
            return out
        kwargs["NextToken"] = page["NextToken"]


def _unknown(exc: Exception, account: str) -> Perimeter:
    code = retries.error_code(exc) or type(exc).__name__
    return Perimeter(
        UNKNOWN,
        f"these credentials cannot read AWS Organizations ({code})",
        "in the organization's management account (or as its delegated administrator) run "
        f"`aws organizations list-policies-for-target --target-id {account} --filter {RCP}` "
        "for the account and for each parent `aws organizations list-parents --child-id ID` "
        "names up to the root, and look for the statement `finetune infra print --policy "
        "perimeter` prints.",
    )


def _attach(account: str) -> str:
    return (
        "from the organization's management account, with resource control policies enabled: "
        f"`finetune infra print --policy perimeter --account {account} > perimeter.json`, "
        f"`aws organizations create-policy --type {RCP} --name finetune-run-role-perimeter "
        "--description 'only AWS services assume finetune run roles' --content "
        "file://perimeter.json`, then `aws organizations attach-policy --policy-id ID "
        f"--target-id {account}`. Until then a run role minted to trust another principal "
        "can be assumed by it (`finetune infra check` lists such roles)."
    )


def _safe(text: str) -> str:
    """An id as AWS formats it, else a placeholder: nothing else of the API's reaches the
    terminal."""
    return text if text.startswith("the account ") or _ID.fullmatch(text) else "(an odd id)"


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _glob(pattern: str, text: str, ignore_case: bool = False) -> bool:
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in str(pattern))
    return re.fullmatch(rx, text, re.I if ignore_case else 0) is not None
