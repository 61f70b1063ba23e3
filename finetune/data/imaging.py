"""Decode, orient, resize and re-encode one image: the unit of work `prepare` spreads out.

Speed comes from JPEG DCT scaling: when the target is at most half the stored size, libjpeg
decodes at 1/2, 1/4 or 1/8 scale directly (Pillow's ``draft``), which costs a fraction of a
full decode and then needs only a small resize. Output is deterministic for the same input
bytes and options.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# EXIF orientation tag value -> the PIL transpose that shows the image upright
# (the same table as PIL.ImageOps.exif_transpose). Applied after resizing: the shorter side
# does not change under these transposes, so the target size is the same either way.
_ORIENTATION = {2: 0, 3: 3, 4: 1, 5: 5, 6: 4, 7: 6, 8: 2}  # values of PIL.Image.Transpose


# Pillow's own default: it warns above this many pixels (and refuses above twice as many).
# Caltech-256's largest images are far below it; a 12000 x 12000 PNG (a few MB on disk,
# 144 M pixels, ~430 MB decoded) is above it.
MAX_PIXELS = 89_478_485


@dataclass(frozen=True)
class ImageOptions:
    resize: int = 256  # shorter side in pixels; 0 keeps the size
    quality: int = 95
    pass_through: bool = False
    max_pixels: int = MAX_PIXELS  # larger images are skipped before they are decoded


@dataclass(frozen=True)
class Encoded:
    """Outcome for one input: bytes to store, or the reason it was skipped."""

    data: bytes | None
    reason: str | None = None
    size: tuple[int, int] | None = None  # stored width, height


# The longest side a JPEG can have (libjpeg: "Maximum supported image dimension is 65500
# pixels"). A valid but extreme image (1 x 5,000 at --resize 40 would be 40 x 200,000) keeps
# its shorter side and has its long side capped here, rather than being reported corrupt.
JPEG_MAX_SIDE = 65_500


def target_size(width: int, height: int, shorter: int) -> tuple[int, int]:
    """(w, h) with the shorter side equal to ``shorter`` and the aspect ratio kept, the long
    side capped at JPEG_MAX_SIDE (an extreme strip is squeezed along it, not refused)."""
    shorter = min(shorter, JPEG_MAX_SIDE)
    if width <= height:
        return shorter, min(JPEG_MAX_SIDE, max(1, round(height * shorter / width)))
    return min(JPEG_MAX_SIDE, max(1, round(width * shorter / height))), shorter


def encode(data: bytes, opts: ImageOptions) -> Encoded:
    """Turn one file's bytes into the bytes to store, or a reason to skip it."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        return Encoded(None, "empty file (0 bytes)")
    try:
        with _own_pixel_limit(), Image.open(io.BytesIO(data)) as im:
            if im.size[0] * im.size[1] > opts.max_pixels:
                return Encoded(None, _too_large(im.size, opts.max_pixels))
            if opts.pass_through:
                im.load()  # proves the whole file decodes
                return Encoded(data, size=im.size)
            return _reencode(im, opts)
    except UnidentifiedImageError:
        return Encoded(None, "not a readable image (unknown or corrupt format)")
    except Image.DecompressionBombError as exc:
        return Encoded(None, f"image too large to decode safely: {exc}")
    except (OSError, SyntaxError, ValueError) as exc:
        return Encoded(None, f"corrupt image: {exc}")


def _too_large(size: tuple[int, int], limit: int) -> str:
    w, h = size
    return (
        f"image too large to decode safely: {w}x{h} = {w * h} pixels, above --max-pixels "
        f"{limit} (raise --max-pixels to accept it)"
    )


@contextmanager
def _own_pixel_limit() -> Iterator[None]:
    """Pillow's global limit off while we apply ours (it only reads headers to open), and
    truncated files refused whatever a library imported earlier set (gluoncv's
    data/mhp.py turns LOAD_TRUNCATED_IMAGES on for the whole process)."""
    from PIL import Image, ImageFile

    old = Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES
    Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES = None, False
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES = old


def _reencode(im, opts: ImageOptions) -> Encoded:
    from PIL import Image

    orientation = im.getexif().get(0x0112, 1) if im.format in ("JPEG", "WEBP", "PNG") else 1
    w, h = im.size
    if opts.resize:
        tw, th = target_size(w, h, opts.resize)
        if im.format == "JPEG" and im.mode in ("RGB", "L", "CMYK"):
            im.draft("RGB", (tw, th))  # DCT-domain downscale, never below the target
    im = _to_rgb(im)
    if opts.resize and im.size != (tw, th):
        im = im.resize((tw, th), Image.Resampling.BILINEAR, reducing_gap=None)
    if orientation in _ORIENTATION:
        im = im.transpose(Image.Transpose(_ORIENTATION[orientation]))
    out = io.BytesIO()
    im.save(out, "JPEG", quality=opts.quality)
    return Encoded(out.getvalue(), size=im.size)


def _to_rgb(im):
    """RGB for every mode: greyscale and CMYK convert; transparency goes onto white."""
    from PIL import Image

    if im.mode == "RGB":
        im.load()
        return im
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        im = im.point(lambda v: v / 256).convert("L")
    return im.convert("RGB")
