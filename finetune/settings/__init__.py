"""Operator settings: where data lives and which AWS account to use.

From the environment (FINETUNE_*), then the user's config file (configfile.py here:
`finetune config set KEY VALUE`), then the defaults below.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from finetune.errors import ConfigError, did_you_mean
from finetune.settings import configfile as config
from finetune.settings import names


def _user_dir(kind: str) -> Path:
    import platformdirs

    fn = platformdirs.user_data_dir if kind == "data" else platformdirs.user_cache_dir
    return Path(fn("finetune", appauthor=False))


class _ConfigFile(PydanticBaseSettingsSource):
    """The config file's values (finetune.settings.configfile), below the environment variables."""

    def get_field_value(self, field, field_name):  # the whole file is read in __call__
        return None, field_name, False

    def __call__(self) -> dict:
        return {k: v for k, v in config.read().items() if k in self.settings_cls.model_fields}


class Settings(BaseSettings):
    """Read once: FINETUNE_DATA_DIR, FINETUNE_REGION, ... over the config file's values."""

    model_config = SettingsConfigDict(env_prefix="FINETUNE_", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: _user_dir("data"))
    cache_dir: Path = Field(default_factory=lambda: _user_dir("cache"))
    profile: str | None = None
    region: str | None = None
    bucket: str | None = None
    role_arn: str | None = None
    # our training image (the MXNet engine's; the torch engine runs on AWS's own images), as
    # `finetune image push` prints it: both AWS backends use it (EC2 also reads
    # FINETUNE_EC2_IMAGE first, as before)
    image: str | None = None
    # the `finetune infra deploy` stack whose parameters (instance types, VPC, runtime, count)
    # the caller policies enforce; launches check them first (finetune.aws.stacklimits)
    stack: str = "finetune"
    # SageMaker ml.* over the same EC2 instance, for estimates until `prices refresh` caches
    # real ml.* prices (0.25 = 25 % dearer; ml.* training runs 15-25 % above EC2).
    sagemaker_markup: float = Field(0.25, ge=0, le=5)

    @field_validator("region", "bucket")
    @classmethod
    def _aws_name(cls, value, info):
        """A region or bucket from the environment or the config file (finetune.settings.names);
        an empty one is unset, as it always was (`FINETUNE_REGION= finetune ...`)."""
        if value == "":
            return None
        return names.check_setting(info.field_name, value, _origin(info.field_name))

    @field_validator("data_dir", "cache_dir", mode="before")
    @classmethod
    def _a_folder(cls, value):
        """A folder finetune can make its own: never '' (it would silently mean the current
        folder), never an existing file."""
        text = str(value)
        if not text.strip():
            raise ValueError("an empty value is not a folder (it would mean the current folder)")
        folder = Path(text).expanduser()
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"{folder} exists and is not a folder (a regular file?)")
        above = next((p for p in folder.absolute().parents if p.exists()), None)
        if above is not None and not above.is_dir():  # it could never be made
            raise ValueError(f"{folder} is inside {above}, which is not a folder")
        return folder

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        """Explicit values, then the environment, then the config file."""
        return (init_settings, env_settings, _ConfigFile(settings_cls))

    @property
    def datasets_dir(self) -> Path:
        return self.data_dir / "datasets"

    @property
    def downloads_dir(self) -> Path:
        return self.cache_dir / "downloads"


def _env_name(key: str) -> str | None:
    """The FINETUNE_* variable that sets ``key`` (any case), if one is set."""
    return next((n for n in os.environ if n.upper() == "FINETUNE_" + key.upper()), None)


def _origin(key: str) -> str:
    """Where a setting's value comes from, for a message: its variable, else the file."""
    return _env_name(key) or f"the config file's {key}"


@lru_cache(maxsize=1)
def get() -> Settings:
    """The settings in effect; a ConfigError naming the variable (or the config file's key),
    its value and what was expected when one is invalid."""
    return load()


def load() -> Settings:
    """Settings() read afresh, with an invalid value said as a ConfigError (see get)."""
    try:
        return Settings()
    except ValidationError as exc:
        raise _invalid(exc) from None


def _invalid(exc: ValidationError) -> ConfigError:
    err = exc.errors()[0]
    name = str(err["loc"][0]) if err.get("loc") else "?"
    value = str(err.get("input"))
    shown = repr(value if len(value) <= 300 else value[:297] + "...")  # a whole path
    why = err["msg"].removeprefix("Value error, ")
    kind = _EXPECTED.get(name, "a valid value")
    env = _env_name(name)
    if env:
        return ConfigError(
            f"the environment variable {env}={shown} is invalid: {why} (expected {kind})",
            f"set {env} to {kind}, or unset it.",
        )
    return ConfigError(
        f"the setting {name}={shown} in the config file {config.path()} is invalid: {why} "
        f"(expected {kind})",
        f"set it to {kind} with `finetune config set {name} VALUE`, or remove it with "
        f"`finetune config unset {name}`.",
    )


_EXPECTED = {
    "data_dir": "a folder path, made if missing",
    "cache_dir": "a folder path, made if missing",
    "sagemaker_markup": "a number from 0 to 5, e.g. 0.25 for 25 %",
}


def dataset_path(name_or_path: str) -> Path:
    """A prepared dataset given as a folder path, or as a name under the data directory."""
    return resolve_dataset(name_or_path)[0]


def resolve_dataset(name_or_path: str) -> tuple[Path, str | None]:
    """(folder, note). A bare name means the prepared dataset of that name first, even when
    a folder of the same name sits in the current directory (the images `prepare` read,
    typically); the note says so when both exist. A path (with a slash, ./, ~) is taken as
    it is."""
    p = Path(name_or_path).expanduser()
    if "/" in name_or_path or name_or_path.startswith((".", "~")) or p.is_absolute():
        return p, None
    prepared = get().datasets_dir / name_or_path
    if prepared.is_dir():
        note = None
        if p.exists():
            note = (
                f"using the prepared dataset {prepared}, not the folder ./{name_or_path} "
                f"(write ./{name_or_path} to use that one)"
            )
        return prepared, note
    return (p if p.exists() else prepared), None


# -- the config file's keys (`finetune config show|set|unset`) ----------------------------
def keys() -> list[str]:
    """Every key the file (and the environment) may set."""
    return list(Settings.model_fields)


def check_key(key: str) -> str:
    """``key`` normalised (dashes and case) if it is a setting, else a ConfigError."""
    name = key.strip().lower().replace("-", "_").removeprefix("finetune_")
    if name not in keys():
        raise ConfigError(
            f"unknown setting {key!r}.{did_you_mean(name, keys())}",
            f"use one of: {', '.join(keys())}.",
        )
    return name


def set_value(key: str, value: str | None) -> Path:
    """Set (or, with None, remove) one key in the config file, after checking the value; returns
    the file's path."""
    from pydantic import ValidationError

    name = check_key(key)
    data = config.read()
    if value is None:
        data.pop(name, None)
    else:
        names.check_setting(name, value, f"`config set {name}`")
        try:  # the value must be one the settings accept (a path for data_dir, ...)
            _one_field(name).validate_python(value)  # not Settings(): no other source
            if name in FOLDERS:
                _stored_folder(name, value)
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"]
            raise ConfigError(f"{name}={value!r}: {msg}", f"give a valid {name}.") from None
        except ValueError as exc:
            raise ConfigError(
                f"{name}={value!r}: {exc}", f"give {name} an absolute path to a folder."
            ) from None
        data[name] = value
    config.write(config.path(), data)
    get.cache_clear()  # what this process reads from now on, too
    return config.path()


FOLDERS = ("data_dir", "cache_dir")


def _stored_folder(name: str, value: str) -> None:
    """A folder setting stored in the config file: what the settings accept (never a file or
    a device such as /dev/null), and absolute -- a relative one would mean another folder
    from every working directory. ValueError says why not."""
    folder = Settings._a_folder(value)
    if not folder.is_absolute():
        raise ValueError(
            f"a relative path means another folder from every working directory "
            f"(here: {folder.absolute()})"
        )


def _one_field(name: str):
    """A validator of setting ``name`` alone (type and constraints), reading no environment
    or config file: a bad value elsewhere must not block fixing this one."""
    from pydantic import TypeAdapter

    f = Settings.model_fields[name]
    # an Annotated[...] built at runtime is a typing special form mypy cannot see as the
    # type form TypeAdapter takes (pydantic accepts it)
    return TypeAdapter(Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Entry:
    """One setting as it applies now, and where its value came from."""

    key: str
    value: str | None
    source: str  # "environment (FINETUNE_X)", "config file", or "default"


def show() -> list[Entry]:
    """Every setting's value in effect and its source."""
    current = load()
    from_file = config.read()
    out = []
    for key in keys():
        env = next((n for n in os.environ if n.upper() == "FINETUNE_" + key.upper()), None)
        if env:
            source = f"environment ({env})"
        elif key in from_file:
            source = "config file"
        else:
            source = "default"
        value = getattr(current, key)
        out.append(Entry(key, None if value is None else str(value), source))
    return out
