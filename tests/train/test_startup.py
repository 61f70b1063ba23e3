"""Garbage collection around a trainer process's start-up (finetune.train.startup), each case
in a fresh interpreter: the trainer's entries defer collection, the end of set-up frees
start-up's garbage, freezes the rest and switches collection back on, once."""

from __future__ import annotations

import subprocess
import sys


def _python(code: str) -> list[str]:
    """The words of the last line ``code`` prints in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()[-1].split()


def test_setup_done_frees_start_up_garbage_freezes_the_rest_and_collects_again():
    out = _python(
        "import gc, weakref\n"
        "from finetune.train import startup\n"
        "startup.defer()\n"
        "class Node: pass\n"
        "a = Node(); a.me = a; gone = weakref.ref(a); del a\n"  # cyclic garbage of start-up
        "kept = [Node() for _ in range(1000)]\n"
        "seen = [gc.isenabled(), gone() is not None]\n"  # nothing collected while deferred
        "startup.setup_done()\n"
        "seen += [gc.isenabled(), gone() is None, gc.get_freeze_count() >= 1000]\n"
        "frozen = gc.get_freeze_count()\n"
        "startup.setup_done()\n"  # once: a second call changes nothing
        "seen.append(gc.get_freeze_count() == frozen)\n"
        "b = Node(); b.me = b; later = weakref.ref(b); del b\n"
        "gc.collect()\n"
        "seen.append(later() is None)\n"  # garbage made after set-up is collected as usual
        "print(*seen)\n"
    )
    assert out == ["False", "True", "True", "True", "True", "True", "True"]


def test_without_defer_setup_done_leaves_the_collector_alone():
    """fit called in-process (tests, a notebook): nothing frozen, collection stays on."""
    out = _python(
        "import gc\n"
        "from finetune.train import startup\n"
        "startup.setup_done()\n"
        "print(gc.isenabled(), gc.get_freeze_count())\n"
    )
    assert out == ["True", "0"]


def test_the_trainer_entries_defer_collection_before_the_engines_are_imported(tmp_path):
    """`python -m finetune.train --help`, and the SageMaker toolkit's program on an empty
    /opt/ml tree (it fails: no job), end before any set-up: collection is still deferred
    then, and no engine framework was imported first."""
    out = _python(
        "import gc, runpy, sys\n"
        "sys.argv = ['finetune.train', '--help']\n"
        "try:\n"
        "    runpy.run_module('finetune.train', run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    print(stop.code, gc.isenabled(), 'torch' in sys.modules, 'mxnet' in sys.modules)\n"
    )
    assert out == ["0", "False", "False", "False"]
    out = _python(
        "import gc, os\n"
        f"os.environ['FINETUNE_ML_ROOT'] = {str(tmp_path)!r}\n"
        "from finetune.train import sagemaker_entry\n"
        "print(sagemaker_entry.main() != 0, gc.isenabled())\n"
    )
    assert out == ["True", "False"]
    assert (tmp_path / "output" / "failure").is_file()  # it ran, and failed as it says
