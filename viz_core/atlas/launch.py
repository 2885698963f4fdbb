"""Start an atlas as a subprocess and follow it: what the Streamlit page uses, so the
server process never starts Ray itself (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import VizError
from ..i18n import N_
from ..model.choices import AtlasEngine
from .layout import INFO, MANIFEST, PROGRESS, read_error, read_json

HOME_ENV = "ATTENTION_LAB_ATLAS_DIR"
ROOT = Path(__file__).resolve().parents[2]
LOG = "atlas.log"


def atlas_home() -> Path:
    """Where the page keeps the atlases it runs (ATTENTION_LAB_ATLAS_DIR, else a cache dir)."""
    raw = os.environ.get(HOME_ENV)
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "attention-lab" / "atlas"


def recent_runs(home: Path | None = None, n: int = 30) -> list[Path]:
    """Atlas directories under `home`, newest first."""
    home = home or atlas_home()
    if not home.is_dir():
        return []
    runs = [p for p in home.iterdir() if (p / MANIFEST).is_file()]
    return sorted(runs, key=lambda p: (p / MANIFEST).stat().st_mtime, reverse=True)[:n]


def new_run_dir(model: str, home: Path | None = None) -> Path:
    home = home or atlas_home()
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(model).name)[:40]
    out = home / f"{time.strftime('%Y%m%d-%H%M%S')}-{safe or 'model'}"
    i = 1
    while out.exists():
        out = out.with_name(f"{out.name.rsplit('~', 1)[0]}~{i}")
        i += 1
    out.mkdir(parents=True)
    return out


@dataclass
class Launched:
    out: Path
    process: subprocess.Popen

    def progress(self) -> dict:
        return read_json(self.out / PROGRESS) or {"state": "starting", "done": 0, "total": 0,
                                                   "rate": 0.0}

    def finished(self) -> bool:
        return self.process.poll() is not None

    def error(self) -> VizError | str | None:
        """The CLI's own message when it failed: as data where it kept one (error.json: the
        page translates it), else its last 'atlas:' line; None while running or when done."""
        if self.process.poll() in (None, 0):
            return None
        kept = read_error(self.out)
        if kept is not None:
            return kept
        try:
            lines = (self.out / LOG).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        said = [ln for ln in lines if ln.startswith("atlas: ")]
        return said[-1][len("atlas: "):] if said else VizError(
            N_("The atlas run stopped (exit code {code}); its log is {log}."),
            code=self.process.returncode, log=str(self.out / LOG))


def launch(model: str, data: str, out: Path, limit: int | None = None, batch: int = 8,
           engine: AtlasEngine = "auto", workers: int | None = None, shard_size: int = 32,
           probe: int = 32, device: str = "auto") -> Launched:
    """Start `python -m viz_core.atlas ...` writing into `out`; its output goes to atlas.log."""
    cmd = [sys.executable, "-m", "viz_core.atlas", "--model", model, "--data", data,
           "--out", str(out), "--batch", str(batch), "--engine", engine,
           "--shard-size", str(shard_size), "--probe", str(probe), "--device", device,
           "--quiet"]
    if limit:
        cmd += ["--limit", str(limit)]
    if workers:
        cmd += ["--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    log = open(out / LOG, "w")  # noqa: SIM115 - the child keeps writing after we return
    proc = subprocess.Popen(cmd, cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT, env=env,
                            stdin=subprocess.DEVNULL)
    log.close()
    return Launched(out, proc)


def finished_info(out: Path) -> dict | None:
    return read_json(Path(out) / INFO)
