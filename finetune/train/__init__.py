"""The trainer: runs where the GPUs are (a SageMaker container, an EC2 instance, or a local
subprocess) and reads the SageMaker container contract.

Start a run with ``python -m finetune.train`` on an /opt/ml tree (``FINETUNE_ML_ROOT`` moves
it; see :mod:`finetune.train.layout`), or in-process with :func:`main`. Nothing here
imports MXNet until training starts; the CLI never imports this package.
"""

from finetune.train.entrypoint import main

__all__ = ["main"]
