"""A cloud run's model folder put on this machine: written beside its place, then renamed.

Backends fetch a run's model (SageMaker's model.tar.gz, the EC2 agent's model/ prefix) into
a temporary sibling of the destination and rename it into place only when complete, so a
folder that exists is whole. Archives are untrusted input: whoever can write the run's S3
output must not be able to write anywhere else on this machine, so a member that is not a
plain file or folder, or whose name climbs out (``../``, an absolute path), refuses the
whole archive before anything is unpacked.
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from finetune import files
from finetune.contracts.container import check_model_folder
from finetune.errors import DataError


def into_place(dest: Path, fill: Callable[[Path], None]) -> Path:
    """Run ``fill(tmp)`` on an empty temporary folder beside ``dest``, check it holds a model
    description, then rename it to ``dest`` (replacing an older copy); returns ``dest``."""

    def fill_and_check(tmp: Path) -> None:
        fill(tmp)
        check_model_folder(tmp, f"the downloaded model of {dest.name}")

    # dest is a copy in finetune's own cache (settings' cache_dir/models/RUN/JOB): an older
    # copy there is finetune's to replace
    return files.publish(dest, fill_and_check, check_old=lambda old: None)


def check_members(tar: tarfile.TarFile, source: str) -> list[tarfile.TarInfo]:
    """The archive's members, after refusing any that is not a plain file or folder or
    whose name leaves the folder it is unpacked into."""
    members = tar.getmembers()
    for m in members:
        path = PurePosixPath(m.name)
        if path.is_absolute() or ".." in path.parts or "\\" in m.name or "\0" in m.name:
            raise DataError(
                f"{source}: refusing member {m.name!r}: it names a path outside the model folder",
                "the archive was not written by SageMaker from a finetune run: delete it, or "
                "unpack a trusted copy yourself and pass that folder.",
            )
        if not (m.isfile() or m.isdir()):
            raise DataError(
                f"{source}: refusing member {m.name!r}: a model folder holds files only",
                "the archive was not written by SageMaker from a finetune run: delete it, or "
                "unpack a trusted copy yourself and pass that folder.",
            )
    return members


def extract(archive: Path, dest: Path, source: str) -> None:
    """Unpack the tar(.gz) ``archive`` into the empty folder ``dest`` (members checked first,
    then tarfile's "data" filter as a second guard)."""
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            members = check_members(tar, source)
            tar.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise DataError(
            f"{source} does not unpack ({type(exc).__name__}: {exc})",
            "fetch it again (`finetune predict RUN ...` downloads it anew); if it stays "
            "broken, the run's output was damaged: pass a model folder instead.",
        ) from None
