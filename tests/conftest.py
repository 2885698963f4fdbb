"""Test-wide settings: never touch the network, keep torch to the machine's cores."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")

import torch  # noqa: E402

# One thread: the models under test are small, and browser tests run a server process
# beside pytest on a 2-core machine; more threads only contend.
torch.set_num_threads(1)
