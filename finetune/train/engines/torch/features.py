"""The run record's account of the recipe features this run trained with (beside the
hyperparameters, which say what was asked): the class weights resolved from the dataset,
the optimizer's groups, and which weights validated and went into the artifact."""

from __future__ import annotations


def record(s) -> dict:
    """``recipe_features`` of TorchSession ``s`` (passed in: the session uses this module)."""
    hp = s.hp
    groups = [
        {"lr_mult": g["lr_mult"], "weight_decay": g["weight_decay"], "params": len(g["params"])}
        for g in s.optimizer.param_groups
    ]
    averaged = s.ema is not None and hp.ema_evaluate
    return {
        "recipe_features": {
            "augment": hp.auto_augment if hp.auto_augment != "none" else None,
            "random_erasing": hp.random_erasing,
            "mixing": s.mixer is not None,
            "label_smoothing": hp.label_smoothing,
            "class_weights": s.class_weights,
            "optimizer": hp.optimizer,
            "param_groups": groups,
            "clip_grad_norm": hp.clip_grad_norm or None,
            "ema": {"decay": hp.ema_decay, "warmup_steps": hp.ema_warmup_steps}
            if s.ema is not None
            else None,
            # which weights validation, the best checkpoint, the test split and the
            # artifact used: the trained ones or their average
            "evaluated_weights": "ema" if averaged else "trained",
        }
    }
