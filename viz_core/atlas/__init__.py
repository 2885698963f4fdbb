"""Head atlas: what every attention head does across a whole dataset.

`python -m viz_core.atlas --model NAME --data FILE --out DIR` (see __main__.py) runs the
model over every example on Ray Data (or in-process), scores each head on each example for
the roles of roles.py, and writes Parquet shards plus a per-head summary (summary.py).
Role definitions: docs/ATLAS.md.
"""

from .engine import AtlasConfig, AtlasError, AtlasStopped, run_atlas
from .inputs import PROBE, AtlasInputError
from .roles import ROLE_LABELS, ROLES, block_roles, dominant_role
from .summary import Atlas, is_atlas, load_atlas

__all__ = ["PROBE", "ROLES", "ROLE_LABELS", "Atlas", "AtlasConfig", "AtlasError",
           "AtlasInputError", "AtlasStopped", "block_roles", "dominant_role", "is_atlas",
           "load_atlas", "run_atlas"]
