"""Every file or folder of this repository that README.md, infra/README.md or docs/*.md names
exists (issue 22: infra/README.md pointed at a user-data template that had moved).

A name counts as a repository path when it is written as code (`...`) or as a link target and
its first part is one of the repository's top-level entries, or it resolves next to the
document that names it (infra/README.md says `policies/ec2-run-boundary.json`). Placeholders
(NAME, RUN, $VAR, globs) and S3 prefixes are not files of the repository and are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "infra" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_CODE = re.compile(r"`([^`\s]+)`")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
_EXTENSIONS = (".py", ".md", ".json", ".yaml", ".yml", ".sh", ".tmpl", ".toml", ".txt", ".cfg")


def named_paths(text: str, doc: Path) -> list[str]:
    """The repository paths ``doc`` names (see the module docstring)."""
    top = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    out = []
    for token in _CODE.findall(text) + _LINK.findall(text):
        token = token.rstrip(".,:;)")
        if "://" in token or re.search(r"[$*{}<>|=]|\b[A-Z]{2,}[A-Z_]*\b", token):
            continue  # a URL, a variable, a glob or a placeholder such as NAME or RUN
        first = token.removeprefix("./").split("/")[0]
        if first in top and ("/" in token or "." in token):
            out.append(token)
        elif token.endswith(_EXTENSIONS) and (doc.parent / token).exists():
            out.append(token)  # relative to the document: counted, and it exists
        elif token.endswith(_EXTENSIONS) and doc.parent != ROOT and "/" in token:
            out.append(token)  # looks like a path next to the document: must exist
    return out


def _exists(token: str, doc: Path) -> bool:
    return (ROOT / token).exists() or (doc.parent / token).exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_the_docs_name_exists(doc):
    named = named_paths(doc.read_text(), doc)
    missing = [t for t in named if not _exists(t, doc)]
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_check_sees_the_paths_it_must_check():
    infra = ROOT / "infra" / "README.md"
    named = named_paths(infra.read_text(), infra)
    assert "finetune/backends/ec2/userdata.sh.tmpl" in named
    assert "policies/ec2-run-boundary.json" in named
    # the old, wrong name would have been counted and found missing
    old = "`finetune/backends/ec2_userdata.sh.tmpl`"
    assert named_paths(old, infra) == ["finetune/backends/ec2_userdata.sh.tmpl"]
    assert not _exists("finetune/backends/ec2_userdata.sh.tmpl", infra)


def test_the_readmes_layout_lists_every_top_level_package():
    """README.md's Layout names every folder and module at the package's top, so a new room
    cannot go unmentioned."""
    text = (ROOT / "README.md").read_text()
    layout = text[text.index("## Layout") : text.index("## Benchmarks")]
    package = ROOT / "finetune"
    rooms = [
        p.name + ("/" if p.is_dir() else "")
        for p in sorted(package.iterdir())
        if not p.name.startswith(("_", ".")) and (p.is_dir() or p.suffix == ".py")
    ]
    assert len(rooms) > 20  # the walk found the package
    missing = [r for r in rooms if f"finetune/{r}" not in layout]
    assert missing == [], "add them to README.md's Layout"
