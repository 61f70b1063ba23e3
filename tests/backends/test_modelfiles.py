"""A fetched model folder is renamed into place only when whole: the one model-folder check
(finetune.contracts.container) refuses an incomplete one with the same message as predict."""

from __future__ import annotations

import pytest

from finetune.backends import modelfiles
from finetune.contracts.container import MODEL_FILES
from finetune.errors import DataError


def test_an_incomplete_download_is_refused_and_not_placed(tmp_path):
    dest = tmp_path / "models" / "ft-1" / "job"
    with pytest.raises(DataError) as err:
        modelfiles.into_place(dest, lambda tmp: (tmp / "classes.json").write_text("{}"))
    assert str(err.value).startswith(
        "the downloaded model of job is not a finetune model folder: it lacks "
        "preprocessing.json, hyperparameters.json"
    )
    assert "give the id of a completed run" in str(err.value)
    assert not dest.exists()


def test_a_whole_download_is_placed(tmp_path):
    dest = tmp_path / "models" / "ft-1" / "job"

    def fill(tmp):
        for name in MODEL_FILES:
            (tmp / name).write_text("{}")

    assert modelfiles.into_place(dest, fill) == dest
    assert sorted(p.name for p in dest.iterdir()) == sorted(MODEL_FILES)
