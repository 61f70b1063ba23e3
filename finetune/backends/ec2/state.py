"""What the EC2 backend remembers about a run, in RUN_DIR/ec2.json.

`runs show`, `runs stop` and `launch --resume` get the backend without any launch options,
so the options given at launch (restarts, fallbacks, subnets, runtime cap) are kept here
along with every attempt: which instance, where, on which market, at what price, how it
ended. Written atomically; the ledger keeps the charges made of them (ec2/cost.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from finetune.backends.ec2.options import Ec2Options
from finetune.errors import DataError
from finetune.files import write_atomic

STATE_FILE = "ec2.json"


@dataclass(frozen=True)
class Candidate:
    """An instance type on a market: what an attempt may launch (priced by ec2/cost.py)."""

    instance_type: str
    spot: bool

    def describe(self) -> str:
        return f"{self.instance_type} ({'spot' if self.spot else 'on-demand'})"


@dataclass
class AttemptRecord:
    """One instance's life for a run."""

    n: int
    instance_id: str
    instance_type: str
    spot: bool
    subnet_id: str
    az: str
    launched_at: float
    ended_at: float | None = None
    outcome: str | None = None  # completed | failed | interrupted | stopped
    reason: str | None = None
    usd_per_hour: float | None = None  # per instance, recorded at launch (ec2/cost.py)
    price_source: str = ""
    price_as_of: str | None = None
    interrupted_by_ec2: bool = False  # EC2 took the spot capacity back (AWS bills it apart)
    instance_ids: list[str] = field(default_factory=list)  # every host, algo-1 first

    @property
    def hosts(self) -> list[str]:
        return list(self.instance_ids) or [self.instance_id]

    @property
    def open(self) -> bool:
        return self.outcome is None


@dataclass
class Ec2State:
    region: str
    bucket: str
    prefix: str
    dataset_uri: str
    image: str
    owner: str
    options: Ec2Options
    instance_profile: str = ""
    plan_sha256: str = ""  # of plan.json as the launch wrote it ("" : a run of an older finetune)
    attempts: list[AttemptRecord] = field(default_factory=list)
    stop_requested: bool = False
    done: bool = False  # the run's last attempt ended and no relaunch follows
    restarts: int = 0
    tried: list[str] = field(default_factory=list)  # capacity tries of the latest launch
    intent: dict | None = None  # an attempt about to be launched (see ec2/instances/intent.py)

    @property
    def current(self) -> AttemptRecord | None:
        return self.attempts[-1] if self.attempts else None

    def launched(self) -> AttemptRecord:
        """The current attempt, where the caller knows one was launched (a state without
        any is a torn or edited ec2.json: said, not an AttributeError on None)."""
        if not self.attempts:
            raise DataError(f"{STATE_FILE} records no launched attempt",
                            "check the run with `finetune runs show`; stop it and launch again "
                            "if its instances are gone.")  # fmt: skip
        return self.attempts[-1]

    def save(self, run_dir: str | Path) -> None:
        d = {**asdict(self), "options": self.options.model_dump(mode="json")}  # as given
        write_atomic(Path(run_dir) / STATE_FILE, json.dumps(d, indent=1))

    @classmethod
    def load(cls, run_dir: str | Path) -> Ec2State | None:
        path = Path(run_dir) / STATE_FILE
        if not path.is_file():
            return None
        d = json.loads(path.read_text(encoding="utf-8"))
        d["options"] = Ec2Options.stored(d.get("options", {}))
        d["attempts"] = [AttemptRecord(**a) for a in d.get("attempts", [])]
        return cls(**d)
