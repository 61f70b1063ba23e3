"""Count the parameters of every timm architecture and write the bundled table.

    PYTHONPATH=. .venv/bin/python scripts/count_timm_models.py   # rewrites the CSV below

Each architecture timm's registry lists is built with its default ImageNet head on the meta
device (shapes only: no weights, nothing downloaded), as timm_models.csv's Parameters column
says; `finetune recipes models` reads it instead of building ~1,400 networks. A network timm
cannot build on the meta device is left out (the listing counts it itself, or shows none).
Run it again after a timm upgrade (its version is in every row).
"""

from __future__ import annotations

from pathlib import Path

from finetune.catalog._files import atomic_write, rows_to_csv

OUT = Path(__file__).resolve().parents[1] / "finetune" / "engines" / "timm_models.csv"
HEADER = ("Model", "Parameters", "TimmVersion")


def main() -> None:
    import timm  # the engine's libraries: imported here, where the counting starts
    import torch

    rows = []
    for name in timm.list_models():
        try:
            with torch.device("meta"):
                net = timm.create_model(name, pretrained=False)
        except Exception as exc:  # a builder that needs real tensors or other arguments
            print(f"skipped {name}: {type(exc).__name__}: {str(exc)[:80]}")
            continue
        rows.append((name, sum(p.numel() for p in net.parameters()), timm.__version__))
    atomic_write(OUT, rows_to_csv(HEADER, rows))
    print(f"wrote {OUT} ({len(rows)} architectures)")


if __name__ == "__main__":
    main()
