"""Atlas inputs: a text file (one example per line), a CSV or Parquet file with a `text`
column, or the built-in probe set; read as a stream, checked, and cut into input shards.

Bad input fails early with an AtlasInputError whose message says what is wrong and what
would work. Examples longer than MAX_CHARS characters are cut (and counted); the model
cuts what is still longer than it takes (counted by the workers).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from viz_core.i18n import N_

from ..errors import InputError

MAX_CHARS = 20_000  # the app's own limit for a text box and a URL value
SNIFF_BYTES = 65_536
PROBE = "probe"  # --data probe: only the built-in repeated-random-token set
FORMATS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet"}


class AtlasInputError(InputError):
    """An input file the atlas cannot read; the message says why and what would work."""


class AtlasError(AtlasInputError):
    """The run cannot go on (unreachable cluster, settings that differ from the run to
    resume, ...); the message says what to do."""


@dataclass
class InputStats:
    examples: int = 0
    blank: int = 0  # empty lines / null or empty text cells, skipped
    chars_cut: int = 0  # examples longer than MAX_CHARS, cut to it
    probes: int = 0
    probes_left_out: int = 0  # probe examples asked for and left out: no probe vocabulary


def _sniff_binary(path: Path) -> None:
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if not head:
        raise AtlasInputError(N_("{path} is empty: give a text file with one example per line, or "
                                "a CSV/Parquet file with a 'text' column."), path=path)
    if b"\x00" in head:
        raise AtlasInputError(N_("{path} looks binary (it holds NUL bytes), not text: give a "
                                "UTF-8 text file with one example per line, or a CSV/Parquet "
                                "file with a 'text' column."), path=path)


def _text_lines(path: Path) -> Iterator[str | None]:
    _sniff_binary(path)
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise AtlasInputError(
                    N_("{path} line {n} is not UTF-8 text ({reason} at byte {start}): is it a "
                      "binary file? Give a UTF-8 text file, one example per line."),
                        path=path, n=n, reason=err.reason, start=err.start
                ) from None
            if "\x00" in line:
                raise AtlasInputError(N_("{path} line {n} holds NUL bytes: the file looks binary."),
                                         path=path, n=n)
            yield line.rstrip("\r\n")


def _check_text_column(path: Path, names: list[str]) -> None:
    if "text" not in names:
        shown = ", ".join(repr(c) for c in names[:12]) or "none"
        raise AtlasInputError(N_("{path} has no 'text' column (its columns: {shown}); name the "
                                "column that holds the examples 'text'."), path=path, shown=shown)


def open_csv(path: Path, hint: str = "", convert_options=None):
    """A streaming pyarrow reader of a .csv / .tsv file (quoted cells may hold newlines); an
    unreadable file is one AtlasInputError line (hint: what the file should look like)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    _sniff_binary(path)
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    try:
        reader = pacsv.open_csv(path, parse_options=pacsv.ParseOptions(
            delimiter=delimiter, newlines_in_values=True),
            read_options=pacsv.ReadOptions(block_size=1 << 20),
            convert_options=convert_options)
        reader.schema.names  # noqa: B018 - the header decoded now: not UTF-8 is this error
        return reader
    except (pa.ArrowInvalid, UnicodeDecodeError) as err:
        raise AtlasInputError(N_("{path} is not a readable CSV file ({err}){hint}"),
                                 path=path, err=err, hint=hint) from None


def csv_batches(path: Path, reader) -> Iterator:
    """The reader's record batches; a malformed row further in is one AtlasInputError line."""
    import pyarrow as pa

    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowInvalid, UnicodeDecodeError) as err:
            raise AtlasInputError(N_("{path}: CSV error ({err})."), path=path, err=err) from None
        yield batch


def _csv_cells(path: Path) -> Iterator[str | None]:
    reader = open_csv(path)
    _check_text_column(path, reader.schema.names)
    for batch in csv_batches(path, reader):
        yield from (None if v is None else str(v) for v in batch.column("text").to_pylist())


def _parquet_cells(path: Path) -> Iterator[str | None]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as err:
        _sniff_binary(path)
        raise AtlasInputError(N_("{path} is not a readable Parquet file: {err}"),
                                 path=path, err=err) from None
    _check_text_column(path, pf.schema_arrow.names)
    for batch in pf.iter_batches(columns=["text"], batch_size=4096):
        yield from (None if v is None else str(v) for v in batch.column(0).to_pylist())


def read_examples(data: str, stats: InputStats, limit: int | None = None) -> Iterator[str]:
    """The examples of a data file as a stream (never all in memory), counted in `stats`."""
    path = Path(data).expanduser()
    if not path.exists():
        raise AtlasInputError(N_("No such data file: {data}"), data=data)
    if path.is_dir():
        raise AtlasInputError(N_("{data} is a folder; give a .txt, .csv or .parquet file."), data=data)
    kind = FORMATS.get(path.suffix.lower(), "text")
    cells = {"text": _text_lines, "csv": _csv_cells, "parquet": _parquet_cells}[kind](path)
    for cell in cells:
        if limit is not None and stats.examples >= limit:
            return
        if cell is None or not cell.strip():
            stats.blank += 1
            continue
        if "\x00" in cell:
            cell = cell.replace("\x00", "")
        if len(cell) > MAX_CHARS:
            stats.chars_cut += 1
            cell = cell[:MAX_CHARS]
        stats.examples += 1
        yield cell
    if stats.examples == 0:
        what = N_("only blank lines") if stats.blank else N_("no examples")
        raise AtlasInputError(N_("{data} has {what}: nothing to analyse."), data=data, what=what)


# ---- built-in probe set: repeated random tokens, for any tokenizer ------------------------
CANDIDATES = (
    list("abcdefghijklmnopqrstuvwxyz0123456789")
    + """the of and to in is was for on that with as by at from it his an are were which be
    this had not or have one but they all their there been has first who its new after more
    time when two also than other into some only over years most may up out can she what them
    would year so about city world three part made then school many state united people war
    day way house man work water small old red black white green blue cat dog car tree book
    door room hand eye head king river road town name home light night sun moon star fish bird
    horse cold hot big long good bad fast slow happy sad open close walk run sit stand sing
    read write play stop go come see look give take make find think know want like love""".split()
)


def _plain_tokens(trace) -> dict[str, list[str]]:
    """Non-special, non-pad tokens of each stack of a trace ("encoder", "decoder")."""
    from .roles import is_special

    seen: dict[str, list[str]] = {}
    for name in trace.blocks:
        stack, _, kind = name.split(".")
        if kind != "self" or stack in seen:
            continue
        b = trace[name]
        pads = b.mask.all(axis=0)
        seen[stack] = [t for t, pad in zip(b.key_tokens, pads) if not pad and not is_special(t)]
    return seen


def probe_vocabulary(model, extra: list[str] = ()) -> tuple[list[str], str]:
    """Words that each become exactly one known token on every stack the probe feeds, and the
    joiner that keeps them apart (" " for word tokenizers, "" for character models)."""
    words = list(dict.fromkeys([*CANDIDATES, *extra]))
    pool: list[str] = []
    forced = model.kind == "encoder-decoder"
    for i in range(0, len(words), 64):
        chunk = words[i:i + 64]
        traces = model.trace_batch(chunk, list(chunk) if forced else None, capture=("pattern",))
        for w, tr in zip(chunk, traces):
            toks = _plain_tokens(tr)
            if toks and all(len(t) == 1 for t in toks.values()):
                pool.append(w)
    if len(pool) < 4:
        raise AtlasInputError(N_("The probe set needs at least 4 words that the model reads as "
                                "one known token on each of its stacks (an encoder-decoder on "
                                "both sides); found {n_pool}: {pool}. Give your own examples "
                                "(--data FILE; on the page, typed lines or a file)."),
                              n_pool=len(pool), pool=", ".join(pool) or "-")
    joiner = "" if all(len(w) == 1 for w in pool) else " "
    if joiner == " ":
        pool = [w for w in pool if len(w) > 1 or w.isalpha()]
    return pool, joiner


def probe_texts(model, n: int, seed: int = 0, extra: list[str] = ()) -> list[str]:
    """n texts [A B C ... A B C ...]: a random run of distinct tokens, then the same run again.
    Each run fills at most half of what the model takes (specials left room)."""
    pool, joiner = probe_vocabulary(model, extra)
    rng = random.Random(seed)
    half = max(2, min(len(pool), (model.max_tokens - 4) // 2, 24))
    texts = []
    for _ in range(n):
        run = rng.sample(pool, k=rng.randint(max(2, half // 2), half))
        texts.append(joiner.join(run + run))
    return texts
