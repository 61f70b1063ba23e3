"""Multi-host training through MXNet's parameter server: roles, environment, and two "hosts"
(two process groups on this machine) training one model through the same entrypoint."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from finetune.contracts import container
from finetune.errors import ConfigError
from finetune.train.engines.mxnet import cluster as ps
from tests.train.conftest import Output, hparams, make_tree, start_trainer
from tests.train.recount import recount

HOSTS = ["algo-2", "algo-1"]  # unsorted on purpose: the first *sorted* host schedules


def test_plan_single_host_or_local_kvstore_is_none():
    assert ps.plan(["algo-1"], "algo-1", "dist_sync", environ={}) is None
    assert ps.plan(HOSTS, "algo-1", "device", environ={}) is None


def test_plan_roles_and_environment():
    resolved = []

    def resolve(name):
        resolved.append(name)
        return "10.0.0.1"

    first = ps.plan(HOSTS, "algo-1", "dist_sync", "eth0", environ={}, resolve=resolve)
    second = ps.plan(HOSTS, "algo-2", "dist_device_sync", None, environ={}, resolve=resolve)
    assert resolved == ["algo-1", "algo-1"]
    assert first.child_roles == ("scheduler", "server")
    assert second.child_roles == ("server",)
    assert first.env("scheduler") == {
        "DMLC_ROLE": "scheduler",
        "DMLC_PS_ROOT_URI": "10.0.0.1",
        "DMLC_PS_ROOT_PORT": "9000",
        "DMLC_NUM_SERVER": "2",
        "DMLC_NUM_WORKER": "2",
        "DMLC_INTERFACE": "eth0",
    }
    assert second.env("worker")["DMLC_ROLE"] == "worker"
    assert "DMLC_INTERFACE" not in second.env("worker")


def test_plan_overrides_and_bad_port():
    env = {container.ADDRESS_OVERRIDE_ENV: "127.0.0.1", ps.PORT_ENV: "9123"}

    def no_dns(name):
        raise AssertionError("the override must skip name resolution")

    cluster = ps.plan(HOSTS, "algo-2", "dist_sync", environ=env, resolve=no_dns)
    assert (cluster.root_uri, cluster.port) == ("127.0.0.1", 9123)
    with pytest.raises(ConfigError, match="FINETUNE_PS_PORT"):
        ps.plan(HOSTS, "algo-1", "dist_sync", environ={ps.PORT_ENV: "x"})

    def unknown(name):
        raise socket.gaierror("no such host")

    with pytest.raises(ConfigError, match="cannot resolve"):
        ps.plan(HOSTS, "algo-1", "dist_sync", environ={}, resolve=unknown)


def test_plan_address_map_names_the_first_host():
    env = {container.ADDRESSES_ENV: '{"algo-1": "10.0.0.5", "algo-2": "10.0.0.6"}'}

    def no_dns(name):
        raise AssertionError("a mapped host is not resolved")

    cluster = ps.plan(["algo-2", "algo-1"], "algo-2", "dist_sync", environ=env, resolve=no_dns)
    assert cluster.root_uri == "10.0.0.5"
    partial = {container.ADDRESSES_ENV: '{"algo-2": "10.0.0.6"}'}
    cluster = ps.plan(HOSTS, "algo-2", "dist_sync", environ=partial, resolve=lambda n: "1.2.3.4")
    assert cluster.root_uri == "1.2.3.4"  # the first host is not in the map: DNS
    with pytest.raises(ConfigError, match="JSON object"):
        ps.plan(HOSTS, "algo-1", "dist_sync", environ={container.ADDRESSES_ENV: "[1"})


def test_roles_start_children_set_worker_env_and_clean_up(tmp_path, monkeypatch):
    from finetune.contracts.container import Layout, TrainJob

    monkeypatch.setenv(container.ADDRESS_OVERRIDE_ENV, "127.0.0.1")
    monkeypatch.setenv(ps.PORT_ENV, str(_free_port()))
    monkeypatch.delenv("DMLC_ROLE", raising=False)
    hp = hparams(hosts=2, kvstore="dist_sync", global_batch=16)
    job = TrainJob(Layout(tmp_path), hp, {}, tmp_path / "ckpt", "algo-2", tuple(HOSTS))
    single = TrainJob(Layout(tmp_path), hp, {}, tmp_path / "ckpt", "algo-1", ("algo-1",))
    with ps.roles(single) as cluster:
        assert cluster is None and "DMLC_ROLE" not in os.environ
    monkeypatch.setattr(ps, "_abandoned", False)  # module state, restored after
    before = set(_children(os.getpid()))
    with pytest.raises(RuntimeError, match="boom"), ps.roles(job) as cluster:
        assert cluster.child_roles == ("server",)
        assert os.environ["DMLC_ROLE"] == "worker"
        assert os.environ["DMLC_NUM_WORKER"] == "2"
        started = [pid for pid in _children(os.getpid()) if pid not in before]
        assert len(started) == 1 and _environ(started[0]).get("DMLC_ROLE") == "server"
        raise RuntimeError("boom")  # the server waits for a scheduler that never comes
    assert not _alive(started[0])  # terminated (and reaped), not left waiting
    assert "DMLC_ROLE" not in os.environ
    assert ps._abandoned


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_tree(tmp_path, tiny_dataset, hp, name):
    root = make_tree(tmp_path / name, tiny_dataset, hp)
    resources = {"current_host": name, "hosts": HOSTS, "network_interface_name": "lo"}
    (root / "input" / "config" / "resourceconfig.json").write_text(json.dumps(resources))
    return root


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children first."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        path = f"/proc/{parent}/task/{parent}/children"
        try:
            with open(path) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        found += kids
        todo += kids
    return found


def _children(parent: int) -> list[int]:
    """Live child processes of ``parent`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _alive(int(entry)):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == parent:
                out.append(int(entry))
    return out


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [item.partition(b"=") for item in f.read().split(b"\0") if item]
    return {k.decode(): v.decode(errors="replace") for k, _, v in pairs}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_two_hosts_train_one_model_and_count_validation_exactly(tmp_path, tiny_dataset):
    """Two epochs on two hosts, 48 validation records in batches of 5: every record counted
    once per epoch (the first host validates them all), equal to an independent recount."""
    hp = hparams(
        epochs=2,
        hosts=2,
        kvstore="dist_sync",
        batch_per_device=5,
        global_batch=10,
        max_batches_per_epoch=3,
    )
    roots = {name: _host_tree(tmp_path, tiny_dataset, hp, name) for name in sorted(HOSTS)}
    env = {
        container.ADDRESS_OVERRIDE_ENV: "127.0.0.1",
        ps.PORT_ENV: str(_free_port()),
        "DMLC_INTERFACE": "lo",
    }
    started = time.monotonic()
    procs = {name: start_trainer(root, **env) for name, root in roots.items()}
    outputs = {name: Output(p) for name, p in procs.items()}
    children: set[int] = set()
    try:
        while any(p.poll() is None for p in procs.values()):
            for p in procs.values():
                if p.poll() is None:
                    children.update(_descendants(p.pid))
            assert time.monotonic() - started < 120, "the cluster did not finish in 120 s"
            time.sleep(0.1)
        codes = {name: out.finish(timeout=30) for name, out in outputs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    text = "\n\n".join(f"--- {n}\n{o.text()}" for n, o in outputs.items())
    assert codes == {"algo-1": 0, "algo-2": 0}, text
    said = {n: o.text().count("finetune-metrics ") for n, o in outputs.items()}
    assert said == {"algo-1": 2, "algo-2": 0}, text  # metrics once per epoch, by the validator
    assert len(children) >= 3, f"expected scheduler + 2 servers, saw {children}\n{text}"
    time.sleep(0.5)
    assert [pid for pid in children if _alive(pid)] == [], "scheduler/server left running"

    events = [
        json.loads(line)
        for line in (roots["algo-1"] / "output" / "data" / "metrics.jsonl").read_text().split("\n")
        if line
    ]
    assert len(events) == 2, text
    assert [e["hosts"] for e in events] == [2, 2]
    assert [e["samples"] for e in events] == [3 * 5 * 2] * 2  # 3 batches of 5 on each host
    counted = recount(roots["algo-1"], tiny_dataset)
    assert [(e["val_acc"], e["val_count"]) for e in events] == counted
    assert [n for _, n in counted] == [48, 48]
    assert any((roots["algo-1"] / "model").iterdir())
    assert not (roots["algo-2"] / "model").exists() or not any(
        (roots["algo-2"] / "model").iterdir()
    )
    metrics2 = roots["algo-2"] / "output" / "data" / "metrics.jsonl"
    assert not metrics2.exists() or metrics2.read_text() == ""
    ckpt1 = roots["algo-1"] / "checkpoints"
    assert any(p.name.startswith("ckpt-") for p in ckpt1.iterdir())


@pytest.mark.slow
def test_failed_host_exits_and_leaves_no_server(tmp_path, tiny_dataset):
    """A host whose training fails writes its reason and exits with its code (not waiting in
    MXNet's exit barrier) after stopping its server; a host killed outright takes its
    scheduler and server with it (the kernel sends them SIGTERM)."""
    hp = hparams(epochs=1, hosts=2, kvstore="dist_sync", global_batch=16)
    roots = {name: _host_tree(tmp_path, tiny_dataset, hp, name) for name in sorted(HOSTS)}
    env = {container.ADDRESS_OVERRIDE_ENV: "127.0.0.1", ps.PORT_ENV: str(_free_port())}
    first = start_trainer(roots["algo-1"], **env)
    # fails in the first epoch, after the cluster is up
    second = start_trainer(roots["algo-2"], FINETUNE_LOG_EVERY="x", **env)
    outputs = [Output(first), Output(second)]
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while second.poll() is None:
            children.update(_descendants(first.pid) + _descendants(second.pid))
            assert time.monotonic() < deadline, outputs[1].text()
            time.sleep(0.1)
        assert outputs[1].finish(timeout=10) == 1, outputs[1].text()
        failure = (roots["algo-2"] / "output" / "failure").read_text()
        assert "FINETUNE_LOG_EVERY" in failure or "invalid literal" in failure
        assert len(children) >= 3
        first.kill()  # its peer is gone for good: MXNet would wait for it forever
        outputs[0].finish(timeout=10)
        deadline = time.monotonic() + 10
        while [pid for pid in children if _alive(pid)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in children if _alive(pid)] == [], "scheduler/server left running"
    finally:
        for p in (first, second):
            if p.poll() is None:
                p.kill()


def test_stop_children_escalates_to_kill():
    """stop_children: SIGTERM first, SIGKILL for one that ignores it."""
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert stubborn.stdout.readline().strip() == "ready"
    ps.stop_children([stubborn, polite], grace=0.5)
    assert stubborn.returncode == -9 and polite.returncode == -15  # killed after the grace
