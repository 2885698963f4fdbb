"""Head atlas: what every attention head does across a whole dataset.

`python -m viz_core.atlas --model NAME --data FILE --out DIR` (see __main__.py) runs the
model over every example on Ray Data (or in-process), scores each head on each example for
the roles of roles.py, and writes Parquet shards plus a per-head summary (summary.py).
`--task patching --pairs FILE` runs head patching over (clean, corrupted) pairs instead
(patching.py); `--task circuit --pairs FILE` edge attribution over them (circuit.py).
Role definitions and the engines: docs/ATLAS.md.
"""

from .circuit import is_circuit, load_circuit
from .engine import AtlasConfig, AtlasError, AtlasStopped, choose_engine, run_atlas
from .inputs import PROBE, AtlasInputError
from .patching import PatchingAtlas, is_patching, load_patching
from .roles import ROLE_LABELS, ROLES, block_roles, dominant_role
from .summary import Atlas, is_atlas, load_atlas

__all__ = ["PROBE", "ROLES", "ROLE_LABELS", "Atlas", "AtlasConfig", "AtlasError",
           "AtlasInputError", "AtlasStopped", "PatchingAtlas", "block_roles", "choose_engine",
           "dominant_role", "is_atlas", "is_circuit", "is_patching", "load_atlas", "load_circuit",
           "load_patching", "run_atlas"]
