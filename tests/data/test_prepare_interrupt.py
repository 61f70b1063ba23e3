"""Ctrl-C during `finetune prepare` (SIGINT to the whole process group, as a terminal sends
it): the command ends within seconds, leaves no process behind and no lock held, and the
next run works."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from finetune.data.synth import SynthSpec, generate


@pytest.fixture(scope="module")
def many_images(tmp_path_factory) -> Path:
    """4 classes x 250 JPEGs (shorter side 64-160 px): enough encoding for a Ctrl-C to land
    in. 25 drawn per class, each copied ten times under its own name: prepare encodes every
    file all the same, and drawing all 1000 cost ~2.9 CPU-s (the copies ~0.1 s)."""
    base = tmp_path_factory.mktemp("many")
    generate(base / "drawn", SynthSpec(classes=4, per_class=25, min_side=64, max_side=160))
    root = base / "imgs"
    for cls in sorted((base / "drawn").iterdir()):
        (root / cls.name).mkdir(parents=True)
        for image in sorted(cls.iterdir()):
            for copy in range(10):
                shutil.copyfile(image, root / cls.name / f"{image.stem}_{copy}{image.suffix}")
    return root


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _states(pgid: int) -> str:
    """pid, state, kernel wait channel and command of each process in group ``pgid``."""
    rows = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if not entry.name.isdigit() or int(stat[2]) != pgid:
                continue
            wchan = (entry / "wchan").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except (OSError, ValueError, IndexError):
            continue
        rows.append(f"  {entry.name} {stat[0]} {wchan or '-'} {cmd}")
    return "\n".join(rows) or "  (none left)"


def _parent(proc_entry: Path) -> int | None:
    """The parent pid of a /proc/PID entry; None once it is gone."""
    try:
        return int((proc_entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _lock_is_free(out: Path) -> bool:
    import fcntl

    lock = out / ".prepare.lock"
    if not lock.exists():
        return True
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
    return True


def _prepare(root: Path, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "finetune", "prepare", "folder", str(root), "--out", str(out)]
    return subprocess.Popen(
        [*cmd, "--resize", "48", "--workers", "2", "--json"],
        env=dict(os.environ, PYTHONFAULTHANDLER="1"),  # SIGABRT prints every thread's stack
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job has
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)


@pytest.mark.slow  # many prepare processes, each interrupted: ~60 s here
def test_sigint_at_random_moments_ends_everything(many_images, tmp_path):
    """Early attempts interrupt at any moment from the start (even while Python loads);
    late ones once encoding has begun, where our code must also end without a traceback."""
    rng = random.Random(os.getpid() ^ int(time.time()))
    for attempt in range(16):
        out = tmp_path / f"o{attempt}"
        late = attempt % 2 == 1
        proc = _prepare(many_images, out)
        if late:
            _wait_for(out / ".prepare-staging", proc)
        time.sleep(rng.uniform(0.0, 1.2 if late else 2.0))
        for _ in range(rng.randint(1, 3)):  # impatient users press Ctrl-C more than once
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                break
            time.sleep(rng.uniform(0.0, 0.2))
        try:
            _, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            states = _states(proc.pid)  # where each process of the group is stuck, then
            with contextlib.suppress(ProcessLookupError):  # the Python stacks of them all
                os.killpg(proc.pid, signal.SIGABRT)
            time.sleep(1)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            pytest.fail(f"attempt {attempt} (late={late}): prepare did not end within 15 s of "
                        f"Ctrl-C; processes:\n{states}\nstderr:\n{err[-8000:]}")  # fmt: skip
        deadline = time.monotonic() + 5
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _group_alive(proc.pid), f"attempt {attempt}: a worker outlived prepare"
        assert _lock_is_free(out), f"attempt {attempt}: the prepare lock is still held"
        if late:
            assert "Traceback" not in err, err
    done = subprocess.run(
        [sys.executable, "-m", "finetune", "prepare", "folder", str(many_images), "--out",
         str(out), "--resize", "48", "--workers", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (out / ".prepare-staging").exists()


@pytest.mark.slow  # two prepare processes: ~14 s here
def test_sigkill_during_prepare_then_again(tmp_path):
    """Issue 34, item 6 (probe): SIGKILL (no handler runs) while prepare encodes, then the
    same command again: it takes the dead run's lock and staging over and publishes a whole
    dataset, every image once."""
    from finetune.data import manifest as mf

    root = tmp_path / "imgs"
    generate(root, SynthSpec(classes=4, per_class=60, min_side=64, max_side=160))
    out = tmp_path / "out"
    proc = _prepare(root, out)
    _wait_for(out / ".prepare-staging", proc)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    done = subprocess.run(
        [sys.executable, "-m", "finetune", "prepare", "folder", str(root), "--out", str(out),
         "--resize", "48", "--workers", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert not (out / ".prepare-staging").exists() and _lock_is_free(out)
    manifest = mf.load(out)
    assert sum(s.count for s in manifest.splits.values()) == 240 and manifest.skipped == []


@pytest.mark.slow  # one prepare process and a killed worker: seconds
def test_a_worker_killed_from_outside_ends_prepare_with_what_to_do(many_images, tmp_path):
    """An encoding worker killed while prepare runs (the kernel's OOM killer, a stray
    `kill`): prepare says so and what to do, exits non-zero at once, publishes nothing and
    leaves no process or lock behind (a pool would have waited forever for its tasks)."""
    out = tmp_path / "out"
    proc = _prepare(many_images, out)
    _wait_for(out / ".prepare-staging", proc)
    deadline = time.monotonic() + 30  # the staging folder comes before the workers
    workers: list[int] = []
    while not workers and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
        workers = [
            int(e.name)
            for e in Path("/proc").iterdir()
            if e.name.isdigit() and _parent(e) == proc.pid
        ]
    assert workers, _states(proc.pid)
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "image-encoding worker" in err and "To fix: run the same command again" in err, err
    assert "Traceback" not in err, err
    assert not (out / "manifest.json").exists() and _lock_is_free(out)
    deadline = time.monotonic() + 5
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(proc.pid), _states(proc.pid)
