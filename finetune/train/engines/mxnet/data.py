"""mx.io.ImageRecordIter over the prepared .rec/.idx, implementing the preprocessing contract.

Both splits resize the shorter side to ``resize_shorter`` first (finetune.train.preprocess),
so training and validation see one scale whatever resolution `prepare` stored. Training then
takes a random ``image_size`` square (``crop``) or a random-resized crop (``resized_crop``)
and flips; the colour and affine presets are those of SageMaker's built-in
image-classification algorithm. Validation takes the centre square. OpenCV's INTER_LINEAR
does the resizing (``inter_method=1``).

Neither iterator pads with ``round_batch``: with it, MXNet's prefetcher makes the number and
content of padded records depend on thread timing (runs stop being reproducible). Training
takes whole batches only (finetune.recipes.lr_scaling.steps_per_epoch); evaluation counts each
record exactly once itself (finetune.train.evaluation) and ignores the repeated tail.
"""

from __future__ import annotations

import os
from pathlib import Path

from finetune.contracts.hparams import TrainHyperparameters
from finetune.train.engines.mxnet.zoo import mxnet
from finetune.train.preprocess import Preprocessing

mx = mxnet()  # MXNet without scikit-learn's import (zoo.py)

INTER_LINEAR = 1  # OpenCV's bilinear (MXNet's inter_method)
INTER_CUBIC = 2  # OpenCV's bicubic (the contract's bicubic has no ResNet row: unused)


def preprocess_threads() -> int:
    """Decode threads: every core this process may use (MXNet caps it further itself)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def train_options(contract: Preprocessing) -> dict:
    """ImageRecordIter arguments for the contract's training transform."""
    opts: dict = {"resize": contract.resize_shorter, "rand_mirror": contract.flip}
    if contract.train_crop == "random":
        opts["rand_crop"] = True
    elif contract.train_crop == "resized":
        opts.update(
            random_resized_crop=True,
            min_random_area=contract.area[0],
            max_random_area=contract.area[1],
            min_aspect_ratio=contract.ratio[0],
            max_aspect_ratio=contract.ratio[1],
        )
    if contract.color:
        c = contract.color
        opts.update(random_h=c["hue"], random_s=c["saturation"], random_l=c["lightness"])
    if contract.affine:
        a = contract.affine
        opts.update(
            max_rotate_angle=int(a["rotate_deg"]),
            max_shear_ratio=a["shear"],
            max_aspect_ratio=a["aspect"],
        )
    return opts


def record_iter(
    rec: Path,
    idx: Path,
    hp: TrainHyperparameters,
    batch_size: int,
    train: bool,
    num_parts: int = 1,
    part_index: int = 0,
    seed: int | None = None,
):
    """A shuffled, augmented training iterator or a plain, ordered evaluation one.
    ``num_parts`` / ``part_index`` give each host of a cluster its own share of the records;
    ``seed`` (default hp.seed) orders the training shuffle."""
    contract = Preprocessing.from_hparams(hp)
    mean_r, mean_g, mean_b = contract.mean
    std_r, std_g, std_b = contract.std
    size = contract.image_size
    extra = train_options(contract) if train else {"resize": contract.resize_shorter}
    return mx.io.ImageRecordIter(
        path_imgrec=str(rec),
        path_imgidx=str(idx),
        data_shape=(3, size, size),
        batch_size=batch_size,
        shuffle=train,
        round_batch=False,
        inter_method=INTER_CUBIC if contract.interpolation == "bicubic" else INTER_LINEAR,
        mean_r=mean_r,
        mean_g=mean_g,
        mean_b=mean_b,
        std_r=std_r,
        std_g=std_g,
        std_b=std_b,
        preprocess_threads=preprocess_threads(),
        prefetch_buffer=4,
        num_parts=num_parts,
        part_index=part_index,
        seed=hp.seed if seed is None else seed,
        verbose=False,
        **extra,
    )
