"""Reports over finished runs: scaling arithmetic, then rendering. Their euros come from
the estimate room's money function (finetune.estimate.money), the one a launch's estimate uses.

- ``runfacts.RunFacts``: one finished run as the report needs it (the run ledger builds these).
- ``speedup``: speedup and efficiency against the 1-GPU baseline; time and euros to accuracy.
- ``physical``: achieved TFLOP/s and the share of the GPU's peak.
- ``sweep``: one sweep's table.
- ``render``: the report as a text table, JSON, CSV or Markdown, with one provenance line.
- ``plot``: speedup vs ideal and cost vs time (matplotlib, imported only when plotting).
"""
