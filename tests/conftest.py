"""Shared fixtures: an isolated data directory per test and small generated datasets."""

from __future__ import annotations

import gc
import os
import shutil
import time
from pathlib import Path

import pytest

from finetune.data.synth import SynthSpec, generate


def _share_the_cores() -> None:
    """Each pytest-xdist worker gets its share of the cores for intra-op threads, inherited by
    the trainers it spawns: torch and MXNet otherwise each take every core, and N workers x
    all cores of spinning OpenMP threads make every training several times slower. The
    product's own default (all cores) stays; only an OMP_NUM_THREADS set here overrides it."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        os.environ["OMP_NUM_THREADS"] = str(max(1, cores // workers))


_share_the_cores()


@pytest.fixture(scope="session", autouse=True)
def _no_process_or_lock_left_behind():
    """After this session's tests (per xdist worker: its own session), no process started
    under this one is still there and no file lock is held by it or by such a process."""
    yield
    gc.unfreeze()  # (_sweep) nothing held by garbage stays out of the collector's reach here
    deadline = time.monotonic() + 10  # a process being terminated may need a moment
    while True:
        kids = _descendants(os.getpid())
        locks = _locks_held_by({os.getpid(), *kids})
        if (not kids and not locks) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not kids, "tests left processes behind:\n" + "\n".join(kids.values())
    assert not locks, "tests left file locks held:\n" + "\n".join(locks)


def _descendants(root: int) -> dict[int, str]:
    """{pid: command line} of every process below ``root`` (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                try:
                    cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes()
                except OSError:
                    cmd = b"?"
                text = cmd.replace(b"\0", b" ").decode(errors="replace")
                found[pid] = f"{pid}: {text}"
                frontier.append(pid)
    return found


def _locks_held_by(pids: set[int]) -> list[str]:
    """/proc/locks entries (flock and POSIX) owned by ``pids``."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    return [line for line in lines if len(line.split()) > 4 and line.split()[4].isdigit()
            and int(line.split()[4]) in pids]  # fmt: skip


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on its test item, so fixtures can see whether their test failed."""
    report = yield
    item.stash.setdefault(_FAILED, False)
    if report.failed:
        item.stash[_FAILED] = True
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _isolated_dirs(request, tmp_path_factory, monkeypatch):
    """Every test gets its own FINETUNE_DATA_DIR/CACHE_DIR/CONFIG and MXNET_HOME; no
    network. The folder goes when the test passes (runs written there hold real models), as
    pytest's ``tmp_path_retention_policy = "failed"`` does for ``tmp_path``."""
    home = isolate(tmp_path_factory, monkeypatch)
    yield
    from finetune import settings

    settings.get.cache_clear()
    if not request.node.stash.get(_FAILED, False):
        shutil.rmtree(home, ignore_errors=True)


def isolate(tmp_path_factory, monkeypatch) -> Path:
    """What ``_isolated_dirs`` does for a test, for a wider-scoped fixture too (with
    ``pytest.MonkeyPatch.context()``): its own data, cache, config and weight folders."""
    base = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("FINETUNE_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("FINETUNE_CACHE_DIR", str(base / "cache"))
    monkeypatch.setenv("FINETUNE_CONFIG", str(base / "config.toml"))  # never the user's file
    monkeypatch.setenv("MXNET_HOME", str(base / "mxnet"))
    monkeypatch.setenv("TORCH_HOME", str(base / "torch"))  # torch hub's weight cache
    # published weights never come from the internet in a test: a closed port on this host
    # (a test that serves weights points this at its own 127.0.0.1 server)
    monkeypatch.setenv("FINETUNE_WEIGHTS_MIRROR", "http://127.0.0.1:9/models")
    monkeypatch.setenv("HF_HOME", str(base / "huggingface"))  # the hub's cache (timm's weights)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # (tests/hubserver.py serves one)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    # onnxruntime otherwise keeps a telemetry SQLite file in ~/.cache open and locked
    monkeypatch.setenv("ORT_DISABLE_TELEMETRY", "1")
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    from finetune import settings

    settings.get.cache_clear()
    return base


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """8 classes x 16 small JPEGs (shorter side 48-96 px), Caltech quirks included."""
    root = tmp_path_factory.mktemp("images") / "shapes"
    generate(root, SynthSpec(classes=8, per_class=16, min_side=48, max_side=96, quirks=True))
    return root


@pytest.fixture(scope="session")
def tiny_dataset(image_folder, tmp_path_factory) -> Path:
    """``image_folder`` prepared at 40 px: 10 train / 6 val images per class."""
    from finetune.data.datasets import prepare_folder

    out = tmp_path_factory.mktemp("prepared") / "shapes"
    prepare_folder(
        image_folder, out, "shapes", dict(train_per_class=10, resize=40, quality=90), workers=1
    )
    return out


def cpu_count() -> int:
    return len(os.sched_getaffinity(0))


@pytest.fixture(scope="session")
def training_image() -> str:
    """The training image, built from the Dockerfile on the container runtime of
    tests/containerhost.py (once for the same inputs); the test is skipped without one."""
    from tests import containerhost

    why = containerhost.runtime_missing()
    if why:
        pytest.skip(why)
    tag, seconds = containerhost.build_image()
    print(f"training image {tag}: " + (f"built in {seconds:.0f} s" if seconds else "already built"))
    return tag


@pytest.fixture(scope="session")
def moto_server():
    """moto's AWS endpoint on 127.0.0.1 (one per test session); yields its URL."""
    import logging
    import socket

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # No stock AMIs: moto's EC2 backend otherwise builds ~22,000 images (each with its snapshot
    # and volume) for every region it starts in, again after every reset -- ~1 s of CPU each
    # time, and ~600,000 objects that every full garbage collection of this worker walks.
    # The tests seed the DLAMIs they mean (tests/backends/ec2/conftest.seed_dlami).
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws(moto_server, monkeypatch):
    """Every boto3 client in this test talks to a freshly reset moto server, never to AWS."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"))
    for key, value in {
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "SAGEMAKER_VALIDATE_ROLE": "false",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return moto_server


def pytest_collection_finish(session):
    """After collection (each xdist worker collects everything: torch, MXNet, moto, botocore
    and every test module are imported by then), every object alive goes into the garbage
    collector's permanent generation (gc.freeze): they live as long as the worker, yet each
    full collection walked all ~2 million of them again. See _sweep for what the tests add."""
    _sweep()


SWEEP_EVERY = 25  # tests (measured: see _sweep)
FULL_EVERY = 10  # sweeps: one full sweep every 250 tests (measured: see _sweep)
_tests_since_sweep = 0
_sweeps = 0


def _sweep() -> None:
    """A collection, then the survivors frozen: between sweeps the collector walks only what
    the last SWEEP_EVERY tests made. The tests build long-lived state as they go (moto's
    backends and bundled data, botocore's loaded service models), and each automatic full
    collection walked all of it. tests/backends/ec2 -m "not slow" on one worker (2-core EPYC,
    2026-11-27; worker CPU-s, of them in full collections): unchanged 144.8 (31.1); frozen
    after collection only 125.1 (27.5); and no stock AMIs (moto_server) 99.4 (19.1); and a
    sweep every 10 tests 96.0 (15.3), every 25 85.2 (10.8), every 50 95.3 (13.5) -- the
    machine's own run-to-run spread is ~10 %.

    Every FULL_EVERY-th sweep first unfreezes everything, so that what has become garbage
    among the frozen objects (a reset moto backend, say) is freed; the others collect only
    what is not frozen. A full sweep walks a worker's whole heap, 1.1-1.7 million objects
    once torch, MXNet, moto and the in-process trainings are in it: 0.7 s each. The whole
    suite, 3 workers on 2 cores (gc.callbacks' CPU-s in collections, all workers; 2026-11-28):
    every sweep full 80.6 (47.7 of it in the sweeps), one in ten 39.2 (5.9), a sweep after
    every test and one in 250 full 36.8; peak RSS per worker 2.7-3.9 GB in all three."""
    global _sweeps
    if _sweeps % FULL_EVERY == 0:
        gc.unfreeze()
    _sweeps += 1
    gc.collect()
    gc.freeze()


def pytest_runtest_logfinish(nodeid, location):
    global _tests_since_sweep
    _tests_since_sweep += 1
    if _tests_since_sweep >= SWEEP_EVERY:
        _tests_since_sweep = 0
        _sweep()


# Cloud emulations: every test module under these folders runs multi-step flows against moto
# (launch, follow, stop, relaunch, fetch) or spawns trainers and agents through a backend, so
# it is marked `emulation` and left out of the quick tier (`scripts/test.sh --quick`). The
# modules named in PURE build requests and policies without AWS and stay quick.
EMULATION_DIRS = ("backends/ec2", "backends/sagemaker")
PURE = ("test_request.py", "test_validate.py", "test_policy.py", "test_sm_torch_image.py",
        "test_ec2_torch_userdata.py", "test_boot_requirements.py")  # fmt: skip


def _is_emulation(item) -> bool:
    rel = Path(str(item.fspath)).relative_to(Path(__file__).parent).as_posix()
    return rel.startswith(EMULATION_DIRS) and Path(rel).name not in PURE


def pytest_collection_modifyitems(config, items):
    """Marks the cloud emulations; then the long tests first (stable order otherwise): with
    tests spread over workers, a long test that starts last would leave the other worker idle
    while it finishes."""
    for item in items:
        if _is_emulation(item):
            item.add_marker(pytest.mark.emulation)
    long = ("slow", "emulation")

    is_long = {item.nodeid: any(item.get_closest_marker(m) for m in long) for item in items}
    rank: dict[str, int] = {}  # module -> its longest test's place in LONGEST
    for item in items:
        for i, name in enumerate(LONGEST):
            if name in item.nodeid and is_long[item.nodeid]:
                rank[item.module.__name__] = min(i, rank.get(item.module.__name__, i))

    def order(item) -> tuple[int, int]:
        if not is_long[item.nodeid]:
            return (1, 0)
        return (0, rank.get(item.module.__name__, len(LONGEST)))

    items.sort(key=order)  # stable: a module's tests stay together and in their order


# The longest tests by measured duration (`bash scripts/test.sh --durations=40`: 3 workers on
# 2 cores, 2026-11-27), longest first: their modules start before the other long tests, so the
# last test to start is a short one and no worker waits at the end on a minute-long test
# another started late (whole modules move, so their module-scoped fixtures are still built
# once per worker). Only the order depends on this list; a stale entry costs time, never a test.
LONGEST = (
    "test_demo.py::test_demo_pretrains_finetunes",  # 126 s
    "test_signal_stop.py::test_random_sigterm_and_sigkill",  # 93
    "test_trust.py::test_a_256px_set_trains_at_224px",  # 68
    "test_gpu_check.py::test_the_gpu_check_runs_dry_on_a_cpu",  # 48
    "test_ddp.py::test_two_processes_stopped_and_resumed",  # 42
    "test_precision.py::test_gpu_code_paths_learn_checkpoint_and_resume_on_a_cpu[compile]",  # 39
    "test_ec2_boot_emulation.py::test_two_instances_train_one_model_over_gloo",  # 38
    "test_toolkit_emulation.py::test_the_toolkit_trains_our_request",  # 36
    "test_toolkit_signals.py::test_sigterm_to_the_group",  # 29
    "test_spot_resume.py::test_spot_notice_relaunch_resume_with_the_real_trainer",  # 29
    "test_cluster.py::test_two_hosts_train_one_model",  # 27
    "test_prepare_interrupt.py::test_sigint_at_random_moments",  # 24
    "mxnet/test_train.py::test_learns_clearly_above_chance",  # 24
    "test_sweep_local.py::test_a_2x2_local_sweep_survives",  # 24
    "test_backend.py::test_stop_then_resume_continues",  # 22
    "test_backbone_runs.py::test_bicubic_weights",  # 22
    "test_resume.py::test_sigkill_loses_at_most_one",  # 18
)
