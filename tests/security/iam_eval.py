"""A small IAM policy evaluator for the policies finetune ships (test tooling, not a product).

It implements the parts of AWS's evaluation logic those policies use, following the IAM User
Guide ("Policy evaluation logic", "Condition operators"):

- an explicit Deny in any policy wins; otherwise some Allow must match, else implicit deny;
- a permissions boundary caps an identity: both must allow, and a Deny in either denies;
- Action / NotAction match case-insensitively with * and ? wildcards; Resource / NotResource
  match ARNs with * and ? (case-sensitive);
- Condition: every operator block and every key in it must hold; several values for one key
  are OR-ed. Operators: String(Not)Equals, String(Not)Like, Arn(Not)Equals, Arn(Not)Like,
  Numeric(Not)Equals, NumericLessThan(Equals), NumericGreaterThan(Equals), Bool, Null, each
  with the IfExists suffix, and the ForAllValues: / ForAnyValue: prefixes; policy variables
  (${aws:userid}) in condition values take the request's value.
  A key missing from the request fails a positive operator and satisfies a negated one;
  ForAllValues holds for a missing key (AWS's well-known trap), ForAnyValue does not.
- a role's trust policy (``assume_allowed``): within one account, a trust statement naming the
  principal's own ARN (or its service) is enough without an identity Allow; one naming only the
  account root needs an identity Allow too; an explicit Deny in the identity policies wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ALLOW, DENY, IMPLICIT = "allow", "explicit-deny", "implicit-deny"
# The request context of credentials SageMaker obtained for a job (session "SageMaker"): what
# the SageMaker run boundary's OnlyAsSageMakersSession guard needs to see.
AS_SAGEMAKER = {"aws:userid": "AROAEXAMPLEROLEID:SageMaker"}


@dataclass(frozen=True)
class Request:
    """One authorization question: ``action`` on ``resource`` with a request context."""

    action: str
    resource: str
    context: dict = field(default_factory=dict)

    def value(self, key: str) -> list[str] | None:
        """The context values of ``key`` (condition keys are case-insensitive)."""
        for k, v in self.context.items():
            if k.lower() == key.lower():
                return [str(x) for x in v] if isinstance(v, (list, tuple)) else [str(v)]
        return None


def _glob(pattern: str, text: str, ignore_case: bool = False) -> bool:
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, text, re.S | (re.I if ignore_case else 0)) is not None


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _match_one(op: str, wanted: str, got: str) -> bool:
    if op in ("StringEquals", "ArnEquals"):
        return got == wanted if op == "StringEquals" else _glob(wanted, got)
    if op in ("StringLike", "ArnLike"):
        return _glob(wanted, got)
    if op == "StringEqualsIgnoreCase":
        return got.lower() == wanted.lower()
    if op == "Bool":
        return got.lower() == str(wanted).lower()
    if op in _NUMERIC:
        try:
            return _NUMERIC[op](float(got), float(wanted))
        except ValueError:
            return False  # not a number: AWS's numeric operators do not match
    raise ValueError(f"condition operator {op} is not implemented by this evaluator")


_NUMERIC = {
    "NumericEquals": lambda a, b: a == b,
    "NumericLessThan": lambda a, b: a < b,
    "NumericLessThanEquals": lambda a, b: a <= b,
    "NumericGreaterThan": lambda a, b: a > b,
    "NumericGreaterThanEquals": lambda a, b: a >= b,
}

_NEGATED = {
    "NumericNotEquals": "NumericEquals",
    "StringNotEquals": "StringEquals",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _condition(op: str, key: str, wanted, req: Request) -> bool:
    """One key of one operator block."""
    qualifier, _, op = op.rpartition(":")
    if_exists = op.endswith("IfExists")
    op = op.removesuffix("IfExists")
    got = req.value(key)
    wanted = [str(w) if not isinstance(w, bool) else str(w).lower() for w in _listed(wanted)]
    wanted = [_variables(w, req) for w in wanted]
    if op == "Null":  # "true": the key must be absent; "false": present
        return (got is None) == (wanted[0].lower() == "true")
    if got is None:
        return if_exists or qualifier == "ForAllValues" or op in _NEGATED
    base = _NEGATED.get(op, op)

    def hit(value: str) -> bool:
        found = any(_match_one(base, w, value) for w in wanted)
        return not found if op in _NEGATED else found

    if qualifier == "ForAllValues":
        return all(hit(v) for v in got)
    if qualifier == "ForAnyValue":
        return any(hit(v) for v in got)
    if len(got) != 1:
        raise ValueError(f"{key} is multivalued: qualify the operator (ForAllValues/ForAnyValue)")
    return hit(got[0])


def _variables(text: str, req: Request) -> str:
    """Policy variables (${aws:userid}) replaced by the request's values; one the request
    lacks matches nothing (AWS: the condition does not match)."""

    def value(m: re.Match) -> str:
        got = req.value(m.group(1))
        return got[0] if got else "\x00no-such-key\x00"

    return re.sub(r"\$\{([^}]+)\}", value, text)


def _applies(stmt: dict, req: Request) -> bool:
    if "Action" in stmt:
        if not any(_glob(a, req.action, True) for a in _listed(stmt["Action"])):
            return False
    elif any(_glob(a, req.action, True) for a in _listed(stmt["NotAction"])):
        return False
    if "Resource" in stmt:
        if not any(_glob(r, req.resource) for r in _listed(stmt["Resource"])):
            return False
    elif any(_glob(r, req.resource) for r in _listed(stmt["NotResource"])):
        return False
    return all(
        _condition(op, key, wanted, req)
        for op, block in stmt.get("Condition", {}).items()
        for key, wanted in block.items()
    )


def decide(policies: list[dict], req: Request) -> str:
    """ALLOW, DENY (an explicit Deny matched) or IMPLICIT (nothing allows it)."""
    matched = [s for p in policies for s in p["Statement"] if _applies(s, req)]
    if any(s["Effect"] == "Deny" for s in matched):
        return DENY
    return ALLOW if any(s["Effect"] == "Allow" for s in matched) else IMPLICIT


def allowed(identity: list[dict] | dict, req: Request, boundary: dict | None = None) -> bool:
    """Whether a principal with ``identity`` policies (and ``boundary``) may make ``req``."""
    policies = identity if isinstance(identity, list) else [identity]
    if decide(policies, req) != ALLOW:
        return False
    return boundary is None or decide([boundary], req) == ALLOW


def _trusts(stmt: dict, principal: str) -> bool:
    """Whether a trust statement's Principal names ``principal`` (an ARN or a service name)
    itself: "*", the ARN, or the service; the account root is handled by the caller."""
    named = stmt.get("Principal")
    if named == "*":
        return True
    values = [v for vs in (named or {}).values() for v in _listed(vs)]
    return "*" in values or principal in values


def assume_allowed(identity: list[dict], trust: dict, principal: str, req: Request) -> bool:
    """Whether ``principal`` (an IAM ARN with ``identity`` policies, or a service name with
    none) of the role's own account may make ``req`` (sts:AssumeRole and kin) on a role whose
    trust policy is ``trust``."""
    trust = {"Statement": [{"Resource": "*", **s} for s in trust["Statement"]]}  # the role
    if decide(identity, req) == DENY or decide([trust], req) == DENY:
        return False
    matched = [s for s in trust["Statement"] if s["Effect"] == "Allow" and _applies(s, req)]
    if any(_trusts(s, principal) for s in matched):
        return True
    account = principal.split(":")[4] if principal.startswith("arn:") else None
    root = f"arn:aws:iam::{account}:root"
    by_account = any(root in [v for vs in s.get("Principal", {}).values() for v in _listed(vs)]
                     for s in matched if isinstance(s.get("Principal"), dict))  # fmt: skip
    return by_account and decide(identity, req) == ALLOW
