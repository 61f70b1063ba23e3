"""`python -m finetune.agent`: one training attempt on an EC2 instance (see supervisor)."""

from __future__ import annotations

import sys

from finetune.agent.run import main

if __name__ == "__main__":
    sys.exit(main())
