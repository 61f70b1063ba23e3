"""finetune.recipes.yamltext: libyaml's parser gives exactly what PyYAML's pure-Python
SafeLoader gives (the oracle), and either stops a file nested past its limit with TooDeep."""

from __future__ import annotations

import pytest
import yaml

from finetune.recipes import yamltext
from finetune.recipes.loading import BUILTIN_DIR

# YAML 1.1 scalars whose typing is the resolver's (PyYAML's, under both parsers)
SCALARS = """\
exponent_without_dot: 1e-4
with_dot: 1.0e-4
yes_is_a_bool: yes
octal: 0o17
old_octal: 017
hex: 0x1f
underscores: 1_000
sexagesimal: 1:30
null_tilde: ~
date: 2026-11-28
quoted: "yes"
nested: {a: [1, 2.5, [x, {b: null}]], c: !!str 3}
multiline: |
  two
  lines
"""


def test_libyaml_reads_every_builtin_recipe_and_each_scalar_as_pyyaml_does():
    assert yaml.__with_libyaml__  # the dev lock's PyYAML wheel has it
    texts = [p.read_text("utf-8") for p in sorted(BUILTIN_DIR.glob("*.yaml"))]
    assert len(texts) >= 12
    for text in [*texts, SCALARS]:
        assert yamltext.load(text) == yaml.load(text, Loader=yaml.SafeLoader)


@pytest.mark.parametrize("libyaml", [True, False])
def test_nesting_past_the_parsers_limit_is_too_deep_and_other_bad_yaml_stays_yaml_error(
    libyaml, monkeypatch
):
    monkeypatch.setattr(yaml, "__with_libyaml__", libyaml)
    depth = 100_000 if libyaml else 600  # libyaml stops at 1,000; PyYAML at Python's limit
    with pytest.raises(yamltext.TooDeep):
        yamltext.load("steps: " + "[" * depth + "]" * depth)
    with pytest.raises(yamltext.TooDeep):
        yamltext.load("a: " + "{a: " * depth + "1" + "}" * depth)
    assert yamltext.load("a: " + "[" * 200 + "]" * 200) == {
        "a": yaml.safe_load("[" * 200 + "]" * 200)
    }
    with pytest.raises(yaml.YAMLError):
        yamltext.load("a: [1, 2\nb: {")
