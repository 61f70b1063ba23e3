"""The performance model: predicted training images/s before anything runs, with its basis.

Data (CSV beside the code, each row sourced) and pure lookups:

- ``flops``: training FLOPs and parameters per (network, image size), counted once with the
  engine's own counter (scripts/count_train_flops.py writes train_flops.csv);
- ``calibration``: published and measured throughputs (catalog/calibration.csv), each with its
  source and setup, and the achieved fraction of the GPU's peak (MFU) each implies;
- ``mfu``: the levels an MFU is learned at from calibration rows (same GPU and network, same
  GPU, architecture, generation); ``mfu_learned``: one setup's MFU, cached, with its basis;
- ``measured``: gpu-check's own rows (catalog/measured.csv), preferred where they match;
- ``setup``: ``Setup``, what a prediction is for;
- ``gpus``: the GPU behind an instance or a calibration row: peak per precision, architecture;
- ``multihost``: ring all-reduce over the instance's interconnect (interconnect.csv),
  overlapped with backward, and a straggler term fitted to the multi-GPU calibration rows;
- ``pipeline``: the CPU decode cap (vCPUs x a per-core rate, pipeline.csv);
- ``throughput``: ``predict``, which joins them into a ``Prediction`` (images/s, band, basis).

estimate/estimator.py turns a prediction into time and euros.
"""
