"""Human-readable summary of a prepared dataset."""

from __future__ import annotations

from pathlib import Path

from finetune.data.manifest import DatasetManifest


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def summary_lines(m: DatasetManifest, out: Path, reused: bool = False) -> list[str]:
    """A few lines: where, how many classes and images, skipped inputs, files."""
    head = "Already prepared (unchanged):" if reused else "Prepared:"
    p = m.params
    split = f"{p.train_per_class} train/class" if p.train_per_class else f"val ratio {p.val_ratio}"
    size = (
        "original bytes" if p.pass_through else f"shorter side {p.resize or 'kept'}, q{p.quality}"
    )
    lines = [
        f"{head} {out}",
        f"  classes  {m.num_classes}",
        f"  train    {m.splits['train'].count} images",
        f"  val      {m.splits['val'].count} images",
    ]
    if "test" in m.splits:
        held = f"{p.test_per_class}/class" if p.test_per_class else f"ratio {p.test_ratio}"
        lines.append(f"  test     {m.splits['test'].count} images (held out, {held})")
    lines += [
        f"  split    {split}, seed {p.seed}; images {size}",
    ]
    if m.skipped:
        lines.append(f"  skipped  {len(m.skipped)} unreadable image(s), listed in manifest.json:")
        lines += [f"    {s.path}: {s.reason}" for s in m.skipped[:5]]
        if len(m.skipped) > 5:
            lines.append(f"    ... and {len(m.skipped) - 5} more")
    if m.ignored:
        lines.append(f"  ignored  {len(m.ignored)} file(s) or link(s), e.g. {m.ignored[0].path}")
        links = [i for i in m.ignored if "link" in i.reason]  # what a user may have meant
        lines += [f"    {i.path}: {i.reason}" for i in links[:5]]
    total = sum(f.bytes for f in m.files.values())
    lines.append(f"  files    {len(m.files)} + manifest.json, {_size(total)}")
    return lines
