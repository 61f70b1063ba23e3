"""The demo's claim: fine-tuned vs from-scratch validation accuracy, epoch by epoch, and
whether transfer learning showed what it gives (finetune.service.demo runs the trainings).

What a user reads off the table and the plot, each checked: the fine-tuned model is ahead of
the one from scratch at every epoch and at the end by FINAL_MARGIN; the source model it
started from learned its task (SOURCE_MIN); neither run's training loss jumped (MAX_LOSS_RATIO
between consecutive epochs). The margins measured at the default sizes, three seeds and one and
two threads: docs/decisions/180-demo-sizes.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

FINAL_MARGIN = 0.10  # fine-tuned minus scratch at the last epoch, at least
SOURCE_MIN = 0.85  # the source model's validation accuracy, at least: weights worth moving
MAX_LOSS_RATIO = 1.5  # no epoch's training loss above this times the previous epoch's


@dataclass(frozen=True)
class Transfer:
    """Fine-tuned vs from-scratch validation accuracy (and training loss), epoch by epoch, and
    the source model's validation accuracy. ``judged``: whether the claim applies (the default
    sizes and schedule, where its margins were measured); at other sizes the comparison is
    shown, not judged."""

    fine: list[float]
    scratch: list[float]
    fine_loss: list[float] = field(default_factory=list)
    scratch_loss: list[float] = field(default_factory=list)
    source_acc: float | None = None
    judged: bool = True
    val_count: int = 0  # validation images behind each accuracy (0: not known)

    @property
    def gains(self) -> list[float]:
        return [f - s for f, s in zip(self.fine, self.scratch, strict=True)]

    @property
    def final_gain(self) -> float:
        return self.gains[-1] if self.fine else 0.0

    @property
    def loss_ratio(self) -> float:
        """The largest rise of the training loss from one epoch to the next, either run
        (1.0 or less: it never rose)."""
        ratios = [b / a for losses in (self.fine_loss, self.scratch_loss)
                  for a, b in pairwise(losses) if a > 0]  # fmt: skip
        return max(ratios, default=1.0)

    def checks(self) -> list[tuple[bool, str]]:
        """(holds, what a user reads) for each part of the claim."""
        g = self.gains
        low = min(range(len(g)), key=g.__getitem__) if g else 0
        source = self.source_acc if self.source_acc is not None else 0.0
        return [
            (bool(g) and min(g) > 0,
             f"fine-tuned ahead at every epoch (smallest gain {g[low] if g else 0:+.3f}, "
             f"epoch {low + 1})"),
            (bool(g) and self.final_gain >= FINAL_MARGIN,
             f"ahead at the end by {self.final_gain:+.3f} (at least {FINAL_MARGIN:.2f})"),
            (source >= SOURCE_MIN,
             f"the source model it started from: {source:.1%} validation accuracy (at least "
             f"{SOURCE_MIN:.0%})"),
            (self.loss_ratio <= MAX_LOSS_RATIO,
             f"no training loss jump: largest rise {self.loss_ratio:.2f}x the previous epoch's "
             f"(at most {MAX_LOSS_RATIO:g}x)"),
        ]  # fmt: skip

    @property
    def holds(self) -> bool:
        return all(ok for ok, _ in self.checks())

    @property
    def failed(self) -> bool:
        """The claim applies here and does not hold: the demo says so and exits non-zero."""
        return self.judged and not self.holds

    def lines(self) -> list[str]:
        rows = ["  epoch  fine-tuned  from scratch   gain"]
        for i, (f, s, g) in enumerate(zip(self.fine, self.scratch, self.gains, strict=True)):
            rows.append(f"  {i + 1:>5}  {f:>10.3f}  {s:>12.3f}  {g:+.3f}")
        if self.val_count:
            rows.append(
                f"  ({self.val_count} validation images: one image is "
                f"{100 / self.val_count:.2f} points)"
            )
        for ok, text in self.checks():  # (not judged: the values alone)
            rows.append(f"  {('ok' if ok else 'NO') if self.judged else '-':>5}  {text}")
        if not self.judged:
            rows.append(
                "  not judged at these sizes (the claim is stated, and its margins measured, "
                "for the default data and schedule)"
            )
        else:
            rows.append(f"  transfer {'holds' if self.holds else 'DOES NOT HOLD'}")
        return rows


def transfer(fine_epochs, scratch_epochs, source_epochs=(), judged: bool = True) -> Transfer:
    """The comparison from the runs' epoch metrics; the source model's accuracy is its best
    epoch's (the weights a run leaves are its best checkpoint's)."""
    fine, scratch = list(fine_epochs), list(scratch_epochs)
    n = min(len(fine), len(scratch))
    fine, scratch = fine[:n], scratch[:n]
    source = [e.val_acc for e in source_epochs if e.val_acc is not None]
    return Transfer(
        [e.val_acc or 0.0 for e in fine],
        [e.val_acc or 0.0 for e in scratch],
        [e.train_loss for e in fine],
        [e.train_loss for e in scratch],
        max(source) if source else None,
        judged,
        (fine[-1].val_count or 0) if fine else 0,
    )
