"""`python -m finetune`. Ctrl-C while the command line is still loading ends it quietly."""

import sys

try:
    from finetune.cli import main
except KeyboardInterrupt:
    sys.exit(130)

if __name__ == "__main__":
    main()
