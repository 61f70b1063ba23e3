"""One small registry for every kind of plugin (backends, engines): names to implementations,
each given as the object or as ``"module:attribute"``, imported on first use so a light
caller never pays for a heavy plugin. An unknown name is the caller's error class, with a
did-you-mean and the known names."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Generic, TypeVar, cast

from finetune.errors import ConfigError, FinetuneError, did_you_mean

T = TypeVar("T")


class Registry(Generic[T]):
    """Named plugins of one ``kind`` ("engine", "backend"), in the order they were added."""

    def __init__(self, kind: str, error: type[FinetuneError] = ConfigError) -> None:
        self.kind = kind
        self.error = error
        self._entries: dict[str, T | str] = {}

    def add(self, name: str, item: T | str) -> None:
        """Register ``item`` (or its ``"module:attribute"`` path) under ``name``, once."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = item

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def get(self, name: str, error: type[FinetuneError] | None = None) -> T:
        """The plugin registered as ``name`` (imported now if it was given by path); an unknown
        name raises ``error`` (default: the registry's) with a suggestion."""
        if not isinstance(name, str) or name not in self._entries:
            raise (error or self.error)(
                f'unknown {self.kind} "{name}".{did_you_mean(str(name), self.names)}',
                f"use one of: {', '.join(self.names)}.",
            )
        entry = self._entries[name]
        if isinstance(entry, str):
            module, _, attribute = entry.partition(":")
            entry = cast(T, getattr(importlib.import_module(module), attribute))
            self._entries[name] = entry
        return entry

    def values(self) -> list[T]:
        """Every plugin, in order (each imported now if it was given by path)."""
        return [self.get(name) for name in self._entries]
