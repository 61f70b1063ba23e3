"""One image in, the bytes to store (or the reason to skip it) out."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from finetune.data.imaging import ImageOptions, encode, target_size


def _jpeg(img: Image.Image, **kw) -> bytes:
    out = io.BytesIO()
    img.save(out, "JPEG", quality=92, **kw)
    return out.getvalue()


def _decode(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


@pytest.mark.parametrize(("w", "h", "expect"), [(400, 300, (341, 256)), (300, 900, (256, 768))])
def test_target_size_keeps_aspect(w, h, expect):
    assert target_size(w, h, 256) == expect


@pytest.mark.parametrize("size", [(800, 600), (600, 1600), (120, 90)])
def test_resize_shorter_side(size):
    img = Image.new("RGB", size, (200, 30, 30))
    got = encode(_jpeg(img), ImageOptions(resize=256))
    assert got.reason is None
    out = _decode(got.data)
    assert out.format == "JPEG" and out.mode == "RGB"
    assert min(out.size) == 256 and out.size == target_size(*size, 256)
    assert got.size == out.size


def test_draft_decode_keeps_content():
    """The fast DCT-scaled path gives the same picture as a full decode and a good resize."""
    rng = np.random.default_rng(1)
    small = Image.fromarray(rng.integers(0, 255, (6, 8, 3)).astype(np.uint8))
    data = _jpeg(small.resize((800, 600), Image.BICUBIC))  # smooth, like a photo
    fast = _decode(encode(data, ImageOptions(resize=150)).data)
    full = _decode(data).convert("RGB").resize(fast.size, Image.LANCZOS)
    ref = _decode(_jpeg(full))
    diff = np.abs(np.asarray(fast, np.float32) - np.asarray(ref, np.float32))
    assert diff.mean() < 2.0


def test_exif_orientation_is_applied():
    img = Image.new("RGB", (400, 200), (0, 0, 0))
    img.paste((255, 255, 255), (0, 0, 200, 200))  # left half white
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    out = _decode(encode(_jpeg(img, exif=exif.tobytes()), ImageOptions(resize=100)).data)
    assert out.size == (100, 200)  # portrait after rotation
    top, bottom = np.asarray(out)[10, 50], np.asarray(out)[190, 50]
    assert top.mean() > 200 and bottom.mean() < 50  # white half now on top


@pytest.mark.parametrize("mode", ["L", "CMYK", "RGBA", "P", "LA"])
def test_modes_become_rgb(mode):
    img = Image.new("RGB", (64, 48), (10, 120, 250)).convert(mode)
    buf = io.BytesIO()
    img.save(buf, "JPEG" if mode in ("L", "CMYK") else "PNG")
    got = encode(buf.getvalue(), ImageOptions(resize=32))
    assert got.reason is None
    assert _decode(got.data).mode == "RGB"


def test_transparency_goes_onto_white():
    img = Image.new("RGBA", (32, 32), (0, 0, 0, 0))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    out = np.asarray(_decode(encode(buf.getvalue(), ImageOptions(resize=0)).data))
    assert out.min() > 240


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "WEBP"])
def test_other_formats(fmt):
    buf = io.BytesIO()
    Image.new("RGB", (50, 40), (1, 2, 3)).save(buf, fmt)
    got = encode(buf.getvalue(), ImageOptions(resize=0, quality=90))
    assert got.reason is None and _decode(got.data).size == (50, 40)


def test_pass_through_keeps_bytes():
    data = _jpeg(Image.new("RGB", (50, 40), (1, 2, 3)))
    assert encode(data, ImageOptions(pass_through=True)).data == data


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty file"),
        (b"this is text, not a JPEG", "not a readable image"),
        (None, "corrupt image"),  # truncated JPEG, filled below
    ],
)
@pytest.mark.parametrize("pass_through", [False, True])
def test_bad_images_give_a_reason(data, reason, pass_through):
    if data is None:
        full = _jpeg(Image.effect_noise((300, 300), 60).convert("RGB"))
        data = full[: len(full) // 2]
    got = encode(data, ImageOptions(resize=64, pass_through=pass_through))
    assert got.data is None
    assert reason in got.reason


def test_output_is_deterministic():
    data = _jpeg(Image.effect_noise((500, 333), 40).convert("RGB"))
    assert encode(data, ImageOptions()).data == encode(data, ImageOptions()).data
