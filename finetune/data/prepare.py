"""`finetune prepare`: a folder-per-class image set becomes train/val RecordIO + manifest.

Order of work, chosen so nothing half-made is ever published:
  1. list the images and check the request (before any expensive work);
  2. encode every image in parallel into a scratch file inside a staging folder;
  3. drop the unreadable ones, then split the rest per class with the seeded shuffle;
  4. write NAME_{train,val[,test]}.{rec,idx,lst} into the staging folder, hashing as they go;
  5. publish: rename the data files into the output folder, then the manifest, last.
An interrupted run leaves only the staging folder (removed by the next run) and no manifest.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from finetune import __version__
from finetune.data import lst, outfolder
from finetune.data import manifest as mf
from finetune.data.imaging import ImageOptions
from finetune.data.listing import Listing, list_images
from finetune.data.lock import Busy, exclusive
from finetune.data.pack import Slot, default_workers, encode_to_scratch
from finetune.data.recordio import IRHeader, RecordWriter, pack_header
from finetune.data.split import SplitSpec, check_class_sizes, shuffled, split_parts, validate_spec
from finetune.errors import DataError, UsageError
from finetune.files import fsync_dir, write_atomic

STAGING = ".prepare-staging"
LOCK = ".prepare.lock"
NAME_RE = mf.NAME_RE  # (defined with the manifest, which checks it on every parse)


@dataclass
class PrepareRequest:
    root: Path
    out: Path
    name: str
    params: mf.PrepareParams
    workers: int = 0  # 0: one per CPU
    overwrite: bool = False
    source: dict[str, str] = field(default_factory=dict)


@dataclass
class PrepareResult:
    manifest: mf.DatasetManifest
    out: Path
    reused: bool = False  # the output already held exactly this dataset


Progress = Callable[[str, int], Callable[[int], None]]  # (stage, total) -> advance(n)


def prepare(req: PrepareRequest, progress: Progress | None = None) -> PrepareResult:
    """Prepare ``req.root`` into ``req.out``; see the module docstring for the order of work."""
    check_name(req.name)
    params = req.params
    spec = SplitSpec(
        params.seed,
        params.train_per_class,
        params.val_ratio,
        params.test_ratio,
        params.test_per_class,
    )
    validate_spec(spec)
    _check_image_params(params)
    listing = list_images(req.root, params.exclude, skip=(req.out,))
    _check_classes(listing)
    check_class_sizes(listing.samples, spec)  # before any work; again once bad images are out
    source = {"kind": "folder", "path": str(req.root.resolve()), **req.source}
    source["fingerprint"] = listing.fingerprint()
    splits = ["train", "val"] + (["test"] if spec.has_test else [])
    outfolder.check_replaceable(req.out, outfolder.dataset_files(req.name, splits))
    existing = _existing(req, source)
    if existing is not None:
        _sweep_staging(req.out)
        return PrepareResult(existing, req.out, reused=True)

    try:
        req.out.mkdir(parents=True, exist_ok=True)
        with exclusive(req.out / LOCK) as lock_fd:
            return _build(req, listing, spec, source, progress, lock_fd)
    except Busy:
        raise DataError(
            f"another `finetune prepare` is writing to {req.out} right now",
            "wait for it to finish, or choose another --out.",
        ) from None
    except OSError as exc:  # images are read by the encoder, which reports its own errors
        raise _output_error(req.out, exc) from None


def _output_error(out: Path, exc: OSError) -> DataError:
    """What a failed write of the dataset means, and what to do (nothing was published)."""
    import errno

    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DataError(
            f"the disk holding {out} is full ({why}); nothing was published (a folder "
            "without manifest.json is not a finished dataset)",
            "free some space there (the output needs about the size of the resized images), "
            "or choose another --out, then run again.",
        )
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return DataError(
            f"cannot write the dataset to {out}: {why} ({exc.filename or out})",
            "choose a writable --out (or set FINETUNE_DATA_DIR for the default location).",
        )
    return DataError(
        f"writing the dataset to {out} failed: {exc}; nothing was published",
        "check the disk, then run again.",
    )


def check_name(name: str) -> None:
    """A dataset name becomes file names (NAME_train.rec) and S3 keys: a plain stem only."""
    if not NAME_RE.fullmatch(name or ""):
        raise UsageError(
            f"dataset name {name!r} is not a plain file-name stem (letters, digits, '.', '_', "
            "'-'; starting with a letter or digit; at most 100 characters)",
            "pass --name with such a name, e.g. --name shapes (the folder goes in --out).",
        )


def _check_classes(listing: Listing) -> None:
    if len(listing.classes) < 2:
        raise DataError(
            f"{listing.root} has only one class ({listing.classes[0]}): a classifier needs at "
            "least two classes to choose between",
            "pass the folder that holds one sub-folder per class (ROOT/<class>/<images>), "
            "with two or more class folders.",
        )
    for cls in listing.classes:
        if problem := mf.class_name_problem(cls):
            raise DataError(f"{listing.root}: {problem}", "rename that class folder to plain text.")


def _check_image_params(p: mf.PrepareParams) -> None:
    if p.resize < 0 or (0 < p.resize < 16):
        raise UsageError(f"--resize {p.resize} is not usable", "pass 0 (keep) or >= 16, e.g. 256.")
    if not 1 <= p.quality <= 100:
        raise UsageError(f"--quality {p.quality} is outside 1-100", "pass e.g. --quality 95.")
    if p.max_pixels < 1:
        raise UsageError(f"--max-pixels {p.max_pixels} is not usable", "pass e.g. 100000000.")
    if not 0.0 <= p.max_bad_fraction < 1.0:
        raise UsageError("--max-bad must be in [0, 1)", "pass e.g. --max-bad 0.05.")


def _sweep_staging(out: Path) -> None:
    """Remove a staging folder left by a run killed after it published (its files moved out,
    its scratch file still there), unless another prepare holds the folder's lock now."""
    if not (out / STAGING).exists():
        return
    try:
        with exclusive(out / LOCK):
            shutil.rmtree(out / STAGING, ignore_errors=True)
    except (Busy, OSError):
        return  # busy: that run owns it; unwritable: the dataset is still whole and usable


def _existing(req: PrepareRequest, source: dict[str, str]) -> mf.DatasetManifest | None:
    """The manifest already in ``out`` if it is this very dataset, intact; else None or error."""
    if not (req.out / mf.MANIFEST).is_file():
        return None
    try:
        old, unreadable = mf.load(req.out), ""
    except DataError as exc:
        old, unreadable = None, exc.what
    wanted = {"name": req.name, "source": source, "params": req.params.model_dump()}
    if old is not None and old.identity() == wanted and not mf.verify(req.out, old):
        return old
    if req.overwrite:
        return None
    what = "a different dataset" if old is not None else f"an unreadable manifest ({unreadable})"
    if old is not None and old.identity() == wanted:
        what = "this dataset, but its files no longer match their checksums"
    raise DataError(
        f"{req.out} already holds {what}",
        "choose another --out, or pass --overwrite to replace it.",
    )


def _build(req, listing: Listing, spec: SplitSpec, source, progress, lock_fd) -> PrepareResult:
    staging = req.out / STAGING
    shutil.rmtree(staging, ignore_errors=True)  # left by an interrupted run
    staging.mkdir()
    try:
        rels = [rel for cls in listing.classes for rel in listing.samples[cls]]
        p = req.params
        opts = ImageOptions(p.resize, p.quality, p.pass_through, p.max_pixels)
        # more processes than usable CPUs only take turns on them, each holding images
        workers = min(req.workers or default_workers(), default_workers())
        advance = progress("encode", len(rels)) if progress else None
        scratch = staging / "encoded.bin"
        slots = dict(
            zip(
                rels,
                encode_to_scratch(
                    listing.root, rels, opts, scratch, workers, advance, close_fds=(lock_fd,)
                ),
                strict=True,
            )
        )
        skipped = [mf.Skipped(path=r, reason=s.reason) for r, s in slots.items() if not s.ok]
        _check_bad(skipped, len(rels), req.params.max_bad_fraction)
        good = {c: [r for r in listing.samples[c] if slots[r].ok] for c in listing.classes}
        check_class_sizes(good, spec)
        manifest = _write_splits(req, listing, good, spec, slots, scratch, staging, source)
        manifest.skipped = skipped
        manifest.ignored = [mf.Skipped(path=p, reason=r) for p, r in listing.ignored]
        _publish(staging, req.out, manifest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PrepareResult(manifest, req.out)


def _check_bad(skipped: list[mf.Skipped], total: int, limit: float) -> None:
    if len(skipped) > limit * total or len(skipped) == total:
        shown = "\n".join(f"  {s.path}: {s.reason}" for s in skipped[:10])
        more = f"\n  ... and {len(skipped) - 10} more" if len(skipped) > 10 else ""
        raise DataError(
            f"{len(skipped)} of {total} images could not be used ({len(skipped) / total:.1%}, "
            f"above --max-bad {limit:.1%}); nothing was written:\n{shown}{more}",
            "repair or delete those files, or raise --max-bad if skipping them is acceptable.",
        )


def _write_splits(req, listing, good, spec, slots: dict[str, Slot], scratch, staging, source):
    labels = {c: i for i, c in enumerate(listing.classes)}
    parts: dict[str, list] = {"train": [], "val": [], "test": []}
    for cls in listing.classes:
        t, v, h = split_parts(cls, good[cls], spec)
        parts["train"] += [(r, labels[cls]) for r in t]
        # validation and test records in listing order (class by class)
        parts["val"] += [(r, labels[cls]) for r in sorted(v, key=good[cls].index)]
        parts["test"] += [(r, labels[cls]) for r in sorted(h, key=good[cls].index)]
    # Training records in one seeded global order: ImageRecordIter shuffles only within
    # chunks, so class-sorted records would make poorly mixed batches.
    parts["train"] = shuffled(parts["train"], spec.seed, "train-order")
    if not spec.has_test:
        del parts["test"]
    files: dict[str, mf.FileEntry] = {}
    splits = {}
    with open(scratch, "rb") as src:
        for split, items in parts.items():
            files.update(_write_split(staging, req.name, split, items, slots, src))
            per_class = [0] * len(listing.classes)
            for _, label in items:
                per_class[label] += 1
            splits[split] = mf.SplitStats(count=len(items), per_class=per_class)
    return mf.DatasetManifest(
        tool_version=__version__,
        name=req.name,
        source=source,
        classes=listing.classes,
        params=req.params,
        splits=splits,
        files=files,
    )


def _write_split(staging: Path, name: str, split: str, items, slots, src) -> dict:
    base = staging / f"{name}_{split}"
    rec, idx, lst_path = (base.with_suffix(e) for e in (".rec", ".idx", ".lst"))
    with RecordWriter(rec, idx) as w, open(lst_path, "w", encoding="utf-8") as lf:
        for index, (rel, label) in enumerate(items):
            slot = slots[rel]
            src.seek(slot.offset)
            w.write(pack_header(IRHeader(0, float(label), index, 0), src.read(slot.length)), index)
            lf.write(lst.format_line(index, float(label), rel))
        lf.flush()
        os.fsync(lf.fileno())
    out = {rec.name: mf.FileEntry(sha256=w.sha256, bytes=w.size)}
    out[idx.name] = mf.FileEntry(sha256=w.idx_sha256, bytes=idx.stat().st_size)
    out[lst_path.name] = mf.FileEntry(
        sha256=mf.sha256_file(lst_path), bytes=lst_path.stat().st_size
    )
    return out


def _publish(staging: Path, out: Path, manifest: mf.DatasetManifest) -> None:
    """Move the data files into place, then the manifest: its presence means 'complete'."""
    outfolder.begin(out, list(manifest.files))  # what is ours while no manifest says so
    old = out / mf.MANIFEST
    if old.exists():
        old.unlink()  # from here until the new manifest lands, the folder is 'incomplete'
        fsync_dir(out)
    for name in manifest.files:
        os.replace(staging / name, out / name)
    fsync_dir(out)
    write_atomic(out / mf.MANIFEST, mf.dump(manifest))
    outfolder.end(out)
