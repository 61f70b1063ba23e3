"""After a spot interruption: whether to relaunch, and what to try, in order (pure).

Order of preference: the same instance type on the same market, first in the interrupted
zone, then in the other allowed zones; then the other allowed instance types; then, when the
user allowed it, on-demand. The run resumes from its last checkpoint in S3 either way.
A relaunch needs restarts left (--max-restarts) and, with --max-eur, money left.
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.backends.ec2.state import Candidate


@dataclass(frozen=True)
class Decision:
    relaunch: bool
    reason: str


def candidates(
    instance_type: str, spot: bool, fallback_types: tuple[str, ...], allow_on_demand: bool
) -> list[Candidate]:
    """Instance type and market choices for a relaunch, best first."""
    out = [Candidate(instance_type, spot)]
    out += [Candidate(t, spot) for t in fallback_types if t != instance_type]
    if spot and allow_on_demand:
        out.append(Candidate(instance_type, False))
    return out


def subnet_order(subnets: list[dict], interrupted_subnet: str | None) -> list[dict]:
    """The interrupted subnet first (capacity often returns within minutes), then the rest."""
    first = [s for s in subnets if s["SubnetId"] == interrupted_subnet]
    return first + [s for s in subnets if s["SubnetId"] != interrupted_subnet]


def decide(restarts_done: int, max_restarts: int, eur_left: float | None) -> Decision:
    """Relaunch only within the restart and euro budgets."""
    if restarts_done >= max_restarts:
        return Decision(
            False,
            f"interrupted {restarts_done + 1} time(s); --max-restarts {max_restarts} reached",
        )
    if eur_left is not None and eur_left <= 0:
        return Decision(False, "interrupted, and the --max-eur budget is spent")
    return Decision(True, f"relaunch {restarts_done + 1} of at most {max_restarts}")
