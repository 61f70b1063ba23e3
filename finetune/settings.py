"""Operator settings: where data lives and which AWS account to use. Env vars FINETUNE_*."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _user_dir(kind: str) -> Path:
    import platformdirs

    fn = platformdirs.user_data_dir if kind == "data" else platformdirs.user_cache_dir
    return Path(fn("finetune", appauthor=False))


class Settings(BaseSettings):
    """Read once from the environment (FINETUNE_DATA_DIR, FINETUNE_REGION, ...)."""

    model_config = SettingsConfigDict(env_prefix="FINETUNE_", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: _user_dir("data"))
    cache_dir: Path = Field(default_factory=lambda: _user_dir("cache"))
    profile: str | None = None
    region: str | None = None
    bucket: str | None = None
    role_arn: str | None = None
    # SageMaker ml.* over the same EC2 instance, for estimates until `prices refresh` caches
    # real ml.* prices (0.25 = 25 % dearer; ml.* training runs 15-25 % above EC2).
    sagemaker_markup: float = Field(0.25, ge=0, le=5)

    @property
    def datasets_dir(self) -> Path:
        return self.data_dir / "datasets"

    @property
    def downloads_dir(self) -> Path:
        return self.cache_dir / "downloads"


@lru_cache(maxsize=1)
def get() -> Settings:
    return Settings()


def dataset_path(name_or_path: str) -> Path:
    """A prepared dataset given as a folder path, or as a name under the data directory."""
    p = Path(name_or_path).expanduser()
    if p.exists() or "/" in name_or_path or name_or_path.startswith("."):
        return p
    return get().datasets_dir / name_or_path
