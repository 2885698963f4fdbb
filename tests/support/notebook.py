"""Running docs/quickstart.ipynb on a kernel of a given interpreter (nbclient + ipykernel) and
checking its figure cells."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "quickstart.ipynb"


PLOTLY_MIME = "application/vnd.plotly.v1+json"


def run_notebook(python: str, workdir: Path, env: dict | None = None, timeout: int = 600):
    """Execute docs/quickstart.ipynb on an ipykernel kernel of `python` (a kernelspec written
    to a temp folder, so the kernel is that interpreter's and no other, with `env` added to
    its environment); cells run in `workdir`. Returns the executed notebook; a cell that
    raises raises CellExecutionError."""
    import os

    import nbformat
    from nbclient import NotebookClient

    spec_root = workdir / "jupyter"
    spec = spec_root / "kernels" / "attention-lab-test"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "attention-lab test", "language": "python", "env": env or {}}),
        encoding="utf-8")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(spec_root)
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="attention-lab-test",
                       resources={"metadata": {"path": str(workdir)}}).execute()
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    return nb


def missing_figures(nb) -> list[int]:
    """Indices of the cells tagged "figure" whose outputs hold no plotly figure."""
    missing = []
    for i, cell in enumerate(nb.cells):
        if "figure" not in cell.get("metadata", {}).get("tags", []):
            continue
        if not any(PLOTLY_MIME in out.get("data", {}) for out in cell.get("outputs", [])):
            missing.append(i)
    return missing
