"""One secret screen for everything a run sends away: hyperparameters, environment variables,
the plan stored next to the run (EC2's plan.json). Every cloud backend calls it before it
uploads or sends anything: what is sent is readable by whoever may describe the job or read
the run's prefix, so credentials reach a run through its role (or AWS Secrets Manager), never
as values. A finding names where the value is and what it looks like, never the value.

Shapes recognised: PATTERNS (by name); 40-character AWS secret access keys (base64 alphabet
with mixed case and a digit, / or +: hex-only strings such as SHA-1 digests are not secrets);
HTTP Basic credentials (decoded: user:password); a W&B key (40 hex) only beside a W&B name;
``name=value`` inside a text under a secret-sounding name (``api_key=...``); and under such a
name (HF_TOKEN, DB_PASSWORD, api_key ...) any non-empty value, in flat maps and in documents.
Every pattern is linear in the text's length (tests/security/test_secret_screen_linear.py).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from finetune.errors import UsageError

_START = r"(?<![A-Za-z0-9])"  # a token starts here, not inside a longer word
PATTERNS = {
    "an AWS access key id": re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    "a private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----"),
    "a Hugging Face token": re.compile(_START + r"hf_[A-Za-z0-9]{30,}"),
    "an API key (sk-...)": re.compile(_START + r"sk-(?=[\w-]{0,64}\d)[A-Za-z0-9_-]{20,}"),
    "a GitHub token": re.compile(_START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{50,})"),
    "a Slack token": re.compile(_START + r"xox[abprse]-[A-Za-z0-9-]{10,}"),
    # header.payload. -- the lookbehind starts one try per [\w-] run, so a long run of
    # "eyJ-" costs one pass, not one per "eyJ" (linear: docs/decisions/161-secret-screen.md)
    "a JSON web token": re.compile(r"(?<![\w-])(?=[\w-]*+\.[\w-]{10,}+\.)[\w-]*?\beyJ[\w-]{10}"),
    "a password in a URL": re.compile(r"://[^/\s:@]+:[^/\s@]+@"),
    # a token as the whole user part (https://TOKEN@host): long, with letters and digits --
    # a user name such as git@ or alice@ is short or has no digit
    "a token in a URL": re.compile(r"://(?=[^/\s:@]*\d)(?=[^/\s:@]*[A-Za-z])[^/\s:@]{16,}@"),
    "a GitLab token": re.compile(
        _START + r"gl(?:pat|dt|rt|ptt|ft|cbt|imt|oas|soat|agent)-[A-Za-z0-9_-]{20,}"
    ),
    "a Google API key": re.compile(_START + r"AIza[0-9A-Za-z_-]{35}"),
    "a Google OAuth token": re.compile(_START + r"ya29\.[0-9A-Za-z_-]{20,}"),
    "a Stripe key": re.compile(_START + r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}"),
    "a Stripe webhook secret": re.compile(_START + r"whsec_[0-9A-Za-z]{20,}"),
    "an Azure key or connection string": re.compile(
        r"(?i)(?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*[A-Za-z0-9+/%]{16,}"
    ),
    "an Azure SAS signature": re.compile(r"[?&]sig=[A-Za-z0-9%+/]{20,}"),
    "a Slack webhook": re.compile(
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{8,}"
    ),  # tokens training code often holds: MLflow-on-Databricks, PyPI and npm tokens, an
    # Authorization header's bearer token, and an AWS session token by its own shape (its
    # base64 starts the same)
    "a Databricks token": re.compile(_START + r"dapi[0-9a-f]{32}(?:-\d+)?"),
    "a PyPI token": re.compile(_START + r"pypi-[A-Za-z0-9_-]{50,}"),
    "an npm token": re.compile(_START + r"npm_[A-Za-z0-9]{36}"),
    "a bearer token": re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/=-]{16,}"),
    "an AWS session token": re.compile(
        r"(?<![A-Za-z0-9/+])(?:IQoJb3JpZ2lu|FwoGZXIvYXdz|FQoGZXIvYXdz|AQoDYXdz)[A-Za-z0-9/+=]{80,}"
    ),
    # shapes that need no secret-sounding name around them (security review, S5-8)
    "an Azure AD client secret": re.compile(
        r"(?<![\w~.-])[\w~.]{3}\dQ~[\w~.-]{31,34}(?![\w~.-])", re.ASCII
    ),
    "a SendGrid key": re.compile(r"(?<![\w.-])SG\.[\w-]{22}\.[\w-]{43}(?![\w-])", re.ASCII),
    "a Replicate token": re.compile(_START + r"r8_[A-Za-z0-9]{37}(?![A-Za-z0-9])"),
    "a Twilio API key": re.compile(_START + r"SK[0-9a-f]{32}(?![0-9a-fA-F])"),
    # base64 of {"api_address": ...}: a Neptune token (no dots, so not a JWT)
    "a Neptune token": re.compile(r"(?<![A-Za-z0-9+/])eyJhcGlfYWRkcmVzcyI6[A-Za-z0-9+/=]{20,}"),
}
# Basic credentials: base64 of user:password after "Basic" (checked by decoding, below)
_BASIC = re.compile(r"(?i)\bbasic\s++([A-Za-z0-9+/]{8,}+={0,2})(?![A-Za-z0-9+/=])")
# a W&B API key is 40 hex digits, as a SHA-1 is: it counts only beside a W&B name
_HEX40 = re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])")
_WANDB = re.compile(r"wandb|weights.?(?:and|&).?biases", re.I)
# ``name=value`` or ``name: value`` in a text, under a secret-sounding name (api_key=abc)
# (the name may sit anywhere in a word: no prefix to match, which made the search quadratic)
_ASSIGNED = re.compile(
    r"(?i)(?:secret|passw(?:or)?d|pwd|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credentials?)(?:[_-]?(?:key|id|value))?[\"']?\s*[=:]\s*[\"']?"
    r"(?!none\b|null\b|[$<{])[^\s\"',;&]{3,}"
)
# 40 characters of the base64 alphabet standing alone: a candidate AWS secret access key
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_SECRET_LABEL = re.compile(r"secret|password|passwd|credential|key\s*[=:]", re.I)
SECRET_NAMES = re.compile(r"secret|passw|token|api[_-]?key|access[_-]?key|credential", re.I)


@dataclass(frozen=True)
class Finding:
    where: str  # e.g. "environment variable HF_TOKEN", "plan.json at dataset.path"
    looks_like: str


def _looks_like_aws_secret(candidate: str) -> bool:
    """Mixed case and a digit, / or +: random base64. Hex digests, paths and words are not."""
    if re.fullmatch(r"[0-9a-fA-F]{40}", candidate) or "//" in candidate:
        return False
    has_case = re.search(r"[a-z]", candidate) and re.search(r"[A-Z]", candidate)
    return bool(has_case and re.search(r"[0-9/+]", candidate))


def value_kind(text: str) -> str | None:
    """What secret ``text`` looks like, or None. A 40-character candidate counts as an AWS
    secret key when it is the whole value or follows a secret-sounding label."""
    for label, rx in PATTERNS.items():
        if rx.search(text):
            return label
    for m in _AWS_SECRET.finditer(text):
        whole = m.group(0) == text.strip()
        labelled = _SECRET_LABEL.search(text[max(0, m.start() - 40) : m.start()])
        if (whole or labelled) and _looks_like_aws_secret(m.group(0)):
            return "an AWS secret access key"
    if _ASSIGNED.search(text):
        return "a secret (by the name it is assigned to)"
    if any(_user_and_password(m[1]) for m in _BASIC.finditer(text)):
        return "an HTTP Basic credential"
    for m in _HEX40.finditer(text):
        if _WANDB.search(text[max(0, m.start() - 40) : m.start()]):
            return "a W&B API key"
    return None


def _user_and_password(encoded: str) -> bool:
    """Whether ``encoded`` is base64 of 'user:password' (printable text, both parts there)."""
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    user, colon, password = text.partition(":")
    return bool(colon and user and password and text.isprintable())


def named_kind(name: str, text: str) -> str | None:
    """What ``text`` is under the name ``name`` (a key, or a document's dotted path) beyond
    value_kind: 40 hex under a W&B name (WANDB_KEY, wandb.key) is its API key; a SHA-1
    elsewhere is not."""
    if _WANDB.search(name) and _HEX40.search(text):
        return "a W&B API key"
    return None


def scan_map(kind: str, values: Mapping[str, object]) -> list[Finding]:
    """Findings in a flat name -> value map (hyperparameters, environment variables)."""
    found = []
    for key, value in values.items():
        text = value if isinstance(value, str) else json.dumps(value)
        label = value_kind(text) or named_kind(str(key), text)
        if label is None and SECRET_NAMES.search(str(key)) and text.strip():
            label = "a secret (by its name)"
        if label:
            found.append(Finding(f"{kind} {key}", label))
    return found


def scan_document(name: str, doc: object, path: str = "") -> list[Finding]:
    """Findings in every string of a JSON-like document (e.g. the plan), by their path."""
    if isinstance(doc, Mapping):
        return [f for k, v in doc.items() for f in scan_document(name, v, _join(path, k))]
    if isinstance(doc, (list, tuple)):
        return [f for i, v in enumerate(doc) for f in scan_document(name, v, _join(path, i))]
    key = path.rsplit(".", 1)[-1]
    label = (value_kind(doc) or named_kind(path, doc)) if isinstance(doc, str) else None
    if label is None and isinstance(doc, str) and doc.strip() and SECRET_NAMES.search(key):
        label = "a secret (by its name)"
    return [Finding(f"{name} at {path or '(top)'}", label)] if label else []


def _join(path: str, part: object) -> str:
    return f"{path}.{part}" if path else str(part)


def messages(findings: list[Finding], sent_to: str) -> list[tuple[str, str]]:
    """(what, fix) for each finding: where it is and what it looks like, never the value."""
    return [
        (
            f"{f.where} looks like {f.looks_like}; {sent_to} shows it to anyone allowed to read it",
            "remove it (from the recipe, the overrides or the environment); give the run access "
            "through its role, or read the secret inside the container from AWS Secrets Manager.",
        )
        for f in findings
    ]


class SecretFound(UsageError):
    """A run would carry a secret; nothing was uploaded or sent."""


def refuse(findings: list[Finding], sent_to: str) -> None:
    """Raise SecretFound naming every finding (the run is not started)."""
    if not findings:
        return
    pairs = messages(findings, sent_to)
    if len(pairs) == 1:
        raise SecretFound(pairs[0][0], pairs[0][1])
    what = "values that look like secrets:\n" + "\n".join(f"  - {w}" for w, _ in pairs)
    raise SecretFound(what, pairs[0][1])
