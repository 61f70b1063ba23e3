"""The performance model: predicted training images/s before anything runs, with its basis.

A roofline per layer class (roofline.py): what one image costs -- the FLOPs of its
convolutions and matrix products, the bytes they and the normalisation/elementwise ops move,
the elements those touch, the optimizer's update and the kernels per step (traffic.py,
counted once from the network definition on the meta device: traffic_count.py) -- against
what the GPU can do: its tensor peak, memory bandwidth and instruction issue rate
(gpus.roofs, gpu_peaks.csv), each at an efficiency of the software stack (stacks.py), fitted
to every published and measured figure (observations.py, fit.py) and never per GPU.

- ``calibration``: published throughputs (catalog/calibration.csv), each sourced;
- ``measured``: gpu-check's own rows (catalog/measured.csv), which win on their own GPU;
- ``setup``: ``Setup``, what a prediction is for;
- ``multihost``: ring all-reduce over the instance's interconnect (interconnect.csv),
  overlapped with backward, and a straggler term fitted to the multi-GPU calibration rows;
- ``pipeline``: the CPU decode cap (vCPUs x a per-core rate, pipeline.csv);
- ``bands``: the band, from the backtest's errors per level of evidence (bands.csv);
- ``throughput``: ``predict``, which joins them into a ``Prediction`` (images/s, band, basis);
- ``backtest``: every row predicted without itself, its GPU, its source or its family; and
  ``python -m finetune.estimate.perf.backtest ROWS.csv`` for your own rows (userrows.py).

``flops`` keeps the engine counter's FLOPs per image (train_flops.csv) for telemetry and
reports. estimate/estimator.py turns a prediction into time and euros.
"""
