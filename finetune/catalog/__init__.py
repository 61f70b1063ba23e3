"""The instance catalog: GPU instance facts and prices as CSV data with dates and sources.

- ``instances``: what an instance type is (GPUs, memory, retired or not, its successor).
- ``prices``: hourly on-demand USD per instance, region and backend (ec2 | sagemaker), from the
  bundled snapshot overlaid by the user cache that ``finetune prices refresh`` writes.
- ``fx``: the ECB euro reference rate (EUR = USD / rate), dated.
- ``spot``: current spot prices when asked, else an estimate from a documented default discount.
- ``calibration.csv`` (with calibration.md) and ``measured.csv``: the rows the performance
  model (finetune.estimate.perf) learns from: published and gpu-check-measured throughputs.
- ``refresh``: the AWS Pricing API and the ECB feed into the cache (boto3 imported lazily).

Everything here is stdlib-only at import time so ``finetune --help`` stays instant.
"""
