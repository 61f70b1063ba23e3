"""The user's config file: operator settings kept between sessions, in TOML.

``$XDG_CONFIG_HOME/finetune/config.toml`` (platformdirs' user config folder; FINETUNE_CONFIG
names another file). It holds the same keys as the FINETUNE_* environment variables
(finetune.settings.Settings): region, bucket, role_arn, profile, data_dir, cache_dir. The
environment wins over the file, the file over the defaults; `finetune config show` says
which one each value came from. Written to a temporary name, then renamed.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from finetune.errors import ConfigError
from finetune.files import write_atomic

ENV_FILE = "FINETUNE_CONFIG"
ENV_PREFIX = "FINETUNE_"


def path() -> Path:
    """Where the config file is (it may not exist yet)."""
    if os.environ.get(ENV_FILE):
        return Path(os.environ[ENV_FILE]).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("finetune", appauthor=False)) / "config.toml"


def read() -> dict[str, str]:
    """The file's key/value pairs ({} when there is no file); a ConfigError if it is not
    TOML of plain keys."""
    file = path()
    try:
        data = tomllib.loads(file.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, RecursionError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"the config file {file} cannot be read: {exc}",
            "fix or delete it (`finetune config set KEY VALUE` writes a valid one).",
        ) from None
    nested = [k for k, v in data.items() if isinstance(v, dict | list)]
    if nested:
        raise ConfigError(
            f"the config file {file} has tables or lists ({', '.join(nested)}); it holds "
            'plain `key = "value"` lines',
            "remove those entries (`finetune config show` lists the keys).",
        )
    return {k: str(v) for k, v in data.items()}


def write(file: Path, data: dict[str, str]) -> None:
    """Plain ``key = "value"`` lines (TOML basic strings share JSON's escapes)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# finetune settings: `finetune config show` explains them; env FINETUNE_* wins."]
    lines += [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in sorted(data.items())]
    write_atomic(file, "\n".join(lines) + "\n")
