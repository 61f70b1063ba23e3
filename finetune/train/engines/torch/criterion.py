"""The training loss: cross entropy with label smoothing and class weights, on hard labels or
on the soft targets of mixed batches (finetune.train.engines.torch.mixing).

Both are torch's own ``cross_entropy``: with ``label_smoothing`` e the target becomes
``(1 - e) * target + e / classes``; with class weights w a hard-label batch's loss is
``sum_i w[y_i] * l_i / sum_i w[y_i]`` and a soft-target batch's the mean over images of
``-sum_c w_c t_c log p_c``. When mixing is on, every batch (mixed or not) uses soft targets,
so one normalisation holds for the whole run.

``balanced`` weights are scikit-learn's: ``n / (classes x n_c)`` from the training split's
per-class counts in the dataset's manifest.
"""

from __future__ import annotations

import torch

from finetune.errors import ConfigError


def balanced_weights(counts: list[int]) -> list[float]:
    """``n / (k * n_c)`` for each class c of ``counts`` (k classes, n images)."""
    empty = [c for c, n in enumerate(counts) if n <= 0]
    if empty:
        raise ConfigError(
            f"loss.class_weights=balanced: class {empty[0]} has no training images",
            "prepare the dataset with images in every class, or give the weights as a list.",
        )
    n, k = sum(counts), len(counts)
    return [n / (k * c) for c in counts]


def class_weights(hp, train_counts: list[int]) -> list[float] | None:
    """The run's class weights (None: all equal), checked against the class count."""
    asked = hp.class_weights
    if asked == "none":
        return None
    if asked == "balanced":
        return balanced_weights(train_counts)
    if len(asked) != hp.num_classes:
        raise ConfigError(
            f"class_weights has {len(asked)} weights for {hp.num_classes} classes",
            f"give {hp.num_classes} weights in label order, or class_weights=balanced.",
        )
    return [float(w) for w in asked]


class Criterion:
    """``loss(out, y, target)``: hard labels ``y`` when ``target`` is None, else the soft
    targets."""

    def __init__(self, smoothing: float, weights: list[float] | None, device) -> None:
        self.smoothing = smoothing
        self.weight = None if weights is None else torch.tensor(weights, device=device)

    def __call__(self, out: torch.Tensor, y: torch.Tensor, target: torch.Tensor | None):
        goal = y if target is None else target
        return torch.nn.functional.cross_entropy(
            out, goal, weight=self.weight, label_smoothing=self.smoothing
        )
