"""``python -m finetune.train [train]``: the training container's entrypoint (the logic is in
finetune.train.entrypoint, so that importing the package does not import this module)."""

import sys

from finetune.train import startup

startup.defer()  # before the engine's imports (finetune.train.startup)

from finetune.train.entrypoint import main  # noqa: E402

sys.exit(main())
