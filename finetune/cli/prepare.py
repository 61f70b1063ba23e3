"""`finetune prepare`: image folders to MXNet RecordIO."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypeVar

import typer

from finetune import settings
from finetune.cli._options import (
    Format,
    Help,
    Json,
    MaxPixels,
    Option,
    Out,
    Overwrite,
    flag_set,
    typed_flags,
)
from finetune.cli._records import record_csv
from finetune.cli._render import echo_json, output_format, progress_bars
from finetune.data import datasets
from finetune.data.imaging import MAX_PIXELS
from finetune.data.pack import default_workers
from finetune.data.sources import ExtractLimits
from finetune.data.summary import summary_lines

app = typer.Typer(
    help="Package images into MXNet RecordIO (.rec/.idx/.lst) with a seeded train/val split "
    "and a manifest.json (classes, counts, parameters, checksums).",
    no_args_is_help=True,
)

T = TypeVar("T")
# both sources take it: caltech256 with a default, folder instead of --val-ratio
TrainPerClass = Annotated[T, Option("--train-per-class", min=1)]


@flag_set
class PrepareFlags:
    """The flags both sources share: where the dataset goes and how its images are packed."""

    out: Annotated[
        Out,
        Help(
            "Output folder. Default: <data dir>/datasets/NAME (FINETUNE_DATA_DIR sets the data "
            "dir)."
        ),
    ] = None
    seed: Annotated[
        int, Option(help="Seed of the per-class shuffle that picks the training images.")
    ] = 0
    resize: Annotated[
        int, Option(help="Resize the shorter side to this many pixels (0 keeps the size).")
    ] = 256
    quality: Annotated[
        int, Option(min=1, max=100, help="JPEG quality of the re-encoded images.")
    ] = 95
    workers: Annotated[
        int, Option(min=0, help="Encoding processes (0: one per CPU). Output is identical.")
    ] = 0
    pass_through: Annotated[
        bool,
        Option("--pass-through", help="Store the original file bytes (no resize or re-encode)."),
    ] = False
    max_bad: Annotated[
        float,
        Option(
            "--max-bad",
            help="Fail (writing nothing) if more than this fraction of images are unreadable; "
            "below it they are skipped and listed in the manifest.",
        ),
    ] = 0.05
    overwrite: Annotated[Overwrite, Help("Replace a different dataset already in --out.")] = False
    test_ratio: Annotated[
        float | None,
        Option(
            help="Hold out this fraction of each class as a test split (NAME_test.rec/.idx/.lst), "
            "never trained or validated on. The last images of the class's seeded shuffle."
        ),
    ] = None
    test_per_class: Annotated[
        int | None,
        Option(min=1, help="Instead of --test-ratio: hold out this many test images per class."),
    ] = None
    max_pixels: Annotated[
        MaxPixels,
        Help(
            "Skip (and list) images with more pixels than this, before decoding them: "
            "a small file can decode to gigabytes."
        ),
    ] = MAX_PIXELS

    def library_kwargs(self, name: str) -> dict:
        """These flags as keyword arguments of finetune.data.datasets for dataset ``name``."""
        cpus = default_workers()
        if self.workers > cpus:  # said, as the cap takes effect in the library either way
            typer.echo(
                f"Note: --workers {self.workers} is more than the {cpus} CPU(s) this process may "
                f"use: {cpus} encode (more would only take turns on the same cores, each "
                "holding images in memory).",
                err=True,
            )
        return dict(
            out=self.out or settings.get().datasets_dir / name,
            name=name,
            workers=min(self.workers, cpus),
            overwrite=self.overwrite,
            params=dict(
                seed=self.seed,
                resize=self.resize,
                quality=self.quality,
                pass_through=self.pass_through,
                max_bad_fraction=self.max_bad,
                test_ratio=self.test_ratio,
                test_per_class=self.test_per_class,
                max_pixels=self.max_pixels,
            ),
        )


ManifestFormat = Annotated[
    Format, Help("table (a summary), json or csv (key,value): the manifest.")
]


@app.command("caltech256")
@typed_flags
def caltech256(
    source: str = typer.Option(
        None,
        help="256_ObjectCategories.tar, its extracted folder, or a URL. Default: the cached "
        "archive, else a download from CaltechDATA (resumable).",
    ),
    sha256: str = typer.Option(
        None, help="Expected sha256 of the archive (default: check the published MD5/SHA-512)."
    ),
    train_per_class: Annotated[TrainPerClass[int], Help("Training images per class.")] = 60,
    exclude_clutter: bool = typer.Option(
        False, "--exclude-clutter", help="Leave out 257.clutter (256 classes instead of 257)."
    ),
    max_extract_mb: float = typer.Option(
        100,
        min=0,
        help="Refuse an archive with a member larger than this (MB), before extracting anything.",
    ),
    max_extract_gb: float = typer.Option(
        4,
        min=0,
        help="Refuse an archive that unpacks to more than this (GB) in all.",
    ),
    *,
    packing: PrepareFlags,
    fmt: ManifestFormat = "table",
    as_json: Json = False,
) -> None:
    """Prepare Caltech-256 as in MXNet's caltech256.sh, but reproducible: N training images
    per class by seeded shuffle, all others for validation, one shared class map."""
    fmt = output_format(fmt, as_json)  # before any work: a typo should not wait
    limits = ExtractLimits(int(max_extract_mb * 2**20), int(max_extract_gb * 2**30))
    kw = packing.library_kwargs("caltech256")
    with progress_bars(fmt == "table") as progress:
        result = datasets.prepare_caltech256(
            source=source,
            sha256=sha256,
            train_per_class=train_per_class,
            exclude_clutter=exclude_clutter,
            downloads=settings.get().downloads_dir,
            progress=progress,
            limits=limits,
            **kw,
        )
    _report(result, fmt)


@app.command("folder")
@typed_flags
def folder(
    root: Path = typer.Argument(..., help="Folder with one sub-folder of images per class."),
    name: str = typer.Option(None, help="Dataset name (file prefix). Default: the folder name."),
    val_ratio: float = typer.Option(
        None, help="Fraction of each class for validation (default 0.2 unless --train-per-class)."
    ),
    train_per_class: Annotated[
        TrainPerClass[int | None],
        Help("Instead of --val-ratio: this many training images per class."),
    ] = None,
    exclude: list[str] = typer.Option([], help="Class folder to leave out (repeatable)."),
    *,
    packing: PrepareFlags,
    fmt: ManifestFormat = "table",
    as_json: Json = False,
) -> None:
    """Prepare any folder-per-class image set (jpg, jpeg, png, bmp, webp)."""
    fmt = output_format(fmt, as_json)  # before any work: a typo should not wait
    name = name or root.resolve().name
    if val_ratio is None and train_per_class is None:
        val_ratio = 0.2
    kw = packing.library_kwargs(name)
    kw["params"].update(
        val_ratio=val_ratio, train_per_class=train_per_class, exclude=tuple(exclude)
    )
    with progress_bars(fmt == "table") as progress:
        result = datasets.prepare_folder(root=root, progress=progress, **kw)
    _report(result, fmt)


def _report(result, fmt: str) -> None:
    if fmt == "json":
        echo_json(result.manifest.model_dump(mode="json"))
        return
    if fmt == "csv":
        typer.echo(record_csv(result.manifest.model_dump(mode="json")), nl=False)
        return
    for line in summary_lines(result.manifest, result.out, result.reused):
        typer.echo(line)
