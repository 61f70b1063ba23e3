"""The Plan of a run (model.py: what it is) and how one is built (build.py)."""

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
