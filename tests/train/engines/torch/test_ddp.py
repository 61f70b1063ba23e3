"""The PyTorch engine on several processes (DistributedDataParallel over gloo on this CPU),
started by torchrun from the one entrypoint: the same updates as one process on the same
global batch, a stop reaching one rank stops all after the same step, a resume across two
processes, a killed rank ends the run with its reason; plus the launch plan and the failure
mapping, without processes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from finetune.contracts.container import ADDRESSES_ENV, EXIT_STOPPED, Layout  # noqa: E402
from finetune.contracts.metrics import read as read_metrics  # noqa: E402
from finetune.errors import ConfigError  # noqa: E402
from finetune.train.engines.torch import RUNTIME, ddp, launch  # noqa: E402
from finetune.train.layout import load_job  # noqa: E402

from ...conftest import Output, hparams, make_tree, start_trainer  # noqa: E402


def ddp_hp(processes: int, **overrides):
    """Global batch 16 on ``processes`` CPU processes; BatchNorm on stored statistics, so a
    process's output does not depend on how the batch is split (per-rank BatchNorm would)."""
    base = dict(
        engine="torch", model="resnet18", loader_workers=0, optimizer="sgd",
        devices_per_host=processes, batch_per_device=16 // processes,
        global_batch=16, lr_per_device=0.02 / processes, lr=0.02, batchnorm="frozen",
        checkpoint_interval_s=3600, max_batches_per_epoch=3,
    )  # fmt: skip
    base.update(overrides)
    return hparams(**base)


def worker(launcher_pid: int, rank: int) -> int:
    """The pid of torchrun's worker ``rank`` (a child of the launcher)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            env = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if ppid == launcher_pid and f"RANK={rank}".encode() in env:
            return int(entry.name)
    raise AssertionError(f"no worker of rank {rank} under {launcher_pid}")


@pytest.mark.slow
def test_two_processes_stopped_and_resumed_make_the_updates_of_one(tmp_path, tiny_dataset):
    """One process, global batch 16, uninterrupted; two processes of 8 each, SIGTERM to rank 1
    mid-run, then started again: same weights (float tolerance: gloo sums the two halves'
    gradients in another order), same per-epoch loss, every validation record counted once."""
    one = make_tree(tmp_path / "one", tiny_dataset, ddp_hp(1, epochs=2))
    RUNTIME.fit(load_job(Layout(one)))

    root = make_tree(tmp_path / "two", tiny_dataset, ddp_hp(2, epochs=2))
    first = Output(start_trainer(root, FINETUNE_LOG_EVERY="1"))
    first.wait_for(lambda: any(line.startswith("finetune-progress") for line in first.lines))
    os.kill(worker(first.proc.pid, 1), signal.SIGTERM)
    assert first.finish(timeout=300) == EXIT_STOPPED, first.text()
    assert "stopped by SIGTERM, checkpoint saved" in first.text()
    # the stop reached rank 1 alone: the launcher learns it from rank 0 (exit 75, marker)
    assert "torchrun: 2 of 2 training processes stopped by SIGTERM" in first.text()
    saved = sorted((root / "checkpoints").glob("ckpt-*/state.json"))
    reasons = [json.loads(p.read_text())["reason"] for p in saved]
    assert reasons.count("SIGTERM") == 1, reasons  # rank 0 alone, once

    second = Output(start_trainer(root))
    assert second.finish(timeout=300) == 0, second.text()
    assert "finetune-resume" in second.text()
    a = torch.load(one / "model" / "model.pt", weights_only=True)
    b = torch.load(root / "model" / "model.pt", weights_only=True)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5, msg=key)
    single, double = (
        read_metrics(one / "output/data/metrics.jsonl"),
        read_metrics(root / "output/data/metrics.jsonl"),
    )
    assert [e.train_loss for e in double] == pytest.approx([e.train_loss for e in single])
    assert [e.val_acc for e in double] == [e.val_acc for e in single]
    assert [e.val_count for e in double] == [48, 48]  # 48 records, 2 shards of 24
    assert [(e.devices, e.hosts, e.samples) for e in double] == [(2, 1, 48), (2, 1, 48)]
    for e in double:  # telemetry on a CPU: input wait and TFLOP/s measured, no GPU figures
        assert 0 <= e.input_wait_fraction <= 1 and e.data_bound is not None
        assert e.achieved_tflops > 0 and e.gpu_util_pct is None and e.pct_of_peak is None
    record = json.loads((root / "output" / "data" / "run-record.json").read_text())
    assert record["processes"] == 2 and record["flops_per_image"] > 0


@pytest.mark.slow
def test_a_killed_rank_ends_the_run_with_its_reason(tmp_path, tiny_dataset):
    root = make_tree(tmp_path / "ml", tiny_dataset, ddp_hp(2, epochs=3))
    out = Output(start_trainer(root, FINETUNE_LOG_EVERY="1"))
    out.wait_for(lambda: any(line.startswith("finetune-progress") for line in out.lines))
    os.kill(worker(out.proc.pid, 1), signal.SIGKILL)
    assert out.finish(timeout=120) == 128 + signal.SIGKILL, out.text()
    failure = (root / "output" / "failure").read_text()
    assert "training process rank 1 of 2" in failure and "killed by SIGKILL" in failure
    assert "To fix:" in failure and not (root / "model" / "model.pt").exists()


# ---- without processes -------------------------------------------------------------------
def _job(tmp_path, tiny_dataset, hosts=("algo-1",), current="algo-1", **hp):
    root = make_tree(tmp_path / "ml", tiny_dataset, ddp_hp(2, **hp))
    resources = {"current_host": current, "hosts": list(hosts)}
    (root / "input/config/resourceconfig.json").write_text(json.dumps(resources))
    return load_job(Layout(root))


def test_the_launch_plan_follows_the_hosts_and_devices(tmp_path, tiny_dataset):
    job = _job(tmp_path, tiny_dataset)
    local = launch.plan(job, environ={})
    assert (local.nnodes, local.node_rank, local.nproc, local.master_addr) == (1, 0, 2, "127.0.0.1")
    # under torchrun (SageMaker's toolkit, or our own workers): join, do not launch again
    assert launch.plan(job, environ={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}) is None
    # GPUs found: one process each (device=auto); one process alone: no launch
    assert launch.plan(_job(tmp_path / "g", tiny_dataset, device="auto"), {}, gpus=4).nproc == 4
    assert launch.plan(_job(tmp_path / "c", tiny_dataset, devices_per_host=1), {}) is None

    addresses = {ADDRESSES_ENV: json.dumps({"algo-1": "10.0.0.5"}),
                 launch.PORT_ENV: "29611"}  # fmt: skip
    hosts = _job(tmp_path / "h", tiny_dataset, ("algo-2", "algo-1"), "algo-2", device="auto")

    def no_dns(name):
        raise AssertionError("a mapped host is not resolved")

    plan = launch.plan(hosts, addresses, gpus=8, resolve=no_dns)
    assert (plan.nnodes, plan.node_rank, plan.nproc, plan.world) == (2, 1, 8, 16)
    assert (plan.master_addr, plan.master_port) == ("10.0.0.5", 29611)
    with pytest.raises(ConfigError, match="FINETUNE_TORCHRUN_PORT"):
        launch.plan(hosts, {**addresses, launch.PORT_ENV: "http"}, gpus=8)


def test_a_global_batch_must_divide_among_the_processes():
    assert ddp.local_batch(16, 4) == 4
    with pytest.raises(
        ConfigError, match=r"(?s)global batch 15 does not divide among the 2 .*To fix"
    ):
        ddp.local_batch(15, 2)


def test_validation_shards_cover_every_record_once_and_mark_the_padding():
    shards = [ddp.shard(10, rank, 4) for rank in range(4)]
    assert [len(records) for records, _ in shards] == [3, 3, 3, 3]
    real = [r for records, flags in shards for r, f in zip(records, flags, strict=True) if f]
    assert sorted(real) == list(range(10))
    assert [r for records, flags in shards for r, f in zip(records, flags, strict=True)
            if not f] == [0, 1]  # fmt: skip


def test_a_worker_failure_becomes_the_runs_failure(tmp_path, tiny_dataset):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    job = _job(tmp_path, tiny_dataset)
    plan = launch.Launch(1, 0, 2, "127.0.0.1", 29500)

    def failed(**codes):
        failures = {int(r[1:]): ProcessFailure(int(r[1:]), 100 + int(r[1:]), c, "<N/A>")
                    for r, c in codes.items()}  # fmt: skip
        return ChildFailedError("finetune.train", failures)

    job.layout.failure_file.parent.mkdir(parents=True, exist_ok=True)
    job.layout.failure_file.write_text("training process rank 1: bad data\nTo fix: prepare it")
    err = launch._failure(failed(r0=-signal.SIGTERM, r1=3), job, plan)
    assert err.exit_code == 3 and str(err).startswith("training process rank 1: bad data")
    err = launch._failure(failed(r0=1, r1=-signal.SIGKILL), job, plan)
    assert err.exit_code == 137 and "rank 1 of 2" in str(err) and "killed by SIGKILL" in str(err)
