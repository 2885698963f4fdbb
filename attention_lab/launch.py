"""What the `attention-lab` subcommands share: where the app's files are, the environment a
served app runs with, and the one-line error. cli.py and serve.py both import it (neither
imports the other at module level, so there is no import circle)."""

from __future__ import annotations

from pathlib import Path

# What `make run` sets (Makefile): nothing is fetched from a hub, no usage statistics.
APP_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}


class CommandError(Exception):
    """A failure the user can act on: its message is printed as the one line."""


def app_dir() -> Path:
    """The folder holding app.py, pages/, assets/ and .streamlit/: attention_lab/app/ in an
    installed package, the repository's root in a clone."""
    package = Path(__file__).resolve().parent
    for folder in (package / "app", package.parent):
        if (folder / "app.py").is_file() and (folder / "pages").is_dir():
            return folder
    raise CommandError("the app's files (app.py, pages/) are not installed with this package")
