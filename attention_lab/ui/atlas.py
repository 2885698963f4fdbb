"""The Head atlas page's parts (pages/atlas.py): the form that runs a small atlas as a
subprocess, the head pickers (URL: akind, alayer, ahead), and the views of a head-patching run
and of a circuit run (edge attribution over pairs)."""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from viz_core.atlas import load_patching
from viz_core.atlas.circuit import EDGE, load_circuit, mean_edges
from viz_core.atlas.figures import patching_map, patching_pairs_table, patching_ranking
from viz_core.atlas.launch import launch, new_run_dir
from viz_core.atlas.layout import error_of
from viz_core.errors import VizError
from viz_core.figures.circuit import circuit_figure
from viz_core.i18n import N_, _, bound, ngettext

from . import state
from .cells import points_of, position
from .charts import chart, table
from .circuits import edge_rows, kept_slider, table_height
from .controls import BLOCK_KIND_LABELS, block_kind_label, file_box, url_number, url_select
from .errors import reported, translated

MAX_RUN = 5000  # examples a run started from the page may take


def run_small_atlas(sel, home: Path, runs: list[str]) -> None:
    """The "Run a small atlas" expander: examples typed, uploaded or the probe set; the run
    goes to a new folder under `home`, which the directory box then opens."""
    N_("Lines typed here"), N_("A file (.txt, .csv, .parquet)"), N_("Only the built-in probe set")
    with st.expander(_("Run a small atlas"), expanded=not runs and not st.session_state.atlas_dir):
        st.write(_("Model: **{model_name}** (the sidebar's). Results go to `{home}`.").format(
                     model_name=sel.model_name, home=home))
        source = st.radio(_("Examples"), ["Lines typed here", "A file (.txt, .csv, .parquet)",
                                       "Only the built-in probe set"], key="atlas_source",
                          horizontal=True, format_func=bound(_))
        typed = upload = None
        if source.startswith("Lines"):
            typed = st.text_area(_("One example per line"), "\n".join(sel.model.examples()),
                                 key="atlas_lines", height=120)
        elif source.startswith("A file"):
            upload = file_box(_("Data file"), ["txt", "csv", "tsv", "parquet"], "atlas_upload")
        c1, c2, c3 = st.columns(3)
        limit = c1.number_input(_("At most (1–{MAX_RUN})").format(MAX_RUN=MAX_RUN), 1, MAX_RUN, 500,
                                key="atlas_limit")
        engine = c2.selectbox(_("Engine"), ["auto", "ray", "local"], key="atlas_engine",
                              help=_("auto: in this process, moving to a local Ray with two "
                              "model workers once the rest would take long enough for Ray to "
                              "pay off (docs/ATLAS.md); ray: always Ray; local: always in one "
                              "process"))
        probe = c3.number_input(_("Probe examples"), 0, 500, 32, key="atlas_probe",
                                help=_("repeated random tokens, for the induction score"))
        # a flag set by the click's callback survives a rerun of the script before it gets here
        st.button(_("Run the atlas"), key="atlas_run", type="primary",
                  on_click=lambda: st.session_state.update(_atlas_start=True))
        if not st.session_state.pop("_atlas_start", False):
            return
        if source.startswith("A file") and upload is None:
            st.error(_("Choose a file first."))
            state.stop()
        out = new_run_dir(sel.model_name, home)
        names = {}  # the saved copy's path -> the name the user knows it by
        if source.startswith("Lines"):
            data = out / "data.txt"
            data.write_text(typed or "", encoding="utf-8")
        elif source.startswith("A file"):
            data = out / f"data{Path(upload.name).suffix.lower()}"
            data.write_bytes(upload.getvalue())
            names[str(data)] = upload.name
        else:
            data = "probe"
        _follow(launch(sel.model_name, str(data), out, limit=int(limit), engine=engine,
                       probe=int(probe), device=sel.device), out, names)


def _named(err, names: dict[str, str]):
    """A run's error with each saved copy's path shown as the file's own name."""
    if isinstance(err, VizError) and err.values:
        return VizError(err.msgid, **{k: names.get(str(v), v) for k, v in err.values.items()})
    text = str(err)
    for path, name in names.items():
        text = text.replace(path, name)
    return err if text == str(err) else text


def _follow(job, out: Path, names: dict[str, str]) -> None:
    """A progress bar until the run ends; then the directory box opens its folder, or the
    bar gives way to the run's message."""
    bar = st.progress(0.0, text=_("Starting…"))
    while not job.finished():
        p = job.progress()
        total = max(int(p.get("total") or 0), 1)
        bar.progress(min(int(p.get("done") or 0) / total, 1.0),
                     text=_("{done}/{total} examples · {rate:.1f} examples/s").format(
                         done=p.get("done", 0), total=p.get("total") or "?",
                         rate=p.get("rate", 0.0)))
        time.sleep(0.5)
    failed = job.error()
    if failed:
        bar.empty()
        st.error(translated(_named(failed, names)), icon="⚠️")
    else:
        bar.progress(1.0, text=_("Done."))
        st.session_state.atlas_dir = str(out)


def pick_clicked_head(key: str) -> None:
    """A clicked cell of a map picks the head shown below (before its inputs are drawn)."""
    for point in points_of(st.session_state.get(key)):
        layer, head = position(point.get("y"), None), position(point.get("x"), None)
        if layer is not None and head is not None:  # clamped to the run's heads when drawn
            st.session_state.atlas_layer, st.session_state.atlas_head = layer, head
            return


def pick_kind(present: set[str]) -> str:
    """The block kind (URL: akind) among those the run holds, the usual ones first."""
    kinds = [k for k in BLOCK_KIND_LABELS if k in present] + sorted(present - set(BLOCK_KIND_LABELS))
    return url_select(_("Block"), "atlas_kind", kinds, url_key="akind", format_func=block_kind_label)


def pick_head(n_layers: int, n_heads: int, c1, c2) -> tuple[int, int]:
    """Layer and head (URL: alayer, ahead); a click on a map sets them (pick_clicked_head)."""
    layer = url_number(_("Layer"), "atlas_layer", 0, 0, n_layers - 1, url_key="alayer",
                       container=c1)
    head = url_number(_("Head"), "atlas_head", 0, 0, n_heads - 1, url_key="ahead", container=c2)
    return layer, head


def run_notices(info: dict) -> None:
    """The pairs a run could not use (the first one's message), and whether it is partial."""
    if info.get("failed"):
        first = (info.get("errors") or [{}])[0]
        n = int(info["failed"])
        if info.get("task") == "circuit":
            said = ngettext("{n:,} pair could not be scored and is left out; the first (pair "
                            "{example}): {error}", "{n:,} pairs could not be scored and are "
                            "left out; the first (pair {example}): {error}", n)
        else:
            said = ngettext("{n:,} pair could not be patched and is left out; the first (pair "
                            "{example}): {error}", "{n:,} pairs could not be patched and are "
                            "left out; the first (pair {example}): {error}", n)
        kept = error_of(first.get("data"))  # its template and values: in the reader's language
        st.warning(said.format(n=n, example=first.get("example"),
                               error=translated(kept) if kept else first.get("error")),
                   icon="⚠️")
    if info.get("small_gap"):
        n = int(info["small_gap"])
        st.warning(ngettext(
            "In {n:,} of {total:,} pairs the corruption barely moves the metric (under 1% of "
            "its size): that pair's shares are mostly noise and can swing the mean. Their "
            "clean and corrupted metrics are in the pairs' files (examples-*.parquet).",
            "In {n:,} of {total:,} pairs the corruption barely moves the metric (under 1% of "
            "its size): those pairs' shares are mostly noise and can swing the mean. Their "
            "clean and corrupted metrics are in the pairs' files (examples-*.parquet).", n
        ).format(n=n, total=int(info.get("patched") or 0)), icon="⚠️")
    if not info.get("complete"):
        st.warning(_("Partial run: {done} of {shards} shards finished. Continue it with "
                     "`--resume`.").format(done=info.get("shards_done"),
                                           shards=info.get("shards")), icon="⏸️")


def show_patching_run(folder: Path) -> None:
    """A `python -m viz_core.atlas --task patching --pairs FILE` run: every head's mean
    patching effect over the pairs, a ranking, and one head's best pairs."""
    with reported(_("reading the patching run")):
        patched = load_patching(folder)
    info = patched.info
    st.write(_("**Head patching** · **{get}** on `{get2}` · {get3:,} of {get4:,} pairs patched · "
               "effect 0 = the corrupted run's metric, 1 = the clean run's").format(
                 get=info.get('model'), get2=info.get('data'), get3=info.get('patched', 0),
                 get4=info.get('examples', 0)))
    run_notices(info)
    if patched.summary.empty:
        st.info(_("No pair patched yet."))
        return
    kind = pick_kind(set(patched.summary["kind"]))
    part = patched.summary[patched.summary["kind"] == kind]
    chart(patching_map(patched.summary, kind), key="patch_map", name="atlas-patching",
          on_select=lambda: pick_clicked_head("patch_map"))
    chart(patching_ranking(patched.summary, kind), key="patch_rank",
          name="atlas-patching-ranking")
    st.subheader(_("One head"))
    c1, c2 = st.columns(2)
    layer, head = pick_head(int(part["layer"].max()) + 1, int(part["head"].max()) + 1, c1, c2)
    row = part[(part["layer"] == layer) & (part["head"] == head)]
    if len(row):
        r = row.iloc[0]
        st.write(_("Mean effect **{value:.3f}** · spread (std) {value2:.3f} · standard error "
                   "{value3:.3f} · from {value4:.3f} to {value5:.3f} over {int} pairs").format(
                     value=r['mean'], value2=r['std'], value3=r['sem'], value4=r['min'],
                     value5=r['max'], int=int(r['n'])))
    st.caption(_("The pairs where patching this head restores the most"))
    with reported(_("reading the run's pairs")):
        table(patching_pairs_table(patched, kind, layer, head), key="patch_top",
              hide_index=True, width="stretch")


EDGE_COLUMNS = {"sender": N_("sender"), "receiver": N_("receiver"), "input": N_("input"),
                "mean": N_("mean score"), "std": N_("std"), "sem": N_("standard error"),
                "min": N_("min"), "max": N_("max"), "n": N_("pairs")}


def show_circuit_run(folder: Path) -> None:
    """A `python -m viz_core.atlas --task circuit --pairs FILE` run: the circuit of the edges
    with the largest mean score over the pairs, and the table of those edges."""
    with reported(_("reading the circuit run")):
        run = load_circuit(folder)
    info = run.info
    st.write(_("**Circuit** · **{model}** on `{data}` · {method} · {scored:,} of {pairs:,} pairs "
               "scored · an edge's score is its share of the clean − corrupted metric, averaged "
               "over the pairs").format(model=info.get("model"), data=info.get("data"),
                                        method=info.get("method"), scored=info.get("patched", 0),
                                        pairs=info.get("examples", 0)))
    run_notices(info)
    if run.summary.empty:
        st.info(_("No pair scored yet."))
        return
    edges = mean_edges(run.summary)
    kept_n = kept_slider(len(edges))
    order = edges["score"].abs().sort_values(ascending=False, kind="stable").index
    kept = edges.loc[order[:kept_n]]
    chart(circuit_figure(edges, kept, title=_("Mean circuit over {n:,} pairs: {k} edges").format(
        n=int(info.get("patched", 0)), k=len(kept))), key="atlas_circuit", name="atlas-circuit")
    rows = run.summary.loc[order[:kept_n], [*EDGE, "mean", "std", "sem", "min", "max", "n"]]
    table(edge_rows(rows), key="atlas_circuit_edges", hide_index=True, width="stretch",
          height=table_height(len(rows)),
          column_config={c: _(EDGE_COLUMNS[c]) for c in ("mean", "sem", "n")})
