"""Issue 49, S5-8: credential shapes the screen missed when no secret-sounding name stands
beside them -- a W&B key, an Azure AD client secret, HTTP Basic credentials, SendGrid,
Replicate, Twilio and Neptune tokens -- each with a near miss that must stay unflagged, so
that false positives stay rare. Every secret is synthetic and assembled at run time."""

from __future__ import annotations

import base64

import pytest

from finetune.backends import secretscan

_NOISE = "Ab3De5Gh7Jk9Mn2Pq4St6Vw8Yz0Bc1Ef3Hi5Kl7No9Qr2Tu4Wx6Za8" * 2  # made-up
HEX = "0123456789abcdef" * 3  # a W&B key and a SHA-1 digest look alike: 40 lowercase hex


def _noise(n: int) -> str:
    return _NOISE[:n]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


NEPTUNE = _b64('{"api_address":"https://app.neptune.ai","api_url":"https://app.neptune.ai",'
               '"api_key":"' + _noise(40) + '"}')  # fmt: skip
FOUND = [
    ("W&B key after wandb login", "wandb login " + HEX[:40], "a W&B API key"),
    ("W&B key after WANDB=", "WANDB=" + HEX[:40], "a W&B API key"),
    ("Azure AD client secret", "Ab3" + "8Q~" + _noise(34), "an Azure AD client secret"),
    ("Azure AD secret in JSON", '{"cs": "x.~' + "7Q~" + _noise(31) + '"}',
     "an Azure AD client secret"),
    ("Authorization: Basic", "Authorization: Basic " + _b64("svc-build:" + _noise(12)),
     "an HTTP Basic credential"),
    ("curl's basic header", "-H 'authorization: basic " + _b64("u:" + _noise(8)) + "'",
     "an HTTP Basic credential"),
    ("SendGrid key", "SG" + "." + _noise(22) + "." + _noise(43), "a SendGrid key"),
    ("Replicate token", "r8" + "_" + _noise(37), "a Replicate token"),
    ("Twilio API key", "SK" + HEX[:32], "a Twilio API key"),
    ("Neptune token", NEPTUNE, "a Neptune token"),
]  # fmt: skip
NOT_FOUND = [
    ("a SHA-1 digest alone", HEX[:40]),
    ("a commit in prose", "built from commit " + HEX[:40]),
    ("39 hex digits after wandb", "wandb login " + HEX[:39]),
    ("Azure-like, too short", "Ab3" + "8Q~" + _noise(30)),
    ("Q~ without its digit", "Abc" + "XQ~" + _noise(34)),
    ("basic in prose", "basic augmentation: random crops and flips"),
    ("Basic without user:password", "Basic " + _b64("no colon in here")),
    ("Basic user without password", "Basic " + _b64("alice:")),
    ("SendGrid-like, one short", "SG" + "." + _noise(22) + "." + _noise(42)),
    ("Replicate-like, one short", "r8" + "_" + _noise(36)),
    ("Twilio-like, one short", "SK" + HEX[:31]),
    ("an SKU", "SKU-" + HEX[:32]),
    ("Neptune's prefix alone", NEPTUNE[:24]),
]


@pytest.mark.parametrize("value, kind", [c[1:] for c in FOUND], ids=[c[0] for c in FOUND])
def test_new_shapes_are_found(value, kind):
    assert secretscan.value_kind(value) == kind
    assert secretscan.value_kind(f"note: {value} end") == kind  # inside a text too


@pytest.mark.parametrize("value", [c[1] for c in NOT_FOUND], ids=[c[0] for c in NOT_FOUND])
def test_their_near_misses_are_not_secrets(value):
    assert secretscan.value_kind(value) is None


def test_a_w_and_b_key_is_found_by_its_name_and_a_digest_is_not():
    found = secretscan.scan_map("environment variable", {"WANDB_KEY": HEX[:40],
                                                          "GIT_COMMIT": HEX[:40],
                                                          "WANDB_PROJECT": "shapes"})  # fmt: skip
    assert [(f.where, f.looks_like) for f in found] == [
        ("environment variable WANDB_KEY", "a W&B API key")
    ]
    doc = {"runtime": {"wandb": {"key": HEX[:40], "entity": "team"}}, "dataset": HEX[:40]}
    (f,) = secretscan.scan_document("plan.json", doc)  # the digest under "dataset" is not
    assert (f.where, f.looks_like) == ("plan.json at runtime.wandb.key", "a W&B API key")
