"""mx.io.ImageRecordIter over the prepared .rec/.idx, with SageMaker's augmentation presets.

The presets are those of SageMaker's built-in image-classification algorithm
(``augmentation_type``): ``crop`` = random crop + horizontal flip; ``crop_color`` adds random
hue/saturation/lightness shifts of up to 36/50/50; ``crop_color_transform`` adds rotation up
to 10 degrees, shear up to 0.1 and aspect-ratio change up to 0.25. Validation is a centre crop
of the image resized to image_size / 0.875 (256 for 224), the usual ImageNet evaluation.
"""

from __future__ import annotations

import os
from pathlib import Path

import mxnet as mx

from finetune.hparams import TrainHyperparameters

_CROP = {"rand_crop": True, "rand_mirror": True}
_COLOR = {"random_h": 36, "random_s": 50, "random_l": 50}
_TRANSFORM = {"max_rotate_angle": 10, "max_shear_ratio": 0.1, "max_aspect_ratio": 0.25}
AUGMENTATIONS: dict[str, dict] = {
    "none": {},
    "crop": _CROP,
    "crop_color": {**_CROP, **_COLOR},
    "crop_color_transform": {**_CROP, **_COLOR, **_TRANSFORM},
}
VAL_CROP_FRACTION = 0.875


def preprocess_threads() -> int:
    """Decode threads: every core this process may use (MXNet caps it further itself)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def record_iter(
    rec: Path,
    idx: Path,
    hp: TrainHyperparameters,
    batch_size: int,
    train: bool,
    num_parts: int = 1,
    part_index: int = 0,
):
    """A shuffled, augmented training iterator or a plain validation one. ``num_parts`` /
    ``part_index`` give each host of a cluster its own share of the records."""
    mean_r, mean_g, mean_b = hp.mean
    std_r, std_g, std_b = hp.std
    size = hp.image_size
    extra = AUGMENTATIONS[hp.augmentation] if train else {"resize": round(size / VAL_CROP_FRACTION)}
    return mx.io.ImageRecordIter(
        path_imgrec=str(rec),
        path_imgidx=str(idx),
        data_shape=(3, size, size),
        batch_size=batch_size,
        shuffle=train,
        # training pads its last batch by wrapping around (every batch full for the
        # static-shape graph); validation marks padding in batch.pad and we skip it
        round_batch=train,
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
        seed=hp.seed,
        **extra,
    )
