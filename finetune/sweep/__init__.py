"""`finetune sweep`: the scaling study as one command.

- ``grid``: --grid key=v1,v2 parsed and expanded into cells, each with its identity (recipe,
  dataset hash, engine, backend, grid values) and the recipe overrides it stands for.
- ``plan``: each cell's Plan (batch and learning rate by the linear scaling rule) and euro
  estimate, the total, and the --max-eur refusal.
- ``launcher``: the one adapter to the library call `finetune launch` uses.
- ``run``: launching with bounded parallelism, resuming an interrupted sweep from the ledger.
"""
