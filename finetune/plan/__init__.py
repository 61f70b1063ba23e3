"""The Plan of a run (plan.py: what it is), how one is built (build.py), its time and euro
estimate through the one estimator (estimate.py), and datasets known by their counts alone
(known.py)."""

from finetune.plan.build import (
    build_plan,
    derive,
    hyperparameters,
    summarize_dataset,
)
from finetune.plan.plan import SCHEMA_VERSION, DatasetSummary, Derived, Plan, Resources

__all__ = [
    "SCHEMA_VERSION",
    "DatasetSummary",
    "Derived",
    "Plan",
    "Resources",
    "build_plan",
    "derive",
    "hyperparameters",
    "summarize_dataset",
]
