"""Where refreshed prices and rates are kept: <FINETUNE_CACHE_DIR>/prices, which overrides the
bundled snapshot. Apart from catalog/_files so that reading bundled data needs no settings
(settings/names reads the bundled regions while the settings are being validated)."""

from __future__ import annotations

from pathlib import Path

from finetune import settings


def cache_dir() -> Path:
    """The user cache that overrides the bundled snapshot: <FINETUNE_CACHE_DIR>/prices."""
    return settings.get().cache_dir / "prices"
