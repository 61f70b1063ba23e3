"""Issue 49, item 7: a resume whose checkpoints are all damaged starts over from epoch 1, and
says so in the trainer's log (the line `finetune runs logs` shows) instead of starting over
while the launch said "Resumed from its last checkpoint"."""

from __future__ import annotations

import pytest

from finetune.service.logtext import log_for_people

from ...conftest import Output, hparams, make_tree, start_trainer

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # two real trainings


def test_every_checkpoint_damaged_is_said_and_training_starts_over(tmp_path, tiny_dataset):
    hp = hparams(engine="torch", model="resnet18", loader_workers=0, optimizer="sgd",
                 epochs=1, max_batches_per_epoch=2)  # fmt: skip
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    first = Output(start_trainer(root))
    assert first.finish() == 0, first.text()
    folders = sorted((root / "checkpoints").glob("ckpt-*"))
    assert folders, first.text()
    for folder in folders:  # a bit flipped in every file: each checkpoint is damaged
        for f in folder.iterdir():
            if f.name not in ("COMPLETE", "state.json"):
                data = bytearray(f.read_bytes())
                data[len(data) // 2] ^= 0x01
                f.write_bytes(bytes(data))
    second = Output(start_trainer(root))
    assert second.finish() == 0, second.text()
    said = log_for_people(second.text())
    names = ", ".join(f.name for f in reversed(folders))
    assert (
        f"finetune-warning no checkpoint to resume from: every one in {root / 'checkpoints'} "
        f"is damaged or incomplete ({names}); training starts over from epoch 1"
    ) in said, said
    assert "finetune-resume" not in second.text()
    assert second.values("finetune-metrics", "epoch") == [0]  # it trained epoch 1 again
