"""The preprocessing contract: how a stored record becomes a training or a validation tensor.

Every engine implements this one contract, and the model artifact carries it
(``preprocessing.json``), so prediction applies exactly the validation transform the run was
measured with. The reference implementation here (Pillow + numpy) *defines* it; the oracle
tests hold each engine's data path against it.

Both splits first resize the decoded image so that its shorter side is ``resize_shorter``
pixels (the weights' own ratio, e.g. 236 for ConvNeXt-T at 224; for ResNets
``round(image_size / 0.875)``, 256 for 224, the usual ImageNet evaluation ratio), so
the network sees objects at one scale whatever ``prepare --resize`` stored. Sizes follow
MXNet's integer rule (the longer side is ``resize_shorter * long // short``, floored; a square
image keeps both sides equal), which torchvision's ``Resize(int)`` also follows.

- validation: the centre ``image_size`` square of the resized image (offsets floored);
- training, ``crop``: a uniformly random ``image_size`` square of the resized image;
- training, ``resized_crop``: a random box of ``area`` x the resized image's area and aspect
  ratio in ``ratio`` (ten tries, else the centre crop), resized to ``image_size`` (Inception
  style, as torchvision's RandomResizedCrop);
- then an optional horizontal flip (p = 0.5), optional colour and affine jitter (training
  only), and per-channel ``(pixel - mean) / std`` on 0-255 RGB values, NCHW float32.

Resampling filter of the shorter-side resize: ``interpolation``, the weights' own (bilinear,
or bicubic for EfficientNet-B*, Swin and MaxViT; finetune.engines.backbones), and
``resize_shorter`` keeps the weights' resize/crop ratio; a ResNet keeps the studies' 0.875 and
bilinear, which MXNet implements too. Random-resized training crops are resampled bilinearly
whatever the interpolation (validation never is). MXNet resizes with OpenCV's INTER_LINEAR,
which samples at the half-pixel centres without low-pass filtering; Pillow's BILINEAR (the
reference) widens the filter when it shrinks (antialiasing). On a resize factor near 1 they
agree to a grey level or two; when shrinking by 2x or more they differ on sharp edges. The
oracle test states the bound it measured and why.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    import numpy as np

CROP_FRACTION = 0.875  # image_size / resize_shorter, both splits
CONTRACT_FILE = "preprocessing.json"

# Training presets (hp.augmentation). Colour shifts are OpenCV HLS units (hue 0-180, the
# others 0-255), as SageMaker's built-in image-classification algorithm uses them.
COLOR_JITTER = {"hue": 36, "saturation": 50, "lightness": 50}
AFFINE_JITTER = {"rotate_deg": 10, "shear": 0.1, "aspect": 0.25}
_PRESETS: dict[str, dict] = {
    "none": {"crop": "center", "flip": False},
    "crop": {"crop": "random", "flip": True},
    "crop_color": {"crop": "random", "flip": True, "color": COLOR_JITTER},
    "crop_color_transform": {
        "crop": "random",
        "flip": True,
        "color": COLOR_JITTER,
        "affine": AFFINE_JITTER,
    },
    "resized_crop": {"crop": "resized", "flip": True},
    "resized_crop_color": {"crop": "resized", "flip": True, "color": COLOR_JITTER},
}
AUGMENTATIONS = tuple(_PRESETS)


class Preprocessing(BaseModel):
    """The whole contract as data (JSON in the artifact; engines read nothing else)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    image_size: int
    resize_shorter: int
    interpolation: Literal["bilinear", "bicubic"] = "bilinear"  # of the shorter-side resize
    train_crop: Literal["center", "random", "resized"] = "random"
    area: tuple[float, float] = (0.08, 1.0)  # resized_crop: fraction of the resized image
    ratio: tuple[float, float] = (3 / 4, 4 / 3)  # resized_crop: width / height
    flip: bool = True
    color: dict[str, int] = {}
    affine: dict[str, float] = {}
    mean: tuple[float, float, float] = (123.68, 116.779, 103.939)  # RGB, 0-255
    std: tuple[float, float, float] = (58.393, 57.12, 57.375)
    layout: str = "float32 NCHW, RGB, (pixel - mean) / std"

    @classmethod
    def from_hparams(cls, hp) -> Preprocessing:
        """The contract a run's hyperparameters imply."""
        preset = _PRESETS[hp.augmentation]
        return cls(
            image_size=hp.image_size,
            resize_shorter=hp.resize_shorter or resize_for(hp.image_size),
            interpolation=hp.interpolation,
            train_crop=preset["crop"],
            flip=preset["flip"],
            color=preset.get("color", {}),
            affine=preset.get("affine", {}),
            mean=tuple(hp.mean),
            std=tuple(hp.std),
        )

    def resized_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) after the shorter-side resize (MXNet's integer rule)."""
        r = self.resize_shorter
        if height > width:
            return r, r * height // width
        return r * width // height, r

    def center_box(self, width: int, height: int) -> tuple[int, int, int, int]:
        """The validation crop (left, top, right, bottom) in the resized image."""
        rw, rh = self.resized_size(width, height)
        s = self.image_size
        left, top = (rw - s) // 2, (rh - s) // 2
        return left, top, left + s, top + s

    # ---- the reference implementation -------------------------------------------------
    def val_array(self, image, finish=None) -> np.ndarray:
        """A PIL image -> the validation tensor (3, S, S) float32: resize, centre crop,
        normalise (``finish``: another last step than :meth:`normalize`, e.g. :func:`raw`)."""
        resized = self._resize(image)
        return (finish or self.normalize)(resized.crop(self.center_box(*image.size)))

    def train_array(self, image, rng, augment=None, finish=None) -> np.ndarray:
        """A PIL image -> one training tensor, drawing crop and flip from ``rng`` (a
        numpy Generator). Colour and affine jitter are not part of the reference.
        ``augment``: an engine's augmentation of the PIL crop before normalising;
        ``finish``: another last step than :meth:`normalize`, e.g. :func:`raw`."""
        from PIL import Image

        resized = self._resize(image)
        width, height = resized.size
        box = self.train_box(width, height, rng)
        crop = resized.crop(box)
        if crop.size != (self.image_size, self.image_size):
            crop = crop.resize((self.image_size, self.image_size), Image.Resampling.BILINEAR)
        if self.flip and rng.random() < 0.5:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        return (finish or self.normalize)(crop if augment is None else augment(crop))

    def train_box(self, width: int, height: int, rng) -> tuple[int, int, int, int]:
        """A training crop box in an image already resized to (width, height)."""
        s = self.image_size
        if self.train_crop == "resized":
            for _ in range(10):
                target = width * height * rng.uniform(*self.area)
                aspect = math.exp(rng.uniform(math.log(self.ratio[0]), math.log(self.ratio[1])))
                w = round(math.sqrt(target * aspect))
                h = round(math.sqrt(target / aspect))
                if 0 < w <= width and 0 < h <= height:
                    left = int(rng.integers(0, width - w + 1))
                    top = int(rng.integers(0, height - h + 1))
                    return left, top, left + w, top + h
        if self.train_crop == "center":
            left, top = (width - s) // 2, (height - s) // 2
        else:
            left = int(rng.integers(0, width - s + 1))
            top = int(rng.integers(0, height - s + 1))
        return left, top, left + s, top + s

    def normalize(self, image) -> np.ndarray:
        """An RGB PIL image -> (3, H, W) float32, (pixel - mean) / std."""
        import numpy as np

        pixels = np.asarray(image.convert("RGB"), dtype=np.float32)
        mean = np.asarray(self.mean, dtype=np.float32)
        std = np.asarray(self.std, dtype=np.float32)
        return ((pixels - mean) / std).transpose(2, 0, 1).copy()

    def _resize(self, image):
        from PIL import Image

        size = self.resized_size(*image.size)
        rgb = image.convert("RGB")
        kind = Image.BICUBIC if self.interpolation == "bicubic" else Image.BILINEAR
        return rgb if rgb.size == size else rgb.resize(size, kind)


def raw(image) -> np.ndarray:
    """An RGB PIL image -> (H, W, 3) uint8, not normalised: a quarter of the float32 bytes
    through a loader's shared memory and the PCIe link; the device normalises it, exactly as
    :meth:`Preprocessing.normalize` would (the same float32 operations)."""
    import numpy as np

    return np.asarray(image.convert("RGB"), dtype=np.uint8).copy()


def resize_for(image_size: int) -> int:
    """The shorter side both splits are resized to before cropping."""
    return round(image_size / CROP_FRACTION)


def save(contract: Preprocessing, folder) -> None:
    """Write ``preprocessing.json`` into a model folder."""
    (Path(folder) / CONTRACT_FILE).write_text(contract.model_dump_json(indent=2) + "\n", "utf-8")


def load(folder) -> Preprocessing:
    """Read a model folder's ``preprocessing.json``."""
    return Preprocessing.model_validate_json((Path(folder) / CONTRACT_FILE).read_text("utf-8"))
