"""`finetune cleanup` for SageMaker: training jobs no live run owns, and the per-run
execution roles of jobs that ended.

A job in progress whose run is not live in the ledger (its launch killed and abandoned, or a
run that ended here while its job went on) is stopped. A run's role (runrole.py) is deleted
when someone observes its job's end; here every role under the run-role path is matched to
its run's jobs (``finetune-<run>``, resumed ones ``-r1``, ...): a role whose jobs have all
ended, or that has no job at all, is an orphan -- unless the run is live in the ledger.
Both only past the age limit, except for runs this ledger knows ended (at any age).
"""

from __future__ import annotations

import time
from dataclasses import replace

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.backends.base import Orphan
from finetune.backends.sagemaker import findjob, runrole
from finetune.backends.sagemaker import request as rq

LIVE = ("InProgress", "Stopping")


def find(
    aws, live_runs: set[str], older_than_s: float, now: float | None = None, known=frozenset()
) -> list[Orphan]:
    """Jobs in progress and roles of ended (or never created) jobs, of runs not live, older
    than ``older_than_s`` unless their run is ``known`` (this ledger's: it ended)."""
    now = now or time.time()
    return jobs(aws, live_runs, older_than_s, now, known) + roles(
        aws, live_runs, older_than_s, now, known
    )


def jobs(aws, live_runs: set[str], older_than_s: float, now: float, known) -> list[Orphan]:
    """finetune's training jobs in progress whose run is not live here."""
    sm, out = aws.client("sagemaker"), []
    try:
        pages = sm.get_paginator("list_training_jobs").paginate(
            NameContains=rq.JOB_PREFIX, StatusEquals="InProgress"
        )
        found = [j for page in pages for j in page["TrainingJobSummaries"]]
    except Exception as exc:
        if retries.error_code(exc) in ("AccessDenied", "AccessDeniedException"):
            return []  # an EC2-only caller (no sagemaker:ListTrainingJobs): it has no jobs
        with aws_errors("ListTrainingJobs", resource=rq.JOB_PREFIX, region=aws.region):
            raise
    for job in found:
        run_id = findjob.run_of(job["TrainingJobName"])
        created = job.get("CreationTime")
        age = now - created.timestamp() if hasattr(created, "timestamp") else 0.0
        if not run_id or run_id in live_runs or (age < older_than_s and run_id not in known):
            continue
        detail = f"{job['TrainingJobStatus']} (its run is not live)"
        out.append(Orphan("training-job", job["TrainingJobName"], run_id, age, detail))
    return out


def roles(aws, live_runs: set[str], older_than_s: float, now: float, known) -> list[Orphan]:
    """Roles of ended (or never created) jobs."""
    iam, sm = aws.client("iam"), aws.client("sagemaker")
    prefix = runrole.role_name("")
    out = []
    try:
        pages = iam.get_paginator("list_roles").paginate(PathPrefix=runrole.ROLE_PATH)
        listed = [r for page in pages for r in page["Roles"] if r["RoleName"].startswith(prefix)]
    except Exception as exc:
        if retries.error_code(exc) in ("AccessDenied", "AccessDeniedException"):
            return []  # an EC2-only caller (its policy has no iam:ListRoles): no such roles
        with aws_errors("ListRoles", resource=f"role{runrole.ROLE_PATH}", region=aws.region):
            raise
    for role in listed:
        run_id = role["RoleName"][len(prefix) :]
        created = role.get("CreateDate")
        age = now - created.timestamp() if hasattr(created, "timestamp") else 0.0
        if run_id in live_runs or (age < older_than_s and run_id not in known):
            continue
        states = _job_states(sm, run_id, aws.region)
        if any(s in LIVE for s in states):
            continue  # its job still runs (launched from another machine, perhaps)
        detail = f"jobs {', '.join(sorted(set(states)))}" if states else "no job"
        out.append(Orphan("execution-role", role["RoleName"], run_id, age, detail))
    return out


def scoped(found: list[Orphan], scope) -> list[Orphan]:
    """``found`` with what is not the caller's to remove marked skipped: a run outside this
    machine's ledger (``scope.known_runs``) that is not named (``scope.runs``), unless
    ``scope.all_owners``. Neither jobs nor roles carry an owner tag finetune can read."""
    if scope is None or scope.all_owners:
        return found
    why = {
        "execution-role": "its run is not in this machine's ledger and roles carry no owner tag",
        "training-job": "its run is not in this machine's ledger: another machine's live run?",
    }
    mine = scope.known_runs | scope.runs
    return [o if o.run_id in mine else replace(o, skipped=why[o.kind]) for o in found]


def _job_states(sm, run_id: str, region: str) -> list[str]:
    """The status of every job of the run (its first job and the resumed ones)."""
    name = rq.job_name(run_id)
    with aws_errors("ListTrainingJobs", resource=name, region=region):
        pages = sm.get_paginator("list_training_jobs").paginate(NameContains=name)
        jobs = [j for page in pages for j in page["TrainingJobSummaries"]]
    ours = [
        j
        for j in jobs
        if j["TrainingJobName"] == name or j["TrainingJobName"].startswith(name + "-r")
    ]
    return [j["TrainingJobStatus"] for j in ours]


def remove(aws, orphans: list[Orphan]) -> list[str]:
    """Stop the jobs (SIGTERM: the trainer checkpoints), then delete the roles (what is
    already gone or ended is fine); one line each."""
    done = []
    for o in orphans:
        if o.kind == "training-job":
            with aws_errors("StopTrainingJob", resource=o.id, region=aws.region):
                _stop(aws.client("sagemaker"), o.id)
            done.append(f"stopped training job {o.id}")
    for o in orphans:
        if o.kind == "execution-role":
            with aws_errors("DeleteRole", resource=o.id, region=aws.region):
                runrole.delete(aws.client("iam"), o.run_id)
            done.append(f"deleted execution role {o.id}")
    return done


def _stop(sm, name: str) -> None:
    try:
        retries.call(sm.stop_training_job, TrainingJobName=name)
    except Exception as exc:
        if retries.error_code(exc) != "ValidationException":  # it ended meanwhile
            raise
