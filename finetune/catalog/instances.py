"""GPU instance types: facts from instances.csv, lookup by name, retirement and successors.

Names are accepted as EC2 names ("p3.8xlarge") or SageMaker names ("ml.p3.8xlarge"); both
map to the same facts. P2 and P3 stay in the catalog after AWS retires them, so old runs keep
their meaning, but launching one warns and names the closest current instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from finetune.catalog._files import bundled_text, read_rows
from finetune.catalog.engines import build, engines_for
from finetune.errors import UsageError, did_you_mean

_HEADER = (
    "InstanceType",
    "GpuModel",
    "GpuCount",
    "GpuMemoryGiB",
    "VCPUs",
    "MemoryGiB",
    "ComputeCapability",
    "GpuArchitecture",
    "CpuArchitecture",
    "Status",
    "RetiredOn",
    "Successor",
    "Notes",
)


@dataclass(frozen=True)
class InstanceType:
    """One EC2 GPU instance type (the ml.* SageMaker type of the same name has the same GPUs)."""

    name: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: float  # per GPU
    vcpus: int
    memory_gib: float
    compute_capability: str
    gpu_architecture: str
    cpu_architecture: str
    retired: bool
    retired_on: date | None  # the date AWS gave (None where the catalog does not know it)
    successor: str  # closest current type with the same GPU count, "" if current
    notes: str = ""

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def engines(self) -> tuple[str, ...]:
        """The training engines that run on these GPUs (finetune.catalog.engines decides)."""
        return engines_for(self.compute_capability)

    def sagemaker_name(self) -> str:
        return f"ml.{self.name}"

    def describe(self) -> str:
        """'p3.8xlarge (4x V100 16 GiB, 32 vCPUs, 244 GiB RAM)'."""
        return (
            f"{self.name} ({self.gpu_count}x {self.gpu_model} {self.gpu_memory_gib:g} GiB, "
            f"{self.vcpus} vCPUs, {self.memory_gib:g} GiB RAM)"
        )


def _parse(row: dict[str, str]) -> InstanceType:
    return InstanceType(
        name=row["InstanceType"],
        gpu_model=row["GpuModel"],
        gpu_count=int(row["GpuCount"]),
        gpu_memory_gib=float(row["GpuMemoryGiB"]),
        vcpus=int(row["VCPUs"]),
        memory_gib=float(row["MemoryGiB"]),
        compute_capability=row["ComputeCapability"],
        gpu_architecture=row["GpuArchitecture"],
        cpu_architecture=row["CpuArchitecture"],
        retired=row["Status"] == "retired",
        retired_on=date.fromisoformat(row["RetiredOn"]) if row["RetiredOn"] else None,
        successor=row["Successor"],
        notes=row["Notes"] or "",
    )


@lru_cache(maxsize=1)
def all_instances() -> dict[str, InstanceType]:
    """Every instance type in the bundled catalog, by EC2 name."""
    rows = read_rows(bundled_text("instances.csv"), _HEADER, "instances.csv")
    return {r["InstanceType"]: _parse(r) for r in rows}


def canonical_name(name: str) -> str:
    """'ML.P3.8xlarge ' -> 'p3.8xlarge': SageMaker's ml. prefix and case do not matter."""
    name = name.strip().lower()
    return name[3:] if name.startswith("ml.") else name


def get(name: str) -> InstanceType:
    """The instance type called ``name`` (EC2 or ml.* form), or a UsageError with a suggestion."""
    known = all_instances()
    key = canonical_name(name)
    if key in known:
        return known[key]
    raise UsageError(
        f'Unknown instance type "{name}".{did_you_mean(key, known)}',
        "pick one listed by `finetune prices` (GPU instances only), e.g. g5.xlarge.",
    )


def gpu_models() -> list[str]:
    """GPU model names in the catalog, e.g. ['A100', 'A10G', 'H100', 'K80', ...]."""
    return sorted({i.gpu_model for i in all_instances().values()})


def with_gpu(gpu: str | None = None) -> list[InstanceType]:
    """Instance types carrying ``gpu`` (case-insensitive; None = all), smallest first."""
    items = list(all_instances().values())
    if gpu:
        by_lower = {m.lower(): m for m in gpu_models()}
        if gpu.strip().lower() not in by_lower:
            raise UsageError(
                f'No instance in the catalog has a "{gpu}" GPU.'
                + did_you_mean(gpu.strip().upper(), gpu_models()),
                f"use one of: {', '.join(gpu_models())}.",
            )
        items = [i for i in items if i.gpu_model == by_lower[gpu.strip().lower()]]
    return sorted(items, key=lambda i: (i.gpu_model, i.gpu_count, i.vcpus, i.name))


def successor(instance: InstanceType) -> InstanceType | None:
    """The current instance type the catalog suggests instead of a retired one."""
    return all_instances().get(instance.successor) if instance.successor else None


def retirement_warning(instance: InstanceType | str, today: date | None = None) -> str | None:
    """A warning for a retired (or retiring) type naming its successor; None when current."""
    inst = get(instance) if isinstance(instance, str) else instance
    if not inst.retired:
        return None
    today = today or date.today()
    if inst.retired_on is None:
        when = "has been retired by AWS"
    elif inst.retired_on > today:
        when = f"is being retired by AWS (migrate by {inst.retired_on.isoformat()})"
    else:
        when = f"was retired by AWS ({inst.retired_on.isoformat()})"
    text = f"{inst.name} ({inst.gpu_count}x {inst.gpu_model}) {when}."
    nxt = successor(inst)
    if nxt is not None:
        text += f" Closest current instance: {nxt.describe()}; try --instance {nxt.name}."
    return text


def check_engine(engine: str, instance: InstanceType | str) -> None:
    """UsageError, before anything is created, when ``engine`` cannot run on the GPUs of
    ``instance`` (finetune.catalog.engines decides); says why and what to do instead."""
    inst = get(instance) if isinstance(instance, str) else instance
    b = build(engine)
    if inst.gpu_count < 1 or b.runs_on(inst.compute_capability):
        return
    others = [e for e in engines_for(inst.compute_capability) if e != engine]
    fixes = [
        f"run the recipe with engine={e} (a *-{e} recipe, or `engine: {e}` in yours)"
        for e in others[:1]
    ]
    families = [f for f, cc in _families().items() if b.runs_on(cc)]
    if families:
        fixes.append(f"pick a GPU family it runs on: {', '.join(families)}")
    raise UsageError(
        f"the {engine} engine cannot run on {inst.name}: its {inst.gpu_count}x "
        f"{inst.gpu_model} GPU(s) are {inst.gpu_architecture} (compute capability "
        f"{inst.compute_capability}), and {b.framework} has kernels for {b.kernels} only",
        " or ".join(fixes) + ".",
    )


def _families() -> dict[str, str]:
    """Current instance families and their GPUs' compute capability, in catalog order."""
    out: dict[str, str] = {}
    for inst in all_instances().values():
        if not inst.retired:
            out.setdefault(inst.family, inst.compute_capability)
    return out
