"""The images to classify: files and folders on the command line, packed as a .rec so each
engine reads them exactly as it read its validation split.

JPEG and PNG files go in byte for byte (both engines decode them as they decode prepared
records); other formats are converted to PNG first, which is lossless, so every engine sees
the same pixels.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from finetune.data.listing import IMAGE_EXTENSIONS, natural_key
from finetune.data.recordio import IRHeader, RecordWriter, pack_header
from finetune.errors import DataError

_AS_IS = (b"\xff\xd8", b"\x89PNG")  # JPEG and PNG signatures


@dataclass(frozen=True)
class Packed:
    rec: Path
    idx: Path
    images: list[Path]  # record i is images[i]


def collect(paths: list[str]) -> list[Path]:
    """Image files named on the command line; folders contribute their images (recursively,
    natural order). A missing path, or nothing to classify, is a DataError."""
    found: list[Path] = []
    for name in paths:
        p = Path(name).expanduser()
        if p.is_dir():
            images = [f for f in p.rglob("*") if f.is_file() and _is_image_name(f)]
            found += sorted(images, key=lambda f: natural_key(str(f.relative_to(p))))
        elif p.is_file():
            found.append(p)
        else:
            raise DataError(f"{name} does not exist", "give image files or folders of images.")
    if not found:
        raise DataError(
            f"no images in {', '.join(paths)}",
            f"give files or folders holding {', '.join(sorted(IMAGE_EXTENSIONS))} images.",
        )
    return found


def pack(images: list[Path], folder: Path) -> Packed:
    """Write ``images`` (record i = image i, label 0) to ``folder``/input.rec + .idx."""
    rec, idx = folder / "input.rec", folder / "input.idx"
    with RecordWriter(rec, idx) as writer:
        for i, path in enumerate(images):
            writer.write(pack_header(IRHeader(0, 0.0, i), _payload(path)), key=i)
    return Packed(rec, idx, images)


def _payload(path: Path) -> bytes:
    """The encoded image as the engines will decode it; a DataError if it is not one."""
    from PIL import Image, UnidentifiedImageError

    try:
        data = path.read_bytes()
        with Image.open(io.BytesIO(data)) as image:
            image.load()  # a truncated file fails here, not inside an engine's reader
            if data.startswith(_AS_IS):
                return data
            out = io.BytesIO()
            image.convert("RGB").save(out, format="PNG")
            return out.getvalue()
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        raise DataError(
            f"{path} is not an image that can be read ({exc})",
            "remove it from the arguments, or convert it to JPEG or PNG.",
        ) from None


def _is_image_name(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS and not path.name.startswith(".")
