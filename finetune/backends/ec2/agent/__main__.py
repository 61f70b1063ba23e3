"""`python -m finetune.backends.ec2.agent`: one training attempt on an EC2 instance."""

from __future__ import annotations

import sys

from finetune.backends.ec2.agent.entry import main

if __name__ == "__main__":
    sys.exit(main())
