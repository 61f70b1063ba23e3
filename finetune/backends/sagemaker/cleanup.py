"""`finetune cleanup` for SageMaker: the per-run execution roles of jobs that ended.

A run's role (runrole.py) is deleted when someone observes its job's end (`runs show`,
following the launch); a run nobody looks at again keeps it. Here every role under the
SageMaker run-role path is matched to its run's jobs (``finetune-<run>``, resumed ones
``-r1``, ``-r2``, ...): a role whose jobs have all ended, or that has no job at all, and is
older than the limit, is an orphan -- unless the run is live in the ledger.
"""

from __future__ import annotations

import time
from dataclasses import replace

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.backends.base import Orphan
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker import runrole

LIVE = ("InProgress", "Stopping")


def find(aws, live_runs: set[str], older_than_s: float, now: float | None = None) -> list[Orphan]:
    """Roles of ended (or never created) jobs, older than ``older_than_s``."""
    now = now or time.time()
    iam, sm = aws.client("iam"), aws.client("sagemaker")
    prefix = runrole.role_name("")
    out = []
    try:
        pages = iam.get_paginator("list_roles").paginate(PathPrefix=runrole.ROLE_PATH)
        roles = [r for page in pages for r in page["Roles"] if r["RoleName"].startswith(prefix)]
    except Exception as exc:
        if retries.error_code(exc) in ("AccessDenied", "AccessDeniedException"):
            return []  # an EC2-only caller (its policy has no iam:ListRoles): no such roles
        with aws_errors("ListRoles", resource=f"role{runrole.ROLE_PATH}", region=aws.region):
            raise
    for role in roles:
        run_id = role["RoleName"][len(prefix) :]
        created = role.get("CreateDate")
        age = now - created.timestamp() if hasattr(created, "timestamp") else 0.0
        if run_id in live_runs or age < older_than_s:
            continue
        states = _job_states(sm, run_id, aws.region)
        if any(s in LIVE for s in states):
            continue  # its job still runs (launched from another machine, perhaps)
        detail = f"jobs {', '.join(sorted(set(states)))}" if states else "no job"
        out.append(Orphan("execution-role", role["RoleName"], run_id, age, detail))
    return out


def scoped(found: list[Orphan], scope) -> list[Orphan]:
    """``found`` with the roles that are not the caller's to remove marked skipped: a run
    outside this machine's ledger (``scope.known_runs``), unless ``scope.all_owners``."""
    if scope is None or scope.all_owners:
        return found
    why = "its run is not in this machine's ledger and roles carry no owner tag"
    return [o if o.run_id in scope.known_runs else replace(o, skipped=why) for o in found]


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
    """Delete the roles (what is already gone is fine); one line each."""
    done = []
    for o in orphans:
        if o.kind == "execution-role":
            with aws_errors("DeleteRole", resource=o.id, region=aws.region):
                runrole.delete(aws.client("iam"), o.run_id)
            done.append(f"deleted execution role {o.id}")
    return done
