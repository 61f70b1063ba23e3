"""Finding and loading recipes: by name or by path, with ``key=value`` overrides.

Where recipes live: the bundled ones are package data in ``finetune/recipes/builtin/`` (the
single copy; the repository's top-level ``recipes/`` links to those files, so
``finetune launch recipes/caltech256-resnet50.yaml`` works from a checkout and an installed
package still has every recipe). A ``recipes/`` folder in the current directory is searched
first, so a project can add its own recipes or shadow a bundled one by name.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from finetune.errors import ConfigError, did_you_mean
from finetune.recipes import yamltext
from finetune.recipes.overrides import apply_overrides
from finetune.recipes.renamed import upgrade
from finetune.recipes.schema import Recipe, validate_recipe

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class RecipeFile:
    """A recipe file found on the search path."""

    name: str
    path: Path
    origin: str  # "project" (./recipes) or "builtin" (package data)


def search_dirs() -> list[tuple[str, Path]]:
    """Where recipes are looked up by name, first match wins."""
    return [("project", Path.cwd() / "recipes"), ("builtin", BUILTIN_DIR)]


def available() -> dict[str, RecipeFile]:
    """Every recipe reachable by name, sorted by name."""
    found: dict[str, RecipeFile] = {}
    for origin, folder in search_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix in SUFFIXES and path.is_file() and path.stem not in found:
                # ./recipes in a checkout links to the bundled files: call those builtin.
                builtin = path.resolve().parent == BUILTIN_DIR
                found[path.stem] = RecipeFile(path.stem, path, "builtin" if builtin else origin)
    return dict(sorted(found.items()))


def find(name_or_path: str | Path) -> Path:
    """The file of a recipe given by name (``caltech256-resnet50``) or by path."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.suffix in SUFFIXES or "/" in text:
        if path.is_file():
            return path
        raise ConfigError(f"recipe file {text} does not exist", "check the path.")
    known = available()
    if text in known:
        return known[text].path
    raise ConfigError(
        f"unknown recipe {text!r}.{did_you_mean(text, list(known))}",
        f"use one of: {', '.join(known) or '(none found)'}, or give a path to a YAML file "
        "(`finetune recipes list` shows them).",
    )


def load_recipe(name_or_path: str | Path, overrides: Sequence[str] = ()) -> Recipe:
    """Find, read, override and validate a recipe; ConfigError on any problem."""
    path = find(name_or_path)
    return load_file(path, overrides, by_name=path != Path(str(name_or_path)).expanduser())


def load_file(path: str | Path, overrides: Sequence[str] = (), by_name: bool = False) -> Recipe:
    """Read one recipe file. ``name`` defaults to the file's stem; a recipe found by name must
    carry that name (the file name is how it is looked up)."""
    path = Path(path)
    data = read_mapping(path)
    data.setdefault("name", path.stem)
    if by_name and data["name"] != path.stem:
        raise ConfigError(
            f"{path}: recipe name {data['name']!r} differs from its file name {path.stem!r}",
            f"rename the file to {data['name']}.yaml or set `name: {path.stem}`.",
        )
    data = upgrade(data, str(path))  # renamed keys: read as the new ones, with a note
    source = str(path) + (f" with {' '.join(overrides)}" if overrides else "")
    return validate_recipe(apply_overrides(data, overrides), source)


def read_mapping(path: Path) -> dict:
    """The YAML mapping in ``path``; ConfigError for unreadable or non-mapping files."""
    import yaml

    try:
        data = yamltext.load(_text(path))
    except OSError as exc:
        raise ConfigError(f"cannot read recipe {path}: {exc.strerror}", "check the path.") from None
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{path} is not valid YAML: {' '.join(str(exc).split())}",
            "fix the YAML syntax at the position shown (indentation, a missing colon).",
        ) from None
    except yamltext.TooDeep:
        raise ConfigError(
            f"{path} nests lists or mappings too deeply to be a recipe",
            "a recipe is a few sections of plain keys: start from `finetune recipes show "
            "caltech256-resnet50` and edit it.",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a recipe must be a mapping of sections, got {type(data).__name__}",
            "start from `finetune recipes show caltech256-resnet50` and edit it.",
        )
    return data


def _text(path: Path) -> str:
    """The file's text: UTF-8 (a BOM is dropped), or UTF-16/32 with a BOM as YAML allows; a
    ConfigError for anything else (a binary file, another encoding)."""
    raw = path.read_bytes()
    boms = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
            (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))  # fmt: skip
    encoding = next((enc for bom, enc in boms if raw.startswith(bom)), "utf-8-sig")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not a text file in {encoding.removesuffix('-sig').upper()} (byte "
            f"{exc.start} cannot be decoded: {raw[exc.start : exc.start + 1]!r}); a recipe is "
            "YAML text",
            "give the recipe's .yaml file (save it as UTF-8), or start from `finetune recipes "
            "show caltech256-resnet50`.",
        ) from None
    if "\x00" in text:
        raise ConfigError(
            f"{path} holds NUL characters: a binary file, or UTF-16/32 text without a "
            "byte-order mark -- not a YAML recipe",
            "give the recipe's .yaml file (save it as UTF-8).",
        )
    return text


def validate_many(names_or_paths: Iterable[str | Path]) -> list[tuple[str, Recipe | ConfigError]]:
    """Load each recipe (a folder stands for its YAML files), collecting the error instead of
    stopping at the first bad one."""
    results: list[tuple[str, Recipe | ConfigError]] = []
    for item in _expand(names_or_paths):
        try:
            results.append((str(item), load_recipe(item)))
        except ConfigError as exc:
            results.append((str(item), exc))
    return results


def _expand(items: Iterable[str | Path]) -> Iterable[str | Path]:
    for item in items:
        if Path(item).is_dir():
            yield from sorted(p for p in Path(item).iterdir() if p.suffix in SUFFIXES)
        else:
            yield item


def dump_yaml(recipe: Recipe) -> str:
    """The recipe as YAML, every default spelled out (what `recipes show` prints)."""
    import yaml

    data = recipe.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def with_overrides(recipe: Recipe, overrides: Sequence[str]) -> Recipe:
    """An already-loaded recipe with ``KEY=VALUE`` overrides applied and re-validated."""
    if not overrides:
        return recipe
    data = apply_overrides(recipe.model_dump(mode="json"), overrides)
    return validate_recipe(data, f"{recipe.name} with {' '.join(overrides)}")
