"""A DescribeTrainingJob response -> the ledger's view: state, reason, times, billed usage."""

from __future__ import annotations

import re
import time
from datetime import datetime

from finetune.backends.base import Status
from finetune.backends.sagemaker.validate import MAX_RUNTIME_LIMIT_S
from finetune.catalog import prices
from finetune.contracts.container import EXIT_STOPPED, STARTING, STOPPED_MARK
from finetune.errors import FinetuneError, UsageError
from finetune.estimate import money

_IN_PROGRESS = {
    "Starting": "submitted",
    "Pending": "submitted",
    "LaunchingMLInstances": "submitted",
    "PreparingTrainingStack": "submitted",
}
_FINAL = {"Completed": "completed", "Failed": "failed", "Stopped": "stopped"}
_TIME_LIMITS = ("MaxRuntimeExceeded", "MaxWaitTimeExceeded")
# how the trainer's stop exit reads in FailureReason: our reason, or the PyTorch toolkit's
# "ExitCode 75" / the platform's "exit code: 75" where the toolkit replaced the reason
_STOPPED_EXIT = re.compile(rf"\b(ExitCode|exit code:?)\s+{EXIT_STOPPED}\b", re.IGNORECASE)


def stopped_by_signal(job: dict) -> bool:
    """Whether a failed job's trainer only stopped after a checkpoint (resumable)."""
    reason = job.get("FailureReason") or ""
    return job.get("TrainingJobStatus") == "Failed" and (
        STOPPED_MARK in reason or bool(_STOPPED_EXIT.search(reason))
    )


def state_of(job: dict) -> str:
    """The ledger state for a job's TrainingJobStatus and SecondaryStatus, as SageMaker
    documents them::

        InProgress  Starting, Pending, Downloading, Training, Interrupted, Restarting, Uploading
        Completed   Completed
        Failed      Failed (FailureReason says why)
        Stopping    Stopping
        Stopped     Stopped, MaxRuntimeExceeded, MaxWaitTimeExceeded

    A spot interruption is not the end of a job: SageMaker waits for capacity and restarts it
    from the last checkpoint, so "Interrupted" maps to running. Time limits end it for good and
    map to "interrupted" (resumable from the checkpoints); a user's stop to "stopped". A
    trainer stopped by a signal from elsewhere checkpoints and exits with 75 (EXIT_STOPPED)
    after writing a failure reason that starts with "finetune-stopped", so SageMaker says
    "Failed": that job is "interrupted" and resumable, never "completed" (a trainer exits 0
    only with its model written) nor a failure (stopped_by_signal)."""
    primary = str(job.get("TrainingJobStatus") or "")
    secondary = str(job.get("SecondaryStatus") or "")
    if primary == "InProgress":
        return _IN_PROGRESS.get(secondary, "running")
    if primary == "Stopping":
        return "stopping"
    if (primary == "Stopped" and secondary in _TIME_LIMITS) or stopped_by_signal(job):
        return "interrupted"
    return _FINAL.get(primary, "stopped" if primary == "Deleting" else "running")


def to_status(job: dict, run_id: str, now: float | None = None) -> Status:
    """The Status (with facts for the ledger) of a described job."""
    state = state_of(job)
    return Status(
        state=state,
        reason=reason_of(job, state, run_id),
        detail=detail_of(job),
        started_at=_ts(job.get("TrainingStartTime")),
        ended_at=_ts(job.get("TrainingEndTime")) if is_final(state) else None,
        facts=facts_of(job, now),
    )


def is_final(state: str) -> bool:
    return state in ("completed", "failed", "stopped", "interrupted")


def detail_of(job: dict) -> str | None:
    """'Training: Training image download completed. Training in progress.'"""
    secondary = job.get("SecondaryStatus")
    transitions = job.get("SecondaryStatusTransitions") or []
    message = transitions[-1].get("StatusMessage") if transitions else None
    if not secondary:
        return None
    return f"{secondary}: {message}" if message else secondary


def reason_of(job: dict, state: str, run_id: str) -> str | None:
    """Why the job ended, with what to do next; None while it runs or after success."""
    secondary = job.get("SecondaryStatus")
    resume = f"resume from the last checkpoint with `finetune launch --resume {run_id}`"
    if state == "failed":
        return _failure(job.get("FailureReason") or "SageMaker gave no reason", job, run_id)
    if stopped_by_signal(job):
        why = " ".join(job["FailureReason"].split())[:400]
        when = "during its start-up" if STARTING in why else "after a checkpoint"
        return f"the trainer was stopped by a signal {when} ({why}); {resume}"
    if secondary == "MaxWaitTimeExceeded":
        wait = job.get("StoppingCondition", {}).get("MaxWaitTimeInSeconds")
        return f"spot capacity did not come back within --max-wait ({wait} s); {resume}"
    if secondary == "MaxRuntimeExceeded":
        limit = job.get("StoppingCondition", {}).get("MaxRuntimeInSeconds")
        return f"the job reached --max-runtime ({limit} s) and was stopped; {resume}"
    if state == "stopped":
        return f"stopped on request; {resume}"
    return None


def _failure(reason: str, job: dict, run_id: str) -> str:
    instance = job.get("ResourceConfig", {}).get("InstanceType", "the instance type")
    if reason.startswith("CapacityError") or "capacity" in reason.lower():
        return (
            f"{reason} -- SageMaker had no {instance} capacity. To fix: launch again later, in "
            "another region (--region) or on another instance type (--instance), or use "
            "--spot with a longer --max-wait."
        )
    if "ResourceLimitExceeded" in reason or "service limit" in reason:
        return f"{reason} -- To fix: request a higher SageMaker quota in Service Quotas."
    return f"{reason} -- see `finetune runs logs {run_id}` for the trainer's log."


def interrupted_seconds(transitions: list[dict], now: float | None = None) -> float:
    """Wall time lost to spot interruptions: from each 'Interrupted' until training runs
    again (the restart's Starting/Downloading included), or until now/the end."""
    now = time.time() if now is None else now
    lost, since = 0.0, None
    for t in transitions:
        status, start = t.get("Status"), _ts(t.get("StartTime"))
        if status == "Interrupted" and since is None:
            since = start
        elif status not in ("Interrupted", "Starting", "Pending", "Downloading", "Restarting"):
            if since is not None and start is not None:
                lost += max(0.0, start - since)
            since = None
    if since is not None:
        last_end = _ts(transitions[-1].get("EndTime")) if transitions else None
        lost += max(0.0, (last_end or now) - since)
    return lost


def facts_of(job: dict, now: float | None = None) -> dict:
    """Ledger columns from the job (None where SageMaker has not said yet)."""
    rc = job.get("ResourceConfig", {})
    facts = {
        "training_seconds": _num(job.get("TrainingTimeInSeconds")),
        "billable_seconds": _num(job.get("BillableTimeInSeconds")),
        "interrupted_seconds": interrupted_seconds(
            job.get("SecondaryStatusTransitions") or [], now
        ),
        "hosts": rc.get("InstanceCount"),
    }
    finals = job.get("FinalMetricDataList") or []
    if finals:
        facts["final_metrics"] = {m["MetricName"]: m.get("Value") for m in finals}
    return facts


def _num(value) -> float | None:
    return None if value is None else float(value)


def _ts(value) -> float | None:
    """A response timestamp (datetime, ISO text or epoch seconds) as epoch seconds."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(str(value)).timestamp()


def billable_seconds(job: dict) -> tuple[float | None, str]:
    """(seconds per instance SageMaker bills, a note): BillableTimeInSeconds, else the training
    time the job reports; None when it reports neither. Never below 0 nor above the job's own
    MaxRuntimeInSeconds (SageMaker stops the job there, so it never bills more): a time past
    either (a clock or a response gone wrong) is bounded, and the note says so."""
    cap = float((job.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds") or 0)
    cap = cap if 0 < cap <= MAX_RUNTIME_LIMIT_S else MAX_RUNTIME_LIMIT_S
    seconds, notes = _num(job.get("BillableTimeInSeconds")), []
    if seconds is None:
        start, end = _ts(job.get("TrainingStartTime")), _ts(job.get("TrainingEndTime"))
        seconds = _num(job.get("TrainingTimeInSeconds"))
        if seconds is None and start is not None and end is not None:
            seconds = end - start
        if seconds is None:
            return None, ""
        notes.append("SageMaker reported no BillableTimeInSeconds: billed as its training time")
    if seconds < 0:
        notes.append(f"a negative time ({seconds:.0f} s) billed as 0 s")
    elif seconds > cap:
        notes.append(f"{seconds:.0f} s reported, past the job's MaxRuntimeInSeconds: billed as "
                     f"{cap:.0f} s")  # fmt: skip
    return min(max(seconds, 0.0), cap), "; ".join(notes)


def charge_facts(job: dict, region: str, spot: bool) -> dict:
    """The job's charge for the ledger -- its billable_seconds for each of InstanceCount
    instances at the ml.* on-demand price, with its source and date -- or {} while SageMaker
    has not reported billable or training time. Never euros: estimate.money bills it. With
    managed spot, BillableTimeInSeconds is already the discounted time: the price stays
    on-demand."""
    billable, note = billable_seconds(job)
    if billable is None:
        return {}
    rc = job.get("ResourceConfig", {})
    try:
        price = prices.price(rc.get("InstanceType", ""), region, "sagemaker")
        usd, source, as_of = price.usd_per_hour, price.source, price.as_of_iso
    except FinetuneError as exc:
        usd, source, as_of = None, f"no price: {exc.what}", None
    charge = money.Charge(
        rule=money.SAGEMAKER,
        instance_type=rc.get("InstanceType", "?"),
        instances=int(rc.get("InstanceCount") or 1),
        seconds=billable,
        usd_per_hour=usd,
        price_source=source,
        price_as_of=as_of,
        market="spot" if spot else "on-demand",
        started_at=_ts(job.get("TrainingStartTime")),
        ended_at=_ts(job.get("TrainingEndTime")),
        training_seconds=_num(job.get("TrainingTimeInSeconds")),
        label=job.get("TrainingJobName", ""),
        note=note,
    )
    return {"charges": [charge.to_dict()]}


def check_running(run, job: dict) -> None:
    """A UsageError unless the job can still be stopped (`runs stop`)."""
    state = state_of(job)
    if is_final(state) or state == "stopping":
        raise UsageError(
            f"run {run.id} is not running (SageMaker job {job.get('TrainingJobName')} is "
            f"{job.get('TrainingJobStatus')})",
            "nothing to stop.",
        )
