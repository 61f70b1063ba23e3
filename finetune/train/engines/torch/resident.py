"""Decoded images kept on the device, cropped, flipped and normalised there every step.

A split is read once from its .rec (our RecordIO reader), decoded (torchvision's
decode_jpeg, batched, on the GPU where there is one) and resized so its shorter side is the
contract's ``resize_shorter`` (its bilinear or bicubic filter, antialiased as the Pillow
reference is).
The images, of different widths and heights, sit in one flat uint8 buffer (HWC, row after
row) with each image's offset and size; a CPU copy of the sizes lets the host draw boxes
without waiting for the device. A box of exactly ``image_size`` pixels at integer offsets
inside its image (centre and random crops, validation) is one uint8 gather of whole pixels,
flipped by reversing the columns it reads (:meth:`ImageStore.copies`); any other box
(random-resized crops) samples every output pixel bilinearly (four gathers, without
antialiasing, like MXNet's OpenCV path; :meth:`ImageStore.crops`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import torch

from finetune.data.recordio import RecordReader, unpack_header
from finetune.errors import DataError
from finetune.train.preprocess import Preprocessing

DECODE_BATCH = 256


@dataclass
class ImageStore:
    """One split's resized images (flat uint8 HWC buffer) and labels, on one device."""

    pixels: torch.Tensor  # (total,) uint8
    offsets: torch.Tensor  # (N,) int64, start of each image in ``pixels``
    heights: torch.Tensor  # (N,) int64
    widths: torch.Tensor  # (N,) int64
    labels: torch.Tensor  # (N,) int64
    host_widths: torch.Tensor | None = None  # (N,) int64 on the CPU: boxes drawn with no sync
    host_heights: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.host_widths is None:
            self.host_widths, self.host_heights = self.widths.cpu(), self.heights.cpu()

    def __len__(self) -> int:
        return len(self.labels)

    def host_sizes(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(widths, heights) of the images at ``index`` (CPU), from the host's copy."""
        if self.host_widths is None or self.host_heights is None:  # __post_init__ fills both
            raise ValueError("an ImageStore without the host's copy of its image sizes")
        return self.host_widths[index], self.host_heights[index]

    @property
    def nbytes(self) -> int:
        return self.pixels.numel()

    @classmethod
    def load(cls, rec: Path, idx: Path, contract: Preprocessing, device) -> ImageStore:
        """Read, decode and resize every record of a split onto ``device``."""
        chunks, sizes, labels = [], [], []
        with RecordReader(rec, idx) as reader:
            keys = reader.keys
            for start in range(0, len(keys), DECODE_BATCH):
                payloads = []
                for key in keys[start : start + DECODE_BATCH]:
                    header, payload = unpack_header(reader.read_key(key))
                    labels.append(header.class_label)
                    payloads.append(payload)
                for image in _decode(payloads, device, rec):
                    image = resize(image, contract)
                    sizes.append(image.shape[1:])
                    chunks.append(image.permute(1, 2, 0).reshape(-1))  # HWC, flat
        host_h = torch.tensor([h for h, _ in sizes], dtype=torch.int64)
        host_w = torch.tensor([w for _, w in sizes], dtype=torch.int64)
        heights, widths = host_h.to(device), host_w.to(device)
        lengths = heights * widths * 3
        offsets = torch.cumsum(lengths, 0) - lengths
        pixels = torch.cat(chunks) if chunks else torch.zeros(0, dtype=torch.uint8, device=device)
        label_t = torch.tensor(labels, dtype=torch.int64, device=device)
        return cls(pixels, offsets, heights, widths, label_t, host_w, host_h)

    def exact(self, index: torch.Tensor, boxes: torch.Tensor, size: int) -> bool:
        """Whether every box (CPU) is ``size`` pixels square at integer offsets inside its
        image (CPU ``index``): then :meth:`copies` gives what :meth:`crops` would."""
        w, h = self.host_sizes(index)
        x0, y0, x1, y1 = boxes.unbind(1)
        return bool(
            (boxes == boxes.floor()).all()
            and ((x1 - x0) == size).all()
            and ((y1 - y0) == size).all()
            and (x0 >= 0).all()
            and (y0 >= 0).all()
            and (x1 <= w).all()
            and (y1 <= h).all()
        )

    def copies(
        self, index: torch.Tensor, boxes: torch.Tensor, size: int, flip: torch.Tensor
    ) -> torch.Tensor:
        """(B, size, size, 3) uint8 pixels of exact boxes (:meth:`exact`; CPU ``index``,
        ``boxes`` and ``flip``), mirrored where ``flip``: one gather of whole pixels on the
        device, nothing copied back to the host."""
        dev = self.pixels.device
        on = index.to(dev, non_blocking=True)
        x0 = boxes[:, 0].to(torch.int64).to(dev, non_blocking=True)
        y0 = boxes[:, 1].to(torch.int64).to(dev, non_blocking=True)
        steps = torch.arange(size, device=dev)
        flip = flip.to(dev, non_blocking=True)[:, None]
        cols = x0[:, None] + torch.where(flip, size - 1 - steps, steps)  # (B, S)
        rows = y0[:, None] + steps  # (B, S)
        first = torch.div(self.offsets[on], 3, rounding_mode="floor")  # in whole pixels
        at = first[:, None, None] + rows[:, :, None] * self.widths[on][:, None, None]
        at = at + cols[:, None, :]  # (B, S, S) pixel numbers
        return self.pixels.view(-1, 3)[at]

    def crops(
        self, index: torch.Tensor, boxes: torch.Tensor, size: int, flip: torch.Tensor
    ) -> torch.Tensor:
        """(B, 3, size, size) float32 pixels (0-255) of ``boxes`` (B, 4: x0, y0, x1, y1 in
        the resized images' pixel edges) of images ``index``, flipped where ``flip``."""
        dev = self.pixels.device
        boxes = boxes.to(torch.float32).to(dev, non_blocking=True)  # (no wait for the device)
        steps = (torch.arange(size, device=dev, dtype=torch.float32) + 0.5) / size
        u = boxes[:, 0:1] + steps * (boxes[:, 2:3] - boxes[:, 0:1]) - 0.5  # (B, S) x
        v = boxes[:, 1:2] + steps * (boxes[:, 3:4] - boxes[:, 1:2]) - 0.5  # (B, S) y
        index = index.to(dev, non_blocking=True)
        w, h = self.widths[index], self.heights[index]
        x0, x1, fx = _neighbours(u, w)
        y0, y1, fy = _neighbours(v, h)
        base = self.offsets[index][:, None, None]
        row = w[:, None, None]

        def at(ys, xs):
            flat = base + (ys[:, :, None] * row + xs[:, None, :]) * 3  # (B, S, S)
            idx = flat[..., None] + torch.arange(3, device=dev)  # (B, S, S, 3)
            return self.pixels[idx].to(torch.float32)

        fx, fy = fx[:, None, :, None], fy[:, :, None, None]
        top = at(y0, x0) * (1 - fx) + at(y0, x1) * fx
        bottom = at(y1, x0) * (1 - fx) + at(y1, x1) * fx
        out = (top * (1 - fy) + bottom * fy).permute(0, 3, 1, 2)  # (B, 3, S, S)
        flip = flip.to(dev, non_blocking=True)
        return torch.where(flip[:, None, None, None], out.flip(-1), out)


def _neighbours(coord: torch.Tensor, extent: torch.Tensor):
    """Integer neighbours and weight of bilinear sampling, clamped to the image."""
    limit = (extent - 1)[:, None].to(coord.dtype)
    coord = torch.minimum(torch.clamp(coord, min=0.0), limit)
    low = torch.floor(coord)
    frac = coord - low
    low = low.to(torch.int64)
    high = torch.minimum(low + 1, (extent - 1)[:, None])
    return low, high, frac


def resize(image: torch.Tensor, contract: Preprocessing) -> torch.Tensor:
    """(3, H, W) uint8 -> shorter side ``resize_shorter`` (the contract's bilinear or
    bicubic, antialiased as Pillow is)."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as F

    h, w = image.shape[1:]
    new_w, new_h = contract.resized_size(w, h)
    if (new_h, new_w) == (h, w):
        return image
    mode = InterpolationMode(contract.interpolation)
    return F.resize(image, [new_h, new_w], interpolation=mode, antialias=True)


def _decode(payloads: list[bytes], device, rec: Path) -> list[torch.Tensor]:
    """Encoded images -> (3, H, W) uint8 RGB tensors on ``device`` (nvjpeg for JPEGs on a
    GPU, batched; other formats and CPU through torchvision's decoders)."""
    import warnings

    datas = [torch.frombuffer(bytearray(p), dtype=torch.uint8) for p in payloads]
    on_gpu = torch.device(device).type == "cuda"
    with warnings.catch_warnings():  # torchvision 0.29 deprecates its decoders (torchcodec)
        warnings.simplefilter("ignore", DeprecationWarning)
        from torchvision.io import ImageReadMode, decode_image, decode_jpeg

        try:
            if on_gpu and all(p[:2] == b"\xff\xd8" for p in payloads):
                return decode_jpeg(datas, mode=ImageReadMode.RGB, device=device)
            return [decode_image(d, mode=ImageReadMode.RGB).to(device) for d in datas]
        except RuntimeError as exc:
            raise DataError(
                f"{rec}: an image record does not decode ({exc})",
                "prepare the dataset again (`finetune prepare` checks every image).",
            ) from None


def pil_decode(payload: bytes, where: str = "an image record"):
    """A record's image as a PIL image (the streaming path and the tests); a DataError
    naming ``where`` when it does not decode (Pillow's own message would name the bytes
    buffer it read: "<_io.BytesIO object at 0x...>")."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(payload))
        image.load()
    except UnidentifiedImageError:
        why = "is not a readable image (unknown or corrupt format)"
    except (OSError, SyntaxError, ValueError) as exc:
        why = f"is a corrupt image ({exc})"
    else:
        return image
    raise DataError(
        f"{where} {why}", "prepare the dataset again (`finetune prepare` checks every image)."
    )
