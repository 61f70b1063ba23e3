"""The command line as a user meets it: help everywhere, instant start, clear failures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from finetune.cli import COMMANDS, app

HEAVY = (
    "boto3", "botocore", "sagemaker", "torch", "torchvision", "mxnet", "gluoncv", "matplotlib",
    "moto", "numpy", "PIL", "rich",
)  # fmt: skip


def _commands(cmd, path=(), parent=None):
    yield path, cmd
    if hasattr(cmd, "list_commands"):  # a group (typer vendors its own click classes)
        ctx = typer.Context(cmd, info_name=path[-1] if path else "finetune", parent=parent)
        for name in cmd.list_commands(ctx):  # the root loads each command as it is asked for
            yield from _commands(cmd.get_command(ctx, name), (*path, name), ctx)


def test_every_command_has_help_text():
    root = get_command(app)
    seen = 0
    for path, cmd in _commands(root):
        assert (cmd.help or "").strip(), f"`finetune {' '.join(path)}` has no help text"
        for param in cmd.params:
            if param.param_type_name == "option" and param.name != "help":
                assert param.help, f"option {param.opts} of `{' '.join(path)}` has no help"
        res = CliRunner().invoke(app, [*path, "--help"])
        assert res.exit_code == 0 and "Usage" in res.output
        seen += 1
    assert seen >= 4


def test_the_help_table_says_what_each_command_says():
    root = get_command(app)
    ctx = typer.Context(root, info_name="finetune")
    for name, (_, short_help) in COMMANDS.items():
        assert short_help == root.get_command(ctx, name).get_short_help_str(limit=10**6), name


def test_root_help_imports_no_command():
    code = (
        "import sys\n"
        "from finetune.cli import app\n"
        "try:\n"
        "    app(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('finetune.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Planning and prices:" in out.stdout  # the listing was printed
    assert out.stdout.splitlines()[-1] == "['finetune.cli._render']"


def test_an_unknown_command_is_refused_with_the_nearest_names():
    res = CliRunner().invoke(app, ["lanch"])
    assert res.exit_code == 2
    assert "No such command 'lanch'. Did you mean 'launch', 'plan'?" in res.output


def test_cli_import_is_light():
    """Importing the command line, and then every module of it (each imports its own
    dependencies at the top), imports none of the heavy packages: a command imports them when
    it runs."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import finetune.cli\n"
        f"heavy = {HEAVY!r}\n"
        "root = [m for m in heavy if m in sys.modules]\n"
        "names = [m.name for m in pkgutil.iter_modules(finetune.cli.__path__)]\n"
        "for name in names:\n"
        "    importlib.import_module(f'finetune.cli.{name}')\n"
        "print(json.dumps([root, [m for m in heavy if m in sys.modules], names]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    root, every, names = json.loads(out.stdout)
    assert root == [] and every == [], (root, every)
    assert {"launch", "plan", "runs", "_follow", "_render"} <= set(names)


def test_python_dash_m_and_version():
    out = subprocess.run(
        [sys.executable, "-m", "finetune", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip()


def test_prepare_folder_via_cli(image_folder, tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "prepare",
            "folder",
            str(image_folder),
            "--out",
            str(tmp_path / "o"),
            "--resize",
            "32",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    m = json.loads(res.output)
    assert m["name"] == "shapes" and m["params"]["val_ratio"] == 0.2
    assert m["splits"]["val"]["per_class"] == [3] * 8  # 20 % of 16, rounded


def test_prepare_default_out_is_in_the_data_dir(image_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("FINETUNE_DATA_DIR", str(tmp_path / "dd"))
    res = CliRunner().invoke(app, ["prepare", "folder", str(image_folder), "--resize", "32"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "dd" / "datasets" / "shapes" / "manifest.json").is_file()


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["prepare", "folder", "/nonexistent/images"], 3, "does not exist"),
        (
            ["prepare", "folder", "{root}", "--val-ratio", "0.2", "--train-per-class", "3"],
            3,
            "exactly one of",
        ),
        (["prepare", "folder", "{root}", "--resize", "-1"], 2, "--resize"),
        (["prepare", "folder", "{root}", "--train-per-class", "99"], 3, "lower --train-per-class"),
        (["prepare", "caltech256", "--source", "/nonexistent.tar"], 3, "does not exist"),
        (["test-io", "{tmp}"], 3, "not a prepared dataset"),
        (["demo", "--engine", "jax", "--dir", "{tmp}"], 2, 'unknown engine "jax"'),
        (["demo", "--classes", "13", "--dir", "{tmp}"], 2, "has 12 shapes of its own"),
    ],
)
def test_bad_input_gets_a_message_and_an_exit_code(args, code, text, image_folder, tmp_path):
    args = [a.format(root=image_folder, tmp=tmp_path) for a in args]
    res = CliRunner().invoke(
        app, [*args, "--out", str(tmp_path / "o")] if "prepare" in args else args
    )
    assert res.exit_code == code, res.output
    assert text in res.output and "To fix:" in res.output


def test_test_io_reads_the_dataset(tiny_dataset):
    res = CliRunner().invoke(
        app, ["test-io", str(tiny_dataset), "--batch-size", "8", "--data-shape", "32", "--json"]
    )
    assert res.exit_code == 0, res.output
    r = json.loads(res.output[res.output.index("{") :])
    assert r["images"] >= 8 * 7 and r["images_per_second"] > 0


def test_test_io_prefers_the_prepared_dataset_and_fits_small_sets(
    tiny_dataset, tmp_path, monkeypatch
):
    import os
    import shutil

    from finetune import settings

    shutil.copytree(tiny_dataset, settings.get().datasets_dir / "shapes")
    (tmp_path / "shapes").mkdir()  # the images a user prepared from, in the current folder
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["test-io", "shapes", "--split", "val", "--data-shape", "32"])
    assert res.exit_code == 0, res.output
    assert f"using the prepared dataset {settings.get().datasets_dir / 'shapes'}" in res.output
    assert "batch 16 (not 32: the split is small)" in res.output  # 48 images: 2 warm-up + 1
    res = CliRunner().invoke(app, ["test-io", "shapes", "--json", "--data-shape", "32"])
    r = json.loads(res.stdout)
    assert (r["batch_size"], r["asked_batch_size"]) == (26, 32)  # 80 train images
    # MXNet decodes with at most max(cores / 2 - 1, 1) threads whatever it is asked for
    assert r["asked_threads"] == os.cpu_count()
    assert r["threads"] == min(r["asked_threads"], max(os.cpu_count() // 2 - 1, 1))
    missing = CliRunner().invoke(app, ["test-io", "./shapes"])  # a path means the folder
    assert missing.exit_code == 3 and "not a prepared dataset" in missing.output


def test_help_lists_commands_in_the_order_of_the_work_in_named_groups():
    out = subprocess.run(
        [sys.executable, "-m", "finetune", "--help"], capture_output=True, text=True, check=True
    ).stdout
    listing = out[out.index("\nData:\n") :].splitlines()
    names = [line.split()[0] for line in listing if line.startswith("  ") and line[2] != " "]
    expected = ["prepare", "test-io", "launch", "runs", "cost-report", "plan", "sweep", "prices"]
    assert names[: len(expected)] == expected, out
    assert names.index("predict") < names.index("recipes") < names.index("demo"), out
    for panel in ("Data:", "Training:", "Planning and prices:", "Settings and AWS set-up:"):
        assert f"\n{panel}\n" in out
    root = get_command(app)
    listed = root.list_commands(typer.Context(root, info_name="finetune"))
    assert sorted(names) == sorted(listed), "a command is missing"
