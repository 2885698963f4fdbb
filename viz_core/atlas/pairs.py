"""Patching pairs for `python -m viz_core.atlas --task patching --pairs FILE`: a CSV/TSV (or
Parquet) file with the columns `clean` and `corrupted`, and optionally `token` and `against`
(the metric's target token and contrast token, as in `model.patch`).

Read as a stream, checked, and cut into input shards by the engine. Bad files stop before any
model runs (an AtlasInputError that says what is wrong and what would work): no such file,
empty, binary, no rows, a missing column (the columns present are listed). A pair whose clean
or corrupted cell is blank is skipped and counted; a pair the model rejects (for example
clean and corrupted texts of different token counts) is recorded with its error by the worker
and left out of the mean.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from viz_core.i18n import N_

from .inputs import MAX_CHARS, AtlasInputError, _sniff_binary, csv_batches, open_csv

REQUIRED = ("clean", "corrupted")
OPTIONAL = ("token", "against")
COLUMNS = (*REQUIRED, *OPTIONAL)
EXAMPLE = "clean,corrupted,token,against"


@dataclass
class PairStats:
    examples: int = 0  # pairs kept
    blank: int = 0  # rows with a blank clean or corrupted cell, skipped
    chars_cut: int = 0  # cells longer than MAX_CHARS, cut to it
    probes: int = 0  # always 0 (the engine's manifest reads it)


def _check_columns(path: Path, names: list[str]) -> None:
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        shown = ", ".join(repr(c) for c in names[:12]) or "none"
        raise AtlasInputError(
            N_("{path} has no {join} column (its columns: {shown}). A pairs file needs the "
              "columns 'clean' and 'corrupted', optionally 'token' and 'against'; its first line "
              "would read: {EXAMPLE}"), path=path, join=' or '.join(repr(c) for c in missing), shown=shown,
                EXAMPLE=EXAMPLE)


def _csv_rows(path: Path) -> Iterator[dict]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    # every cell is text: a token "1" or "true" stays the string it is
    reader = open_csv(path, f"; a pairs file starts with the line: {EXAMPLE}",
                      pacsv.ConvertOptions(column_types={c: pa.string() for c in COLUMNS}))
    _check_columns(path, reader.schema.names)
    present = [c for c in COLUMNS if c in reader.schema.names]
    for batch in csv_batches(path, reader):
        cols = {c: batch.column(c).to_pylist() for c in present}
        for i in range(batch.num_rows):
            yield {c: cols[c][i] if c in cols else None for c in COLUMNS}


def _parquet_rows(path: Path) -> Iterator[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as err:
        _sniff_binary(path)
        raise AtlasInputError(N_("{path} is not a readable Parquet file: {err}"),
                                 path=path, err=err) from None
    _check_columns(path, pf.schema_arrow.names)
    present = [c for c in COLUMNS if c in pf.schema_arrow.names]
    for batch in pf.iter_batches(columns=present, batch_size=4096):
        cols = {c: batch.column(c).to_pylist() for c in present}
        for i in range(batch.num_rows):
            yield {c: cols[c][i] if c in cols else None for c in COLUMNS}


def _cell(value, stats: PairStats) -> str | None:
    if value is None:
        return None
    text = str(value).replace("\x00", "")
    if len(text) > MAX_CHARS:
        stats.chars_cut += 1
        text = text[:MAX_CHARS]
    return text


def read_pairs(data: str, stats: PairStats, limit: int | None = None) -> Iterator[dict]:
    """The pairs of a file as a stream of {clean, corrupted, token, against} (token and
    against None when absent or blank), counted in `stats`."""
    path = Path(data).expanduser()
    if not path.exists():
        raise AtlasInputError(N_("No such pairs file: {data}"), data=data)
    if path.is_dir():
        raise AtlasInputError(N_("{data} is a folder; give a .csv, .tsv or .parquet file with the "
                                "columns clean and corrupted."), data=data)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        rows = _parquet_rows(path)
    elif suffix in (".csv", ".tsv", ".txt", ""):
        rows = _csv_rows(path)
    else:
        raise AtlasInputError(N_("{data}: a pairs file is a .csv, .tsv or .parquet file with the "
                                "columns clean and corrupted (first line: {EXAMPLE})."),
                                  data=data, EXAMPLE=EXAMPLE)
    for row in rows:
        if limit is not None and stats.examples >= limit:
            return
        clean, corrupted = _cell(row["clean"], stats), _cell(row["corrupted"], stats)
        if not clean or not clean.strip() or not corrupted or not corrupted.strip():
            stats.blank += 1
            continue
        token = _cell(row["token"], stats)
        against = _cell(row["against"], stats)
        stats.examples += 1
        yield {"clean": clean, "corrupted": corrupted,
               "token": token if token and token.strip() else None,
               "against": against if against and against.strip() else None}
    if stats.examples == 0:
        what = (N_("only rows with a blank clean or corrupted cell") if stats.blank
                else N_("no rows"))
        raise AtlasInputError(N_("{data} has {what}: no pair to patch. Each row needs a clean and "
                                "a corrupted text."), data=data, what=what)
