"""Recipes: YAML training recipes, their model, ``key=value`` overrides and the scaling rule.

Kept empty on purpose: ``finetune.recipes.lr_scaling`` is imported by the trainer and must pull
in nothing but the standard library. Import the submodules you need:

- ``finetune.recipes.schema``: :class:`Recipe` (frozen pydantic, unknown keys rejected)
- ``finetune.recipes.loading``: :func:`load_recipe`, :func:`available`, :func:`validate_paths`
- ``finetune.recipes.overrides``: :func:`apply_overrides`, :func:`parse_override`
- ``finetune.recipes.lr_scaling``: global batch, scaled learning rate, warmup, lr schedule
"""
