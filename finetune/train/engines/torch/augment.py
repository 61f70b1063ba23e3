"""Per-image augmentation presets after the crop: TrivialAugmentWide or RandAugment (on the
0-255 image, before normalising) and random erasing (on the normalised tensor, erased to 0,
the mean), as torchvision's references/classification/presets.py orders them; the
transforms are torchvision.transforms.v2's own.

Those transforms draw from torch's global generator; here each image's draws come from a
seed of its place in the run -- (seed, epoch, position, place in the global batch) on the
resident path, (seed, epoch, record) in the streaming path's loader workers, as the crops --
inside ``torch.random.fork_rng``, so the process's own generator is left as it was, a resumed
run draws what the uninterrupted run drew, and N processes draw what one would. Resident
images are augmented one by one on the device; streaming ones in the workers, on the
Pillow crop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

AUG_TAG = 0x617567  # keeps these seeds apart from the crops' and the mixing's


def image_seed(seed: int, *parts: int) -> int:
    """One image's seed, from the run's seed and its place (the crops' mixing rule)."""
    value = seed
    for p in (*parts, AUG_TAG):
        value = (value * 1_000_003 + p + 1) % (2**63 - 1)
    return value


@dataclass(frozen=True)
class Augment:
    """The run's per-image presets (see the module docstring)."""

    policy: str = "none"  # none | trivial_augment_wide | rand_augment
    num_ops: int = 2
    magnitude: int = 9
    erasing: float = 0.0

    def _policy(self):
        from torchvision.transforms import InterpolationMode, v2

        bilinear = InterpolationMode.BILINEAR  # (torchvision's reference trains with it)
        if self.policy == "trivial_augment_wide":
            return v2.TrivialAugmentWide(interpolation=bilinear)
        if self.policy == "rand_augment":
            return v2.RandAugment(self.num_ops, self.magnitude, interpolation=bilinear)
        return None

    def _eraser(self):
        from torchvision.transforms import v2

        return v2.RandomErasing(p=self.erasing, value=0.0) if self.erasing > 0 else None

    def batch(self, pixels: torch.Tensor, seeds: list[int], normalize) -> torch.Tensor:
        """Resident path: crops (B, 3, S, S) float 0-255 -> normalised tensors, each image
        augmented with its own seed (``normalize``: the contract's normalisation)."""
        policy, eraser = self._policy(), self._eraser()
        if policy is not None:
            images = pixels.round().clamp(0, 255).to(torch.uint8)
            with torch.random.fork_rng(devices=[]):
                out = []
                for image, seed in zip(images, seeds, strict=True):
                    torch.manual_seed(seed)
                    out.append(policy(image))
            pixels = torch.stack(out).to(torch.float32)
        x = normalize(pixels)
        if eraser is None:
            return x
        with torch.random.fork_rng(devices=[]):
            erased = []
            for image, seed in zip(x, seeds, strict=True):
                torch.manual_seed(seed + 1)
                erased.append(eraser(image))
        return torch.stack(erased)

    def pil(self, image, seed: int):
        """Streaming path: the policy on a PIL crop (before normalising)."""
        policy = self._policy()
        if policy is None:
            return image
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return policy(image)

    def erase(self, tensor: torch.Tensor, seed: int) -> torch.Tensor:
        """Streaming path: random erasing of one normalised (3, S, S) tensor."""
        eraser = self._eraser()
        if eraser is None:
            return tensor
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)
            return eraser(tensor)


def from_hparams(hp) -> Augment | None:
    """The run's presets (None when every one is off)."""
    if hp.auto_augment == "none" and hp.random_erasing <= 0:
        return None
    return Augment(hp.auto_augment, hp.rand_augment_ops, hp.rand_augment_magnitude,
                   hp.random_erasing)  # fmt: skip
