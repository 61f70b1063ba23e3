"""The estimate, the product's headline: time and euros for a run before it starts.

One room, entered once per estimate (``estimator.estimate_run``, called by the plan's
finetune.plan.estimate); the caller reads the ledger's measured history and hands it in.
Nothing here imports the Plan: a Plan carries this room's ``Estimate``.

- ``perf/``: the performance model -- predicted training images/s with a band and its basis
  (calibration rows, GPU peaks, counted FLOPs, multi-host efficiency, the CPU decode cap);
- ``run_history``: finished runs' measured images/s, which replace the prediction for their cell;
- ``estimator``: a prediction (or a measurement) and a price made time and euros, every source
  named; ``planned``: the typed ``Estimate`` a Plan carries;
- ``money``: THE money function -- charges billed by AWS's rules and converted at a dated
  ECB rate (a finished run's report uses the same one);
- ``cost``: figures derived from money: euros per epoch, managed-spot savings, the planned bill;

Nothing here reads the ledger or names a backend.
"""
