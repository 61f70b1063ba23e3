"""Issue 49, S5-4: no unchecked download path. Every place in finetune/ that fetches over the
network is listed here with the check that holds what it fetches, and the test showing it;
a new fetch fails this test until it is added here, checked. Found by the primitives a
fetch needs (urllib, torch.hub, the MXNet and GluonCV downloaders, requests, raw HTTP) and
by the callers of finetune.download.fetch."""

from __future__ import annotations

import ast
from pathlib import Path

FINETUNE = Path(__file__).resolve().parents[2] / "finetune"
CALLS = {
    "urlopen", "urlretrieve", "load_state_dict_from_url", "download_url_to_file",
    "get_model_file", "HTTPConnection", "HTTPSConnection", "hub.load", "_opener().open",
    "hf_hub_download", "snapshot_download",
}  # fmt: skip
IMPORTS = {("finetune.download", "fetch"), ("mxnet.gluon.utils", "download")}
FETCH = "finetune.download.fetch"
# (file, primitive, what checks what it fetches -- and where that is tested)
FETCHES = [
    ("download.py", "_opener().open",
     "probe (HEAD: a size) and fetch: https, plain http only with the full sha256 known or "
     "from 127.0.0.1, redirects alike; the full sha256 when known, else the name's 8+ hex "
     "prefix, and the digest recorded at the first download after that "
     "(tests/security/test_weights_digest.py, tests/service/test_weights.py)"),
    ("train/engines/torch/weights.py", FETCH,
     "download.fetch with the recipe's sha256 or digests.py's pin (test_weights_digest.py)"),
    ("service/weights.py", FETCH,
     "download.fetch with WeightsSource.sha256, the engine's as above (test_weights_digest.py)"),
    ("train/engines/mxnet/weights.py", "get_model_file",
     "the sha1 finetune ships (checksums.py), checked after (test_weights_pinned.py)"),
    ("train/engines/mxnet/weights.py", "mxnet.gluon.utils.download",
     "the 11k checkpoint over https: both files' sha256 recorded at download and checked on "
     "every use (tests/train/engines/mxnet/test_weights.py)"),
    ("train/engines/torch/hub.py", "hf_hub_download",
     "timm's weights: the hub over https only (127.0.0.1 aside), the file checked against the "
     "sha256 its blob is stored under, or model.weights_sha256 (test_timm.py)"),
    ("data/sources.py", "urlopen",
     "datasets: the published md5/sha512 or --sha256 before anything is extracted"),
    ("catalog/refresh.py", "urlopen", "prices and EUR rates: parsed as data, rows validated"),
    ("backends/ec2/agent/imds.py", "urlopen",
     "the instance metadata service at its fixed link-local address, on the instance"),
]  # fmt: skip


def _name(node: ast.AST) -> str:
    """'urlopen', 'hub.load', '_opener().open', 'requests.get': a call's dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}".lstrip(".")
    if isinstance(node, ast.Call):
        return f"{_name(node.func)}()"
    return ""


def _found() -> set[tuple[str, str]]:
    out = set()
    for path in sorted(FINETUNE.rglob("*.py")):
        rel = path.relative_to(FINETUNE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = _name(node.func)
                tail = {name, name.rsplit(".", 1)[-1], ".".join(name.split(".")[-2:])}
                hits = tail & CALLS or ({name} if name.startswith("requests.") else set())
                out |= {(rel, hit) for hit in hits}
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (node.module, alias.name) in IMPORTS:
                        out.add((rel, f"{node.module}.{alias.name}"))
    return out


def test_every_download_path_is_listed_with_its_check():
    found = _found()
    listed = {(file, primitive) for file, primitive, _ in FETCHES}
    assert found - listed == set(), "a new network fetch: add it here, checked"
    assert listed - found == set(), "listed but gone: remove it here"
