"""Names on disk that are not UTF-8 (``caf\\xe9`` in Latin-1 on Linux): Python reads them as
lone surrogates, which no UTF-8 file (a .lst, a manifest) can hold. They are refused by name,
shown escaped, with the bash command that renames one."""

from __future__ import annotations

import os

from finetune.errors import DataError


def check_utf8(names: list[str], what: str) -> None:
    """Names are stored as UTF-8 (the .lst, the manifest, every report): a name whose bytes
    are not UTF-8 (Python holds them as lone surrogates) is refused, shown escaped."""
    bad = [n for n in names if _not_utf8(n)]
    if not bad:
        return
    shown = "\n".join(f"  {escaped(n)}" for n in bad[:20])
    more = f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else ""
    raise DataError(
        f"{len(bad)} {what} name(s) are not valid UTF-8 (their bytes are shown escaped), so "
        f"they cannot be stored in the dataset's lists and manifest:\n{shown}{more}",
        "rename them to UTF-8 names, e.g. in bash, in the image folder: mv "
        + " ".join(map(_bash, _renaming(bad[0])))
        + " (convmv converts a whole tree), or move them out of the image folder; then run "
        "again.",
    )


def _renaming(rel: str) -> tuple[str, str]:
    """(old, new) of the example rename for ``rel``: its first name that is not UTF-8 becomes
    NEWNAME (with its extension)."""
    parts = rel.split("/")
    i = next(i for i, p in enumerate(parts) if _not_utf8(p))
    new = "NEWNAME" + (os.path.splitext(parts[i])[1] if i == len(parts) - 1 else "")
    return "/".join(parts[: i + 1]), "/".join([*parts[:i], new])


def _not_utf8(name: str) -> bool:
    """Whether ``name`` came from bytes that are not UTF-8 (os.fsdecode's lone surrogates)."""
    return any("\udc80" <= ch <= "\udcff" for ch in name)


def escaped(name: str) -> str:
    """``name`` with each byte that is not UTF-8 as \\xNN (the rest as it is)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _bash(name: str) -> str:
    """``name`` as bash's $'...' quoting writes it: the bytes that are not UTF-8 as \\xNN."""
    text = "".join("\\" + ch if ch in "\\'" else ch for ch in name)
    return "$'" + escaped(text) + "'"
