"""`python -m attention_lab ...`: the `attention-lab` command (attention_lab/cli.py)."""

import sys

from .cli import main

sys.exit(main())
