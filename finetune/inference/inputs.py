"""The images to classify: files and folders on the command line, packed as a .rec so each
engine reads them exactly as it read its validation split.

JPEG and PNG files go in byte for byte (both engines decode them as they decode prepared
records); other formats are converted to PNG first, which is lossless, so every engine sees
the same pixels.
"""

from __future__ import annotations

import io
import stat
from dataclasses import dataclass, field
from pathlib import Path

from finetune.data.imaging import MAX_PIXELS, ImageOptions, encode
from finetune.data.listing import IMAGE_EXTENSIONS, natural_key
from finetune.data.recordio import IRHeader, RecordWriter, pack_header
from finetune.errors import DataError

_AS_IS = (b"\xff\xd8", b"\x89PNG")  # JPEG and PNG signatures


@dataclass(frozen=True)
class Packed:
    rec: Path
    idx: Path
    images: list[Path]  # record i is images[i]
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (file, why), not packed


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
        elif p.exists():  # a FIFO would block the read forever; a device never ends
            raise DataError(
                f"{name} is not a regular file (it is {_kind(p)})",
                "give image files or folders of images; to classify a stream, save it to a "
                "file first.",
            )
        elif p.is_symlink():
            raise DataError(f"{name} is a link to {p.readlink()}, which does not exist",
                            "give image files or folders of images.")  # fmt: skip
        else:
            raise DataError(f"{name} does not exist", "give image files or folders of images.")
    if not found:
        raise DataError(
            f"no images in {', '.join(paths)}",
            f"give files or folders holding {', '.join(sorted(IMAGE_EXTENSIONS))} images.",
        )
    return found


def _kind(path: Path) -> str:
    """What a path that is neither a file nor a folder is, in words."""
    mode = path.stat().st_mode
    kinds = {stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISCHR: "a character device",
             stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket"}  # fmt: skip
    return next((kind for test, kind in kinds.items() if test(mode)), "not a file or folder")


def pack(images: list[Path], folder: Path, max_pixels: int = MAX_PIXELS) -> Packed:
    """Write the readable ``images`` (record i = i-th readable image, label 0) to
    ``folder``/input.rec + .idx; a file that is not a readable image, or has more than
    ``max_pixels`` pixels, is skipped with the reason, as `prepare` skips it."""
    rec, idx = folder / "input.rec", folder / "input.idx"
    packed: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    with RecordWriter(rec, idx) as writer:
        for path in images:
            payload, why = _payload(path, max_pixels)
            if payload is None:
                skipped.append((path, why))
                continue
            n = len(packed)
            writer.write(pack_header(IRHeader(0, 0.0, n), payload), key=n)
            packed.append(path)
    return Packed(rec, idx, packed, skipped)


def _payload(path: Path, max_pixels: int) -> tuple[bytes | None, str]:
    """(the encoded image as the engines will decode it, "") or (None, why it cannot be)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    # prepare's own check: the pixel limit from the header, before decoding, then a full
    # decode (a truncated file fails here, not inside an engine's reader); its reasons name
    # no Python objects
    checked = encode(data, ImageOptions(resize=0, pass_through=True, max_pixels=max_pixels))
    if checked.data is None:
        return None, checked.reason or "not a readable image"
    if data.startswith(_AS_IS):
        return data, ""
    return _as_png(data)


def _as_png(data: bytes) -> tuple[bytes | None, str]:
    """Another format, converted losslessly to PNG (its size was checked by ``encode``)."""
    from PIL import Image

    limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # --max-pixels applies
    try:
        with Image.open(io.BytesIO(data)) as image:
            out = io.BytesIO()
            image.convert("RGB").save(out, format="PNG")
            return out.getvalue(), ""
    except (OSError, ValueError) as exc:
        return None, f"cannot be converted to PNG ({type(exc).__name__})"
    finally:
        Image.MAX_IMAGE_PIXELS = limit


def _is_image_name(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS and not path.name.startswith(".")
