"""YAML text to Python values, as ``yaml.safe_load`` reads it, parsed by libyaml where PyYAML
has it (its wheels do): the same values, faster, and a hostile nesting stopped at once
(docs/decisions/064-yaml-through-libyaml.md). Without libyaml, PyYAML's SafeLoader reads it.
"""

from __future__ import annotations


class TooDeep(Exception):
    """The text nests lists or mappings deeper than YAML's parser goes."""


def load(text: str) -> object:
    """``yaml.safe_load(text)``; TooDeep for nesting past the parser's limit (libyaml's
    1,000 levels, or Python's recursion limit); yaml.YAMLError for other bad YAML."""
    import yaml

    try:
        if getattr(yaml, "__with_libyaml__", False):
            return yaml.load(text, Loader=yaml.CSafeLoader)
        return yaml.safe_load(text)
    except RecursionError:  # PyYAML composes nested collections recursively
        raise TooDeep() from None
    except yaml.MarkedYAMLError as exc:
        if exc.problem == "exceeded maximum nesting depth":  # libyaml's scanner
            raise TooDeep() from None
        raise
