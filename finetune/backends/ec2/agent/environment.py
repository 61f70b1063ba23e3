"""The agent's settings, read from its environment (the user data sets them in the container)."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.imds import DEFAULT_URL
from finetune.errors import ConfigError


@dataclass(frozen=True)
class AgentConfig:
    bucket: str
    prefix: str  # the run's prefix, ending in '/'
    dataset_uri: str  # s3://bucket/prefix/ holding the prepared dataset's files
    attempt: int = 1
    ml_root: Path = Path("/opt/ml")
    imds_url: str = DEFAULT_URL
    upload_interval: float = 30.0  # seconds between uploads of metrics, logs, checkpoints
    poll_interval: float = 5.0  # seconds between spot-notice polls (AWS's advice)
    stop_grace: float = 100.0  # the notice gives 120 s; keep some for the last upload
    trainer: tuple[str, ...] = (sys.executable, "-m", "finetune.train")
    shutdown: tuple[str, ...] = ()  # on EC2 the user data powers off once the container ends
    hosts: int = 1  # instances of this attempt; more than one: wait for hosts.json
    hosts_wait: float = 600.0  # seconds to wait for hosts.json before failing
    plan_sha256: str = ""  # plan.json must have this digest (empty: a launch that gave none)

    @classmethod
    def from_env(cls, env=None) -> AgentConfig:
        """Read FINETUNE_AGENT_* (and FINETUNE_ML_ROOT); ConfigError names what is missing."""
        env = os.environ if env is None else env
        missing = [k for k in (p.ENV_BUCKET, p.ENV_PREFIX, p.ENV_DATASET) if not env.get(k)]
        if missing:
            raise ConfigError(
                f"the agent needs {', '.join(missing)} in its environment",
                "start it through the EC2 user data `finetune launch --backend ec2` generates.",
            )
        prefix = env[p.ENV_PREFIX]
        try:
            return cls(
                bucket=env[p.ENV_BUCKET],
                prefix=prefix if prefix.endswith("/") else prefix + "/",
                dataset_uri=env[p.ENV_DATASET],
                attempt=int(env.get(p.ENV_ATTEMPT, "1")),
                ml_root=Path(env.get("FINETUNE_ML_ROOT") or "/opt/ml"),
                imds_url=env.get(p.ENV_IMDS) or DEFAULT_URL,
                upload_interval=float(env.get(p.ENV_INTERVAL, "30")),
                poll_interval=float(env.get(p.ENV_POLL, "5")),
                stop_grace=float(env.get(p.ENV_GRACE, "100")),
                trainer=_command(env.get(p.ENV_TRAINER)) or cls.trainer,
                shutdown=_command(env.get(p.ENV_SHUTDOWN)),
                hosts=int(env.get(p.ENV_HOSTS, "1")),
                hosts_wait=float(env.get(p.ENV_HOSTS_WAIT, "600")),
                plan_sha256=env.get(p.ENV_PLAN_SHA256, "").strip().lower(),
            )
        except ValueError as exc:
            raise ConfigError(
                f"an agent setting is not a number ({exc})",
                f"check {p.ENV_ATTEMPT}, {p.ENV_INTERVAL}, {p.ENV_POLL}, {p.ENV_GRACE}, "
                f"{p.ENV_HOSTS} and {p.ENV_HOSTS_WAIT}.",
            ) from None

    @property
    def log_file(self) -> Path:
        return self.ml_root / "output" / "train.log"


def _command(text: str | None) -> tuple[str, ...]:
    return tuple(shlex.split(text)) if text else ()
