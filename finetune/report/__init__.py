"""Reports over finished runs: pure cost and scaling arithmetic, then rendering.

- ``model.RunFacts``: one finished run as the report needs it (the run ledger builds these).
- ``cost``: euros from billable seconds, EC2's 60 s minimum, SageMaker spot savings, estimates.
- ``scaling``: speedup and efficiency against the 1-GPU baseline; time and euros to accuracy.
- ``render``: the report as a text table, JSON, CSV or Markdown, with one provenance line.
- ``plot``: speedup vs ideal and cost vs time (matplotlib, imported only when plotting).
"""
