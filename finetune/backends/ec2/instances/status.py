"""Where an EC2 attempt stands, from the agent's status.json and the instance's state, and
what the agent wrote to the run's S3 prefix (status, metrics, log, the final model)."""

from __future__ import annotations

import json
from pathlib import Path

from finetune.backends.base import Status
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.s3sync import RunStore, UnsafeKey
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.backends.ec2.state import Ec2State
from finetune.contracts.metrics import EpochMetrics
from finetune.errors import DataError

ENDED = ("shutting-down", "terminated", "stopping", "stopped")
EC2_ENDED_IT = "EC2 itself ended the instance"  # a Server.* state reason: not ours, not spot


def observe(doc: dict, inst: dict | None, stop_requested: bool) -> tuple[str | None, str | None]:
    """How the current attempt ended, from the agent's status and the instance; (None, None)
    while it is still going."""
    state = doc.get("state")
    if state in p.FINAL_STATES:
        if state == p.INTERRUPTED and stop_requested:
            return "stopped", "stopped by the user"
        return state, doc.get("reason")
    ended = inst is None or inst["State"]["Name"] in ENDED
    if not ended:
        return None, None
    if stop_requested:
        return "stopped", "stopped by the user"
    why = (inst or {}).get("StateReason", {})
    if "Spot" in why.get("Code", ""):
        return "interrupted", f"spot interruption ({why['Code']})"
    if why.get("Code", "").startswith("Server."):  # EC2's doing: capacity, an internal error
        return "interrupted", (
            f"{EC2_ENDED_IT} ({why.get('Message') or why['Code']}) before the agent reported "
            "a result"
        )
    return "failed", (
        f"the instance ended ({why.get('Message') or 'state unknown'}) before the agent "
        "reported a result: the --max-runtime dead-man switch, a failed image pull, or a "
        "manual termination; see `finetune runs logs`"
    )


def spot_interruption(doc: dict, inst: dict | None) -> bool:
    """Was it EC2 taking spot capacity back? Only that is relaunched automatically: a SIGTERM
    from the dead-man switch (--max-runtime) must not start the run over and over."""
    code = ((inst or {}).get("StateReason") or {}).get("Code", "")
    return doc.get("interruption") == "spot" or "Spot" in code


def active_status(state: Ec2State, doc: dict) -> Status:
    cur = state.launched()
    where = f"{cur.instance_id} {cur.instance_type}{' spot' if cur.spot else ''} in {cur.az}"
    if doc.get("state") != p.RUNNING:
        return Status("submitted", detail=f"starting on {where}", started_at=cur.launched_at)
    ips = doc.get("images_per_sec")
    progress = f", {doc.get('epochs_done', 0)} epoch(s)" + (f", {ips:,.1f} img/s" if ips else "")
    return Status("running", detail=f"{where}{progress}", started_at=cur.launched_at)


def status_doc(clients, state: Ec2State) -> dict:
    """The agent's status.json ({} while there is none, or it is torn)."""
    text = _read(clients, state, p.STATUS)
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return {}


def metrics(clients, state: Ec2State) -> list[EpochMetrics]:
    """The epochs in the agent's metrics.jsonl (torn lines skipped)."""
    events = []
    for line in (_read(clients, state, p.METRICS) or "").splitlines():
        try:
            events.append(EpochMetrics.model_validate_json(line))
        except ValueError:
            continue
    return events


def log(clients, state: Ec2State, offset: int) -> tuple[str, int]:
    """train.log from byte ``offset`` on, and the next offset."""
    s3 = clients("s3", state.region)
    try:
        obj = ec2_infra.call(
            s3.get_object, Bucket=state.bucket, Key=state.prefix + p.LOG, Range=f"bytes={offset}-"
        )
    except Exception as exc:
        if ec2_infra.error_code(exc) in ("NoSuchKey", "InvalidRange", "404"):
            return "", offset
        raise ec2_infra.cloud_error(exc, "reading the run's log") from None
    data = obj["Body"].read()
    return data.decode("utf-8", "replace"), offset + len(data)


def _read(clients, state: Ec2State, name: str) -> str | None:
    s3 = clients("s3", state.region)
    key = state.prefix + name
    try:
        body = ec2_infra.call(s3.get_object, Bucket=state.bucket, Key=key)["Body"]
    except Exception as exc:
        if ec2_infra.error_code(exc) in ("NoSuchKey", "404"):
            return None
        raise ec2_infra.cloud_error(exc, f"reading s3://{state.bucket}/{key}") from None
    return body.read().decode("utf-8", "replace")


def download_model(clients, state: Ec2State, folder: Path) -> None:
    """The model/ files the agent uploaded once training succeeded, into ``folder`` (every
    key checked to stay inside it before anything is written)."""
    where = f"s3://{state.bucket}/{state.prefix}{p.MODEL}"
    store = RunStore(clients("s3", state.region), state.bucket, state.prefix)
    try:
        count = ec2_infra.call(lambda: store.download_tree(p.MODEL, folder))
    except UnsafeKey as exc:
        raise DataError(
            f"{where}: {exc}",
            "someone else wrote to the run's prefix: delete the odd key, or pass a trusted "
            "model folder instead of the run id.",
        ) from None
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"downloading {where}") from None
    if count == 0:
        raise DataError(
            f"no model under {where} (the agent uploads it when training succeeds)",
            "check `finetune runs logs RUN` for the upload; if it was deleted, pass a model "
            "folder instead of the run id, or train again.",
        )
