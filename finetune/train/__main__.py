"""``python -m finetune.train [train]``: the training container's entrypoint (the logic is in
finetune.train.entrypoint, so that importing the package does not import this module)."""

import sys

from finetune.train.entrypoint import main

sys.exit(main())
