"""Recipe files and overrides a careless or hostile user hands us: binary bytes, UTF-16 text,
100k nested brackets -- each a clear ConfigError from `recipes validate` and `launch`, never
a UnicodeDecodeError or RecursionError; UTF-16 with a byte-order mark is read (YAML allows
it). Also a dataset manifest of 100k nested brackets."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from finetune.cli import app

DEEP = "[" * 100_000 + "]" * 100_000


def _run(*args):
    return CliRunner().invoke(app, list(args))


def _clear(res, code, *phrases):
    assert res.exit_code == code, res.output
    assert isinstance(res.exception, SystemExit), res.exception  # no traceback
    for phrase in phrases:
        assert phrase in res.output, res.output


@pytest.fixture
def recipe_text():
    res = _run("recipes", "show", "smoke-resnet18")
    assert res.exit_code == 0
    return res.stdout


@pytest.mark.parametrize(
    "kind,phrase",
    [
        ("binary", "is not a text file in UTF-8"),
        ("utf16-no-bom", "NUL characters"),
        ("deep", "nests lists or mappings too deeply"),
        ("deep-mapping", "nests lists or mappings too deeply"),
    ],
)
def test_unreadable_recipes_are_refused_clearly(tmp_path, recipe_text, tiny_dataset, kind, phrase):
    body = {
        "binary": bytes(range(256)) * 8,
        "utf16-no-bom": recipe_text.encode("utf-16-le"),
        "deep": ("name: deep\nschedule:\n  steps: " + DEEP).encode(),
        "deep-mapping": ("a: " + "{a: " * 100_000 + "1" + "}" * 100_000).encode(),
    }[kind]
    path = tmp_path / f"{kind}.yaml"
    path.write_bytes(body)
    _clear(_run("recipes", "validate", str(path)), 4, phrase, "To fix:")
    _clear(_run("launch", str(path), "--dataset", str(tiny_dataset), "--dry-run"), 4, phrase)


def test_utf16_with_a_bom_is_read(tmp_path, recipe_text):
    path = tmp_path / "u16.yaml"
    path.write_text(recipe_text, encoding="utf-16")  # Python writes the BOM
    res = _run("recipes", "validate", str(path))
    assert res.exit_code == 0 and "ok" in res.output, res.output


def test_a_deep_override_is_refused(tiny_dataset):
    res = _run("launch", "smoke-resnet18", "--dataset", str(tiny_dataset), "--dry-run",
               f"steps={DEEP}")  # fmt: skip
    _clear(res, 4, "nested too deeply", "To fix:")


def test_a_deep_manifest_is_refused(tmp_path, tiny_dataset):
    copy = tmp_path / "ds"
    shutil.copytree(tiny_dataset, copy)
    (copy / "manifest.json").write_text(DEEP)
    res = _run("launch", "smoke-resnet18", "--dataset", str(copy), "--dry-run")
    _clear(res, 3, "not a valid dataset manifest", "nested too deeply", "To fix:")
