"""`finetune predict` and `finetune export`: one library call each.

Prediction packs the images as a .rec and has the run's engine read it through its
validation transform (the one the run's accuracy was measured with), batched as in
validation; the scores become top-k classes with softmax probabilities.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from finetune import files
from finetune.contracts.container import MODEL_FILES
from finetune.contracts.engine import runtime
from finetune.data.imaging import MAX_PIXELS
from finetune.errors import DataError, UsageError
from finetune.inference import artifact, exportdir, inputs


@dataclass(frozen=True)
class Prediction:
    """One image's top-k classes, best first, with probabilities."""

    image: str
    classes: list[str]
    labels: list[int]
    probabilities: list[float]

    def as_dict(self) -> dict:
        """The JSON record: image, the first class (class, label, probability), ``next``
        (the ones after it) and ``top``, every class asked for in order (the table shows
        one row per class, as the CSV does)."""
        top = [
            {"class": c, "label": i, "probability": p}
            for c, i, p in zip(self.classes, self.labels, self.probabilities, strict=True)
        ]
        return {"image": self.image, **top[0], "next": top[1:], "top": top}


@dataclass(frozen=True)
class PredictResult:
    model: artifact.ModelFolder
    predictions: list[Prediction]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why): not classified

    def skipped_error(self) -> DataError | None:
        """The files that were not classified, as the error the command ends with."""
        if not self.skipped:
            return None
        return DataError(
            f"{len(self.skipped)} of {len(self.skipped) + len(self.predictions)} files were "
            f"skipped, not classified (the others were):\n{_listing(self.skipped)}",
            _SKIPPED_FIX,
        )


_SKIPPED_FIX = (
    "repair, convert (to JPEG or PNG) or leave out those files; for an image that is only "
    "larger than the pixel limit, raise --max-pixels if you trust it."
)


def _listing(skipped: list[tuple[str, str]], shown: int = 20) -> str:
    lines = [f"  {name}: {why}" for name, why in skipped[:shown]]
    if len(skipped) > shown:
        lines.append(f"  ... and {len(skipped) - shown} more")
    return "\n".join(lines)


def predict(
    run_or_folder: str, paths: list[str], top_k: int = 5, max_pixels: int = MAX_PIXELS
) -> PredictResult:
    """Classify the images in ``paths`` (files or folders) with a run's model. A file that is
    not a readable image, or has more than ``max_pixels`` pixels, is skipped and listed in
    the result (``skipped``); when no file is left, a DataError lists them all."""
    import numpy as np

    if top_k < 1:
        raise UsageError(f"--top-k {top_k} asks for no classes", "give --top-k 1 or more.")
    model = artifact.locate(run_or_folder)
    images = inputs.collect(paths)
    with tempfile.TemporaryDirectory(prefix="finetune-predict-") as tmp:
        packed = inputs.pack(images, Path(tmp), max_pixels)
        skipped = [(str(path), why) for path, why in packed.skipped]
        if not packed.images:
            raise DataError(
                f"none of the {len(images)} files is an image that can be classified:\n"
                f"{_listing(skipped)}",
                _SKIPPED_FIX,
            )
        images = packed.images
        scores = runtime(model.engine).predict_scores(model.path, packed.rec, packed.idx)
    if scores.shape != (len(images), len(model.classes)):
        raise DataError(
            f"the model gave scores of shape {scores.shape} for {len(images)} images of "
            f"{len(model.classes)} classes",
            "the model folder is inconsistent: use the folder of a completed run as it was.",
        )
    k = min(top_k, len(model.classes))
    probs = _softmax(scores.astype(np.float64))
    top = np.argsort(-scores.astype(np.float64), axis=1, kind="stable")[:, :k]
    out = [
        Prediction(
            str(path),
            [model.classes[j] for j in row],
            [int(j) for j in row],
            [float(probs[i, j]) for j in row],
        )
        for i, (path, row) in enumerate(zip(images, top, strict=True))
    ]
    return PredictResult(model, out, skipped)


def export(run_or_folder: str, out: Path | None = None, overwrite: bool = False) -> Path:
    """Write a run's model in a portable form to ``out`` (default ./RUN-export): the
    engine's files (ONNX for torch, symbol + params for MXNet), the class map, the
    preprocessing and a marker listing them. Written to a temporary folder, then renamed into
    place; ``overwrite`` replaces only a folder an earlier export wrote, never '/', the home
    or the current folder, and a failed export leaves the old one as it was."""
    model = artifact.locate(run_or_folder)
    out = Path(out).expanduser() if out else Path(f"{model.run_id or model.path.name}-export")
    if overwrite:
        files.refuse_protected(out, "--out")  # before anything else looks inside it

    def fill(tmp: Path) -> None:
        runtime(model.engine).export(model.path, tmp)
        for name in MODEL_FILES:
            shutil.copyfile(model.path / name, tmp / name)
        exportdir.seal(tmp, model.run_id)

    try:
        return files.publish(out, fill, exportdir.check_replaceable if overwrite else None)
    except files.Occupied:
        raise UsageError(
            f"{out} already exists", "choose another --out, or add --overwrite."
        ) from None
    except OSError as exc:
        raise _write_error(out, exc) from None


def _write_error(out: Path, exc: OSError) -> DataError:
    """What a failed write of an export means (nothing was published, an old one is kept)."""
    why = f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some space there, or choose an --out on another disk."
    elif exc.errno in (errno.ENOTDIR, errno.EEXIST):
        where = exc.filename or out.parent
        fix = f"{where} is a file where a folder is needed: choose another --out."
    else:
        fix = "choose an --out in a folder you can write to."
    return DataError(f"cannot write the export to {out}: {why}; nothing was written", fix)


def _softmax(scores):
    import numpy as np

    shifted = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)
