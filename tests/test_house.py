"""The house's rules, held on the source (docs/architecture.md): the trainer sealed, no import
cycles, dependencies imported at the top, files that read on one screen, measurements in
docs/decisions/ rather than in the code."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

FINETUNE = Path(__file__).resolve().parents[1] / "finetune"
SOURCES = sorted(FINETUNE.rglob("*.py"))
MAX_LINES = 300  # a module reads in a sitting (the review's rule since house-1)
MAX_DEFERRED = 40  # own-module imports left inside functions, each saying why
LONG_DOCSTRING = 15  # module docstring lines: longer ones belong in docs/
# the contracts whose docstring is the definition itself
DEFINITIONS = {"train/preprocess.py"}
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _module(path: Path) -> str:
    rel = path.relative_to(FINETUNE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def _imports(tree: ast.AST, path: Path):
    """(node, the absolute module it names) for every import of our own modules."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _module(path).split(".")
                package = package if path.name == "__init__.py" else package[:-1]
                base = ".".join([*package[: len(package) - node.level + 1], base]).strip(".")
            if base.startswith("finetune"):
                yield node, base
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("finetune"):
                    yield node, alias.name


def _parsed():
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        yield path, text, ast.parse(text)


def test_nothing_outside_the_trainer_imports_it():
    """The container's contract is in finetune.contracts; the engines' runtimes are reached
    through finetune.contracts.engine."""
    found = [
        f"{path.relative_to(FINETUNE)}:{node.lineno}"
        for path, _, tree in _parsed()
        if not path.is_relative_to(FINETUNE / "train")
        for node, name in _imports(tree, path)
        if name == "finetune.train" or name.startswith("finetune.train.")
    ]
    assert found == []


def _top_level_graph() -> dict[str, set[str]]:
    known = {_module(p) for p in SOURCES}
    graph: dict[str, set[str]] = {}
    for path, _, tree in _parsed():
        here = _module(path)
        edges = graph.setdefault(here, set())
        module_level = ast.Module(body=[n for n in tree.body if not isinstance(n, ast.If)])
        for node, name in _imports(module_level, path):
            names = (
                [f"{name}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else []
            )
            for target in [*names, name]:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != here:
                    edges.add(target)
                    break
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_between_modules():
    """Module-level imports form no cycle, so any module imports on its own first."""
    assert _cycles(_top_level_graph()) == []


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _says_why(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's line, or above the group of imports it belongs to."""
    if "#" in lines[node.end_lineno - 1]:
        return True
    above = node.lineno - 2
    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def test_own_imports_are_at_the_top_or_say_why_not():
    """An import of our own modules inside a function is the exception: it defers a
    framework's import (torch, MXNet...) or waits for set-up, and its line says so."""
    deferred, silent = [], []
    for path, text, tree in _parsed():
        lines = text.splitlines()
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node, _ in _imports(fn, path):
                where = f"{path.relative_to(FINETUNE)}:{node.lineno}"
                deferred.append(where)
                if not _says_why(lines, node):
                    silent.append(where)
    assert silent == [], "import at the module top, or say in a comment why it waits"
    assert len(set(deferred)) <= MAX_DEFERRED


def _comments(text: str):
    """(line, text) of every comment token."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def test_comments_are_short():
    """Comments say why in a line or two; a longer story goes to docs/decisions/."""
    long = []
    for path, text, _ in _parsed():
        lines = text.splitlines()
        run = 0
        for number, line in enumerate([*lines, ""], start=1):
            run = run + 1 if line.strip().startswith("#") else 0
            if run == 5:
                long.append(f"{path.relative_to(FINETUNE)}:{number - 4}")
    assert long == []


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield node.body[0].lineno, doc


def test_no_measurements_in_the_code():
    """A measured figure (a date, CPU-seconds) lives in docs/decisions/ with its machine and
    the command that reproduces it; the code names the decision file."""
    found = []
    for path, text, tree in _parsed():
        texts = [*_comments(text), *_docstrings(tree)]
        for line, words in texts:
            if "CPU-s" in words or DATE.search(words):
                found.append(f"{path.relative_to(FINETUNE)}:{line}")
    assert found == []


def test_module_docstrings_fit_a_screen():
    long = []
    for path, _, tree in _parsed():
        first = tree.body[0] if tree.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            size = first.end_lineno - first.lineno + 1
            rel = path.relative_to(FINETUNE).as_posix()
            if size >= LONG_DOCSTRING and rel not in DEFINITIONS:
                long.append(f"{rel} ({size} lines)")
    assert long == []


def test_modules_read_in_a_sitting():
    long = [
        f"{p.relative_to(FINETUNE)} ({n})"
        for p in SOURCES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert long == []
