"""The training engines as facts: one descriptor each (what it builds, needs and runs on), in a
registry shaped like the backends' one. Light: no engine library is imported here, so planning,
pricing and the CLI ask it freely; the engines themselves are in finetune.train.engines.

- ``registry``: the engines by name (did-you-mean on a typo), their one list and the default;
- ``descriptor``: the ``Engine`` type and the questions callers ask it;
- ``backbones``: torchvision's ImageNet networks the torch engine builds, with preprocessing;
- ``timmzoo``: timm's models (``timm/<model>``) for the torch engine, their pretrained configs;
- ``models``: which models each engine builds, checked when a run is planned.
"""
