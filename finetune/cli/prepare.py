"""`finetune prepare`: image folders to MXNet RecordIO."""

from __future__ import annotations

from pathlib import Path

import typer

from finetune.cli._render import JSON_ALIAS
from finetune.data.imaging import MAX_PIXELS

app = typer.Typer(
    help="Package images into MXNet RecordIO (.rec/.idx/.lst) with a seeded train/val split "
    "and a manifest.json (classes, counts, parameters, checksums).",
    no_args_is_help=True,
)

OUT_HELP = "Output folder. Default: <data dir>/datasets/NAME (FINETUNE_DATA_DIR sets the data dir)."


def _common(
    out: Path | None,
    name: str,
    seed: int,
    resize: int,
    quality: int,
    workers: int,
    pass_through: bool,
    max_bad: float,
    overwrite: bool,
    test_ratio: float | None = None,
    test_per_class: int | None = None,
    max_pixels: int = MAX_PIXELS,
):
    """Options shared by both sources, as keyword arguments for the library."""
    from finetune import settings

    return dict(
        out=out or settings.get().datasets_dir / name,
        name=name,
        workers=workers,
        overwrite=overwrite,
        params=dict(
            seed=seed,
            resize=resize,
            quality=quality,
            pass_through=pass_through,
            max_bad_fraction=max_bad,
            test_ratio=test_ratio,
            test_per_class=test_per_class,
            max_pixels=max_pixels,
        ),
    )


# Typer options reused by both commands (defined once so the help reads the same).
_SEED = typer.Option(0, help="Seed of the per-class shuffle that picks the training images.")
_RESIZE = typer.Option(256, help="Resize the shorter side to this many pixels (0 keeps the size).")
_QUALITY = typer.Option(95, min=1, max=100, help="JPEG quality of the re-encoded images.")
_WORKERS = typer.Option(0, min=0, help="Encoding processes (0: one per CPU). Output is identical.")
_PASS = typer.Option(
    False, "--pass-through", help="Store the original file bytes (no resize or re-encode)."
)
_MAX_BAD = typer.Option(
    0.05,
    "--max-bad",
    help="Fail (writing nothing) if more than this fraction of images are unreadable; "
    "below it they are skipped and listed in the manifest.",
)
_OVERWRITE = typer.Option(
    False, "--overwrite", help="Replace a different dataset already in --out."
)
_TEST_RATIO = typer.Option(
    None,
    help="Hold out this fraction of each class as a test split (NAME_test.rec/.idx/.lst), "
    "never trained or validated on. The last images of the class's seeded shuffle.",
)
_TEST_PER_CLASS = typer.Option(
    None, min=1, help="Instead of --test-ratio: hold out this many test images per class."
)
_MAX_PIXELS = typer.Option(
    MAX_PIXELS,
    "--max-pixels",
    min=1,
    help="Skip (and list) images with more pixels than this, before decoding them: "
    "a small file can decode to gigabytes.",
)
_FORMAT = typer.Option(
    "table", "--format", help="table (a summary), json or csv (key,value): the manifest."
)
_OUT = typer.Option(None, "--out", help=OUT_HELP)


@app.command("caltech256")
def caltech256(
    source: str = typer.Option(
        None,
        help="256_ObjectCategories.tar, its extracted folder, or a URL. Default: the cached "
        "archive, else a download from CaltechDATA (resumable).",
    ),
    sha256: str = typer.Option(
        None, help="Expected sha256 of the archive (default: check the published MD5/SHA-512)."
    ),
    train_per_class: int = typer.Option(60, min=1, help="Training images per class."),
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
    out: Path = _OUT,
    seed: int = _SEED,
    resize: int = _RESIZE,
    quality: int = _QUALITY,
    workers: int = _WORKERS,
    pass_through: bool = _PASS,
    max_bad: float = _MAX_BAD,
    overwrite: bool = _OVERWRITE,
    test_ratio: float = _TEST_RATIO,
    test_per_class: int = _TEST_PER_CLASS,
    max_pixels: int = _MAX_PIXELS,
    fmt: str = _FORMAT,
    as_json: bool = JSON_ALIAS,
) -> None:
    """Prepare Caltech-256 as in MXNet's caltech256.sh, but reproducible: N training images
    per class by seeded shuffle, all others for validation, one shared class map."""
    from finetune import settings
    from finetune.cli._render import output_format, progress_bars
    from finetune.data import datasets
    from finetune.data.sources import ExtractLimits

    fmt = output_format(fmt, as_json)  # before any work: a typo should not wait
    limits = ExtractLimits(int(max_extract_mb * 2**20), int(max_extract_gb * 2**30))
    kw = _common(
        out,
        "caltech256",
        seed,
        resize,
        quality,
        workers,
        pass_through,
        max_bad,
        overwrite,
        test_ratio,
        test_per_class,
        max_pixels,
    )
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
def folder(
    root: Path = typer.Argument(..., help="Folder with one sub-folder of images per class."),
    name: str = typer.Option(None, help="Dataset name (file prefix). Default: the folder name."),
    val_ratio: float = typer.Option(
        None, help="Fraction of each class for validation (default 0.2 unless --train-per-class)."
    ),
    train_per_class: int = typer.Option(
        None, min=1, help="Instead of --val-ratio: this many training images per class."
    ),
    exclude: list[str] = typer.Option([], help="Class folder to leave out (repeatable)."),
    out: Path = _OUT,
    seed: int = _SEED,
    resize: int = _RESIZE,
    quality: int = _QUALITY,
    workers: int = _WORKERS,
    pass_through: bool = _PASS,
    max_bad: float = _MAX_BAD,
    overwrite: bool = _OVERWRITE,
    test_ratio: float = _TEST_RATIO,
    test_per_class: int = _TEST_PER_CLASS,
    max_pixels: int = _MAX_PIXELS,
    fmt: str = _FORMAT,
    as_json: bool = JSON_ALIAS,
) -> None:
    """Prepare any folder-per-class image set (jpg, jpeg, png, bmp, webp)."""
    from finetune.cli._render import output_format, progress_bars
    from finetune.data import datasets

    fmt = output_format(fmt, as_json)  # before any work: a typo should not wait
    name = name or root.resolve().name
    if val_ratio is None and train_per_class is None:
        val_ratio = 0.2
    kw = _common(
        out,
        name,
        seed,
        resize,
        quality,
        workers,
        pass_through,
        max_bad,
        overwrite,
        test_ratio,
        test_per_class,
        max_pixels,
    )
    kw["params"].update(
        val_ratio=val_ratio, train_per_class=train_per_class, exclude=tuple(exclude)
    )
    with progress_bars(fmt == "table") as progress:
        result = datasets.prepare_folder(root=root, progress=progress, **kw)
    _report(result, fmt)


def _report(result, fmt: str) -> None:
    from finetune.cli._render import echo_json, record_csv
    from finetune.data.summary import summary_lines

    if fmt == "json":
        echo_json(result.manifest.model_dump(mode="json"))
        return
    if fmt == "csv":
        typer.echo(record_csv(result.manifest.model_dump(mode="json")), nl=False)
        return
    for line in summary_lines(result.manifest, result.out, result.reused):
        typer.echo(line)
