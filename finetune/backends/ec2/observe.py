"""Where an EC2 attempt stands, from the agent's status.json and the instance's state (pure)."""

from __future__ import annotations

from finetune.backends.base import Status
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.state import Ec2State

ENDED = ("shutting-down", "terminated", "stopping", "stopped")


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
    cur = state.current
    where = f"{cur.instance_id} {cur.instance_type}{' spot' if cur.spot else ''} in {cur.az}"
    if doc.get("state") != p.RUNNING:
        return Status("submitted", detail=f"starting on {where}", started_at=cur.launched_at)
    ips = doc.get("images_per_sec")
    progress = f", {doc.get('epochs_done', 0)} epoch(s)" + (f", {ips:,.1f} img/s" if ips else "")
    return Status("running", detail=f"{where}{progress}", started_at=cur.launched_at)
