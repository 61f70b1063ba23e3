"""A run's model folder: where it is, and what it says about itself.

Every engine's folder holds ``classes.json`` (class names in the order of the network's
outputs), ``preprocessing.json`` (the validation transform the run was measured with) and
``hyperparameters.json`` (the engine and the model), beside the engine's own files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from finetune import settings
from finetune.backends import get_backend
from finetune.contracts.container import MODEL_FILES, check_model_folder, model_written
from finetune.engines import registry
from finetune.errors import DataError
from finetune.runs.ledger import open_default

CLASSES, PREPROCESSING, HYPERPARAMETERS = MODEL_FILES


@dataclass(frozen=True)
class ModelFolder:
    """A complete model folder and the facts prediction needs."""

    path: Path
    engine: str
    model: str
    classes: list[str]
    image_size: int
    run_id: str | None = None

    @classmethod
    def open(cls, path: Path, run_id: str | None = None) -> ModelFolder:
        """Read a model folder; a DataError names what is missing."""
        check_model_folder(path)
        try:
            classes = json.loads((path / CLASSES).read_text("utf-8"))
            hp = json.loads((path / HYPERPARAMETERS).read_text("utf-8"))
            return cls(
                path=path,
                # runs before the torch engine were MXNet's: the registry's default
                engine=hp.get("engine", registry.DEFAULT),
                model=hp.get("model", "?"),
                classes=list(classes["classes"]),
                image_size=int(classes["image_size"]),
                run_id=run_id,
            )
        except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
            why = f"{type(exc).__name__}: {exc}" if not isinstance(exc, OSError) else exc
            raise DataError(f"{path}: unreadable model description ({why})", _AGAIN) from None


_AGAIN = "use the model folder of a completed run (or download it again)."


def locate(run_or_folder: str) -> ModelFolder:
    """The model of a run id (or unique prefix) in the ledger, or a model folder path."""
    path = Path(run_or_folder).expanduser()
    if path.is_dir():
        return ModelFolder.open(path)
    with open_default() as ledger:
        run = ledger.get(run_or_folder)
    return ModelFolder.open(run_model_dir(run), run.id)


def run_model_dir(run) -> Path:
    """Where a run's model is on this machine: the folder its trainer wrote here, else (a
    completed cloud run) a copy its backend downloads once into the cache. A DataError when
    it has none yet (still running, failed)."""
    folder = Path(run.run_dir or ".") / "ml" / "model"
    if (folder / PREPROCESSING).is_file():
        return folder
    if run.status != "completed":
        raise DataError(
            f"run {run.id} is {run.status}: it has no model",
            "wait until `finetune runs show RUN` says completed, or resume it with "
            "`finetune launch --resume RUN`.",
        )
    # one copy per job (the backend's reference): a run resumed and completed again by a
    # new job (SageMaker JOB-r1, a new EC2 attempt) gets its new model, not the old copy
    job = hashlib.sha256((run.backend_ref or "").encode()).hexdigest()[:12]
    cached = settings.get().cache_dir / "models" / run.id / job
    if model_written(cached):
        return cached  # downloaded before (folders are renamed into place only when whole)
    return get_backend(run.backend).fetch_model(run, cached)
