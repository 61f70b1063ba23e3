"""The recipe features of today's fine-tuning (torch engine only): augmentation policies and
batch mixing (``augment:``), the loss (``loss:``), an average of the weights (``ema:``); the
optimizer's AdamW, layer-wise rate decay and clipping are keys of ``optimizer:``.

Defaults switch every feature off, so a recipe without these sections trains as before. The
MXNet engine has none of them: :func:`torch_only_keys` names the ones a recipe set, and the
Recipe refuses them there. Sources of each default: docs/training.md, "Recipe features".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from finetune.errors import ConfigError, did_you_mean

Policy = Literal["none", "trivial_augment_wide", "rand_augment"]


class _Feature(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AugmentSection(_Feature):
    """Per-image policies after the crop (torchvision's --auto-augment, --random-erase) and
    batch mixing (timm's Mixup: mixup, cutmix, the chance to mix, the chance of cutmix)."""

    policy: Policy = "none"
    rand_ops: int = Field(2, ge=1, le=14)  # RandAugment: operations per image
    rand_magnitude: int = Field(9, ge=0, le=30)  # RandAugment: strength, of 31 bins
    random_erasing: float = Field(0.0, ge=0, le=1)  # probability an image gets a random box erased
    mixup_alpha: float = Field(0.0, ge=0, allow_inf_nan=False)  # Beta(a, a); 0: off
    cutmix_alpha: float = Field(0.0, ge=0, allow_inf_nan=False)  # Beta(a, a); 0: off
    mix_prob: float = Field(1.0, ge=0, le=1)  # chance a batch is mixed at all
    switch_prob: float = Field(0.5, ge=0, le=1)  # with both on: chance of cutmix


class LossSection(_Feature):
    """Cross entropy's label smoothing and per-class weights."""

    label_smoothing: float = Field(0.0, ge=0, lt=1)
    # "balanced": n / (classes x count of the class) from the training split's counts
    class_weights: Literal["none", "balanced"] | tuple[float, ...] = "none"

    @field_validator("class_weights", mode="before")
    @classmethod
    def _word(cls, value):
        if isinstance(value, str) and value not in ("none", "balanced"):
            hint = did_you_mean(value, ["none", "balanced"])
            raise ValueError(f"use none, balanced or a list of weights.{hint}")
        return value

    @field_validator("class_weights")
    @classmethod
    def _positive(cls, value):
        if isinstance(value, tuple):
            if len(value) < 2:
                raise ValueError("give one weight per class (at least two), or 'balanced'")
            if not all(0 < w < float("inf") for w in value):
                raise ValueError("class weights must be positive finite numbers")
        return value


class EmaSection(_Feature):
    """An exponential moving average of the weights, updated after every step."""

    decay: float = Field(0.0, ge=0, lt=1)  # 0: off; e.g. 0.9998
    warmup: int = Field(0, ge=0)  # steps during which the average is the weights themselves
    evaluate: bool = True  # validate, choose the best, test and export with the average


# the keys each section adds, with their "off" values (a recipe that sets one needs torch)
OPTIMIZER_KEYS = {"betas": (0.9, 0.999), "layer_decay": 1.0, "clip_grad_norm": 0.0,
                  "decay_norm_bias": None}  # fmt: skip


def set_features(recipe) -> dict[str, object]:
    """The torch-only keys ``recipe`` sets away from "off", with their values, by dotted key
    (``optimizer.name`` when it is adamw)."""
    out: dict[str, object] = {}
    for section in ("augment", "loss", "ema"):
        part = getattr(recipe, section)
        for key, field in type(part).model_fields.items():
            if getattr(part, key) != field.default:
                out[f"{section}.{key}"] = getattr(part, key)
    opt = recipe.optimizer
    out.update({f"optimizer.{k}": getattr(opt, k) for k, off in OPTIMIZER_KEYS.items()
                if getattr(opt, k) != off})  # fmt: skip
    if opt.name == "adamw":
        out["optimizer.name"] = "adamw"
    return dict(sorted(out.items()))


def torch_only_keys(recipe) -> list[str]:
    """The dotted keys of ``recipe`` that only the torch engine implements, as set."""
    return [k if k != "optimizer.name" else "optimizer.name=adamw" for k in set_features(recipe)]


def summary(recipe) -> str:
    """The features a recipe turns on, for --dry-run ("" when none)."""

    def text(value) -> str:
        if isinstance(value, tuple):
            return "[" + ", ".join(f"{v:g}" for v in value) + "]"
        return f"{value:g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{k}={text(v)}" for k, v in set_features(recipe).items())


def hparams_fields(recipe, num_classes: int) -> dict:
    """The trainer's hyperparameters of these features (finetune.contracts.hparams), checked
    against the dataset's class count."""
    a, loss, ema, opt = recipe.augment, recipe.loss, recipe.ema, recipe.optimizer
    weights = loss.class_weights
    if isinstance(weights, tuple) and len(weights) != num_classes:
        raise ConfigError(
            f"loss.class_weights has {len(weights)} weights, the dataset has {num_classes} classes",
            f"give {num_classes} weights in label order, or loss.class_weights=balanced.",
        )
    no_decay_default = opt.name == "adamw"  # timm's filter_bias_and_bn for AdamW
    return dict(
        auto_augment=a.policy,
        rand_augment_ops=a.rand_ops,
        rand_augment_magnitude=a.rand_magnitude,
        random_erasing=a.random_erasing,
        mixup_alpha=a.mixup_alpha,
        cutmix_alpha=a.cutmix_alpha,
        mix_prob=a.mix_prob,
        mix_switch_prob=a.switch_prob,
        label_smoothing=loss.label_smoothing,
        class_weights=weights,
        ema_decay=ema.decay,
        ema_warmup_steps=ema.warmup,
        ema_evaluate=ema.evaluate,
        betas=opt.betas,
        layer_decay=opt.layer_decay,
        clip_grad_norm=opt.clip_grad_norm,
        wd_norm_bias=(not no_decay_default) if opt.decay_norm_bias is None else opt.decay_norm_bias,
    )
