"""What every backend agrees on: service/ is the one ledger writer, machines are told apart by
capability, and the constructors take the same arguments."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from finetune.backends import NAMES, backend_class, get_backend, on_this_machine

BACKENDS = Path(__file__).resolve().parents[2] / "finetune" / "backends"


def _from_ledger(path: Path) -> set[str]:
    """What ``path`` imports of finetune.runs.ledger (the module itself, or names from it)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("finetune.runs.ledger")}
        elif isinstance(node, ast.ImportFrom) and node.module == "finetune.runs.ledger":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "finetune.runs":
            found |= {f"finetune.runs.{a.name}" for a in node.names if a.name == "ledger"}
    return found


def test_no_backend_module_opens_the_ledger():
    """Backends report events and charges (Journal, Status); service/ writes them. The row
    type (Run, for annotations) is all a backend may take from the ledger module."""
    modules = sorted(BACKENDS.rglob("*.py"))
    assert len(modules) > 30  # the walk found the backends
    taken = {str(m.relative_to(BACKENDS)): _from_ledger(m) - {"Run"} for m in modules}
    assert {m: names for m, names in taken.items() if names} == {}


def _ledger_readers(path: Path) -> set[str]:
    """The modules of finetune.runs that read the ledger which ``path`` imports."""
    readers = {"finetune.runs.facts", "finetune.runs.views"}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in readers}
        elif isinstance(node, ast.ImportFrom) and node.module in readers:
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.module == "finetune.runs":
            found |= {f"finetune.runs.{a.name}" for a in node.names} & readers
    return found


def test_no_backend_estimate_or_plan_reads_the_ledger_history():
    """The measured history the estimate prefers is read once, by the caller (service/,
    ranking/, sweep/), and handed down: never fetched inside a backend's pre-flight, by the
    estimate itself, or by the plan that carries it."""
    rooms = [BACKENDS, BACKENDS.parent / "estimate", BACKENDS.parent / "plan"]
    modules = sorted(m for room in rooms for m in room.rglob("*.py"))
    assert len(modules) > 40 and any(m.match("plan/estimate.py") for m in modules)
    read = {str(m.relative_to(BACKENDS.parent)): _ledger_readers(m) for m in modules}
    assert {m: names for m, names in read.items() if names} == {}


@pytest.mark.parametrize("name", NAMES)
def test_on_this_machine_is_a_declared_capability(name):
    declared = backend_class(name).capabilities.on_this_machine
    assert on_this_machine(name) is declared
    assert declared is (name == "local")  # today only the local backend trains here


@pytest.mark.parametrize("name", NAMES)
def test_constructors_agree(name):
    params = list(inspect.signature(backend_class(name).__init__).parameters)
    assert params == ["self", "options", "hooks", "poll_seconds"]
    backend = backend_class(name)(poll_seconds=0.25)
    assert backend.poll_seconds == 0.25
    assert backend_class(name)().poll_seconds > 0  # its own default


@pytest.mark.parametrize("name", NAMES)
def test_every_backend_says_its_euro_cap(name):
    """The plan carries the launch's --max-eur, asked of the backend by one typed property."""
    takes = "max_eur" in backend_class(name).Options.model_fields
    assert takes is (backend_class(name).price_book is not None)  # what bills, can be capped
    capped = get_backend(name, {"max_eur": "12.5"} if takes else {})
    assert capped.max_eur == (12.5 if takes else None)
    assert get_backend(name, {}).max_eur is None
    assert backend_class(name)().max_eur is None  # a run's stored options: nothing given


def test_the_local_supervisor_starts_light():
    """`python -m finetune.backends.local.runner` starts at every local run and resume: the
    backends package imports no base (pydantic) on its way (docs/decisions/042)."""
    import subprocess
    import sys

    heavy = ("pydantic", "finetune.backends.base", "torch", "mxnet", "boto3", "numpy")
    code = "import sys, finetune.backends.local.runner; "
    code += f"print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
