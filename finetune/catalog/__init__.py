"""The instance catalog: GPU instance facts and prices as CSV data with dates and sources.

- ``instances``: what an instance type is (GPUs, memory, retired or not, its successor).
- ``prices``: hourly on-demand USD per instance, region and backend (ec2 | sagemaker), from the
  bundled snapshot overlaid by the user cache that ``finetune prices refresh`` writes.
- ``fx``: the ECB euro reference rate (EUR = USD / rate), dated.
- ``spot``: current spot prices when asked, else an estimate from a documented default discount.
- ``throughput``: the ledger's measured images/s per cell, which replaces the model's figure.
- ``perf``: the performance model: predicted images/s from sourced calibration rows
  (calibration.csv, calibration.md), GPU peaks, counted FLOPs, scaling and the CPU decode cap.
- ``refresh``: the AWS Pricing API and the ECB feed into the cache (boto3 imported lazily).

Everything here is stdlib-only at import time so ``finetune --help`` stays instant.
"""
