"""The estimate, the product's headline: time and euros for a run before it starts, as a
pipeline of four stages entered once (estimator.py: resolve, throughput, duration, bill);
``perf/`` is the performance model, ``money`` THE money function finished runs are costed
with too. Nothing here reads the ledger, names a backend or looks an engine up by name
(docs/cost.md: how an estimate is made)."""
