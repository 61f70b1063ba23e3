"""What the on-instance agent and the control side agree on: S3 keys, states, exit codes.
Everything of one EC2 run lives under ``s3://BUCKET/finetune/runs/RUN_ID/`` (the keys below).
Stdlib only: the control side imports this without boto3.
"""

from __future__ import annotations

RUNS_PREFIX = "finetune/runs/"
DATASETS_PREFIX = "finetune/datasets/"

# the objects of a run, under its prefix (run_prefix)
PLAN = "plan.json"  # the Plan (written by `launch`; the agent lays out /opt/ml from it)
STATUS = "status.json"  # the agent's view: state, attempt, instance, times, progress, reason
METRICS = "metrics.jsonl"  # epoch events of every attempt, merged by epoch
LOG = "train.log"  # the trainer's output, attempts appended one after another
FAILURE = "failure"  # the trainer's failure reason, when it wrote one
CHECKPOINTS = "checkpoints/"  # the checkpoint folder mirrored (deletions too, as SageMaker does)
MODEL = "model/"  # the final model, uploaded once the trainer succeeded
TENSORBOARD = "tensorboard/"  # /opt/ml/output/tensorboard mirrored (the tensorboard logger)
# multi-host runs, written by `launch`: {"attempt", "hosts": {name: ip}, "instances": {id: name}};
# the other hosts' status.json and train.log are kept under hosts/NAME/
HOSTS = "hosts.json"

# status.json "state" values; the ledger's names where they mean the same
STARTING, RUNNING = "starting", "running"
COMPLETED, FAILED, INTERRUPTED = "completed", "failed", "interrupted"
FINAL_STATES = (COMPLETED, FAILED, INTERRUPTED)

# Agent exit codes: 75 is EX_TEMPFAIL ("try again"), the interrupted-but-resumable case.
EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 75

# Environment of `python -m finetune.backends.ec2.agent` (the user data passes these on)
ENV_BUCKET = "FINETUNE_AGENT_BUCKET"
ENV_PREFIX = "FINETUNE_AGENT_PREFIX"
ENV_DATASET = "FINETUNE_AGENT_DATASET"
ENV_ATTEMPT = "FINETUNE_AGENT_ATTEMPT"
ENV_INTERVAL = "FINETUNE_AGENT_UPLOAD_INTERVAL"
ENV_POLL = "FINETUNE_AGENT_POLL_INTERVAL"
ENV_IMDS = "FINETUNE_AGENT_IMDS"
ENV_TRAINER = "FINETUNE_AGENT_TRAINER"
ENV_SHUTDOWN = "FINETUNE_AGENT_SHUTDOWN"
ENV_GRACE = "FINETUNE_AGENT_STOP_GRACE"
ENV_HOSTS = "FINETUNE_AGENT_HOSTS"  # how many instances the attempt has (default 1)
ENV_PLAN_SHA256 = "FINETUNE_AGENT_PLAN_SHA256"  # plan.json's digest from the launch (user data)
ENV_HOSTS_WAIT = "FINETUNE_AGENT_HOSTS_WAIT"  # seconds to wait for hosts.json (default 600)


def run_prefix(run_id: str) -> str:
    """The S3 key prefix of one run, ending in '/'."""
    return f"{RUNS_PREFIX}{run_id}/"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """'s3://bucket/a/b/' -> ('bucket', 'a/b/')."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key
