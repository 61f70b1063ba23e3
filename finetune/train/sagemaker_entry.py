"""The program SageMaker's PyTorch training toolkit runs: ``python finetune_entry.py ARGS``.

This file travels at the root of the job's source directory as ``finetune_entry.py`` (see
finetune.backends.sagemaker.sourcedir), next to the ``finetune`` package it starts. The
toolkit runs it once per host, or under torchrun once per GPU when the job asks for its
torch_distributed launcher (several instances); our entrypoint joins that process group.

The toolkit also passes every hyperparameter as ``--name value`` arguments: they are ignored,
because the trainer reads the same values from /opt/ml/input/config/hyperparameters.json.
The package directory goes onto PYTHONPATH, so processes the trainer starts find it too.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    """Start the trainer from the source directory this file sits in."""
    root = os.path.dirname(os.path.abspath(__file__))
    if root not in sys.path:
        sys.path.insert(0, root)
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    from finetune.train import startup  # deferred: sys.path is set above

    startup.defer()  # before the engine's imports (finetune.train.startup)
    from finetune.train.entrypoint import main as train  # deferred: after startup.defer()

    return train([])


if __name__ == "__main__":
    sys.exit(main())
