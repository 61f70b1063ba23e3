"""`finetune check`: is this machine and account ready for a cloud run? The account's items
once (credentials, region, bucket), then each cloud backend's own (image, run role, the GPU
quota of the chosen instance type), each ok, missing with its fix, or unknown with why.
Read-only: nothing is created, nothing is spent."""

from __future__ import annotations

from dataclasses import dataclass, field

from finetune import backends, settings
from finetune.aws import readiness as r


@dataclass
class Report:
    """Items by section: "account", then one section per backend checked."""

    sections: dict[str, list[r.Item]] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(i.status == status for items in self.sections.values() for i in items)

    @property
    def blocked(self) -> bool:
        """Something is missing: a launch would fail (the command exits 1)."""
        return self.count(r.MISSING) > 0

    @property
    def ready(self) -> bool:
        """Nothing missing and nothing unknown: only then is the account called ready."""
        return not self.blocked and self.count(r.UNKNOWN) == 0

    def to_dict(self) -> dict:
        return {
            "ready": self.ready,
            "missing": self.count(r.MISSING),
            "unknown": self.count(r.UNKNOWN),
            "sections": {k: [i.to_dict() for i in v] for k, v in self.sections.items()},
        }


def check(
    backend: str | None = None,
    region: str | None = None,
    instance: str | None = None,
    spot: bool = False,
) -> Report:
    """Every item for ``backend`` (None: each cloud backend, or the one an ``instance``
    implies); a backend's items need credentials and a region, else they are not asked."""
    named, _ = backends.implied(backend, instance)
    if named:
        backends.check_name(named)
    names = [named] if named else backends.with_readiness()
    if named and named not in backends.with_readiness():  # this machine: no account to check
        return Report({named: [r.Item("backend", r.OK, "trains here: needs no cloud account")]})
    where = r.region(region)
    who, aws = r.credentials(region)
    account = [who, where]
    report = Report({"account": account})
    if aws is None or where.status != r.OK:
        why = "not checked: needs credentials and a region"
        fix = "fix the account's items above, then check again."
        for name in names:
            report.sections[name] = [r.Item("backend", r.UNKNOWN, why, fix)]
        return report
    account.append(r.bucket(aws, settings.get().bucket))
    for name in names:
        report.sections[name] = backends.readiness(name, aws, instance, spot)
    return report
