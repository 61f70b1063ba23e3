"""The performance model: predicted training images/s before anything runs, with its band and
basis. A roofline per layer class (roofline.py) on each GPU's roofs (gpus.py), its
efficiencies fitted per software stack to published and measured figures (fit.py), never per
GPU; checked by the backtest (backtest.py). docs/cost.md and docs/decisions/020-roofline-model.md
tell the whole model."""
