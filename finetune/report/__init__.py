"""Reports over finished runs: pure cost and scaling arithmetic, then rendering.

- ``model.RunFacts``: one finished run as the report needs it (the run ledger builds these).
- ``money``: THE money function -- the charges a backend reports (seconds, instances, prices
  paid and their sources) billed by AWS's rules and converted at a dated ECB rate.
- ``cost``: figures derived from money: euros per epoch, SageMaker spot savings, estimates.
- ``scaling``: speedup and efficiency against the 1-GPU baseline; time and euros to accuracy.
- ``render``: the report as a text table, JSON, CSV or Markdown, with one provenance line.
- ``plot``: speedup vs ideal and cost vs time (matplotlib, imported only when plotting).
"""
