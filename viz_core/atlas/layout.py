"""Where an atlas keeps its files (all under one output directory):

    manifest.json             what the run is (model, data, settings) and its input shards
    input/shard-00000.parquet the examples of shard 0: example, text, probe
    shards/examples-00000.parquet   per example: tokens, target, cut/error flags
    shards/heads-00000.parquet      per (example, block, head): role scores and peaks
    summary.parquet, top.parquet, hist.parquet, atlas.json   the per-head summary
    progress.json             done / total / examples per second, rewritten as shards finish
    error.json                a failed run's message as data (write_error), for the page
    shards/errors-00000.json  a pair task's failed pairs' errors as data (error_data)
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from ..errors import VizError
from ..i18n import N_

MANIFEST, INFO, PROGRESS = "manifest.json", "atlas.json", "progress.json"
ERROR = "error.json"


def input_path(out: Path, shard: int) -> Path:
    return Path(out) / "input" / f"shard-{shard:05d}.parquet"


def examples_path(out: Path, shard: int) -> Path:
    return Path(out) / "shards" / f"examples-{shard:05d}.parquet"


def heads_path(out: Path, shard: int) -> Path:
    return Path(out) / "shards" / f"heads-{shard:05d}.parquet"


def errors_path(out: Path, shard: int) -> Path:
    """A pair task's shard's errors as data ({example: error_data}), beside its rows."""
    return Path(out) / "shards" / f"errors-{shard:05d}.json"


def shard_done(out: Path, shard: int) -> bool:
    return heads_path(out, shard).is_file() and examples_path(out, shard).is_file()


def done_shards(out: Path) -> list[int]:
    folder = Path(out) / "shards"
    if not folder.is_dir():
        return []
    ids = sorted(int(p.stem.split("-")[1]) for p in folder.glob("heads-*.parquet"))
    return [i for i in ids if examples_path(out, i).is_file()]


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, table) -> None:
    """Write a pyarrow table as Parquet under a temporary name, then rename it into place."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    """The JSON object in the file, or None when it is missing, unreadable (broken, nested
    too deeply) or not an object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


# What atlas.json holds that the Head atlas page reads, and its type
INFO_TYPES = {"model": str, "data": str, "method": str, "task": str, "examples": int,
              "probe_examples": int, "token_cut": int, "failed": int, "shards": int,
              "shards_done": int, "patched": int, "small_gap": int, "steps": int,
              "complete": bool, "input": dict, "errors": list}


def read_info(path: Path) -> dict:
    """A run's atlas.json, checked (``checked_info``); unreadable or not an object: the
    AtlasInputError of a damaged directory."""
    info = read_json(Path(path) / INFO)
    if info is None:
        raise damaged_error(path, f"{INFO} is not a JSON object")
    return checked_info(path, info)


def checked_info(path: Path, info: dict) -> dict:
    """atlas.json as read, its fields of the types the page reads (INFO_TYPES; every value
    of "input" a number, every entry of "errors" an object); a damaged atlas.json raises
    the AtlasInputError of ``damaged``."""
    for key, kind in INFO_TYPES.items():
        value = info.get(key)
        bad = value is not None and (not isinstance(value, kind) or (
            kind is int and isinstance(value, bool)))
        if kind is dict and isinstance(value, dict):
            bad = not all(isinstance(v, (int, float)) for v in value.values())
        if kind is list and isinstance(value, list):
            bad = not all(isinstance(v, dict) for v in value)
        if bad:
            raise damaged_error(path, f"{INFO}: {key} = {value!r:.60}")
    return info


def damaged_error(path: Path, what: str):
    from .inputs import AtlasInputError

    return AtlasInputError(N_("{path} is a damaged atlas directory ({what}): run the atlas "
                              "again, or continue it with --resume."), path=path, what=what)


@contextmanager
def damaged(path: Path):
    """Reading a run's files: a file that is missing, truncated or of another shape raises
    one AtlasInputError that names the directory, instead of pyarrow's or pandas' error."""
    from .inputs import AtlasInputError

    try:
        yield
    except AtlasInputError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        text = " ".join(str(err).split())
        raise damaged_error(path, f"{type(err).__name__}: {text[:160]}") from err


def write_error(out: Path, err: VizError | None) -> None:
    """Keep a failed run's message in `out` as its English template and values (a VizError's
    msgid and values, each value as JSON or its text), so the page that started the run can
    show it in its reader's language; None removes an earlier run's. Only where `out` is a
    folder already (a bad --out stays untouched)."""
    if not Path(out).is_dir():
        return
    path = Path(out) / ERROR
    if err is None:
        path.unlink(missing_ok=True)
    else:
        write_json(path, error_data(err))


def error_data(err: VizError) -> dict:
    """A VizError as JSON: its template, its values (each as JSON or its text), its text."""
    return {"msgid": err.msgid, "values": {
        k: v if isinstance(v, (int, float, bool, type(None))) else str(v)
        for k, v in err.values.items()}, "message": str(err)}


def read_error(out: Path) -> VizError | None:
    """The message write_error kept in `out`, as a VizError to translate; None where none."""
    return error_of(read_json(Path(out) / ERROR))


def error_of(data) -> VizError | None:
    """error_data's dict back as a VizError (None for anything else); a template its values
    do not fill gives the kept text."""
    if not isinstance(data, dict) or not isinstance(data.get("msgid"), str):
        return None
    values = data.get("values") if isinstance(data.get("values"), dict) else {}
    try:
        data["msgid"].format(**values)
        return VizError(data["msgid"], **values)
    except (KeyError, IndexError, ValueError):  # a template its values do not fill
        return VizError(str(data.get("message") or data["msgid"]))
