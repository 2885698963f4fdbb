"""Head atlas: what every head does across a dataset (viz_core.atlas), as a layer x head map.

Open a finished atlas directory (or a `--task patching` run: the mean and spread of every
head's patching effect over a dataset of pairs), or run a small atlas here (as a subprocess:
this server never starts Ray itself). URL state: atlas (the directory), akind, alayer, ahead,
arole.
"""

import time
from pathlib import Path

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.charts import chart
from attention_lab.ui.controls import KIND_LABELS
from attention_lab.ui.errors import reported
from attention_lab.ui.page import selection
from attention_lab.ui.sidebar import deployment_policy
from viz_core.atlas import ROLE_LABELS, ROLES, is_atlas, is_patching, load_atlas, load_patching
from viz_core.atlas.figures import (
    LABELS,
    head_distribution,
    heads_distribution,
    patching_map,
    patching_pairs_table,
    patching_ranking,
    role_map,
    score_map,
    top_table,
)
from viz_core.atlas.launch import atlas_home, launch, new_run_dir, recent_runs

MAX_RUN = 5000  # examples a run started from the page may take

sel = selection()
st.title("Head atlas")
st.caption("What each head does across many inputs: every head is scored on every example "
           "for eight roles (definitions in docs/ATLAS.md), and coloured by its dominant one. "
           "A head-patching run (`--task patching`) shows how much each head restores over a "
           "dataset of clean / corrupted pairs.")

home = atlas_home()
runs = [str(p) for p in recent_runs(home)]
state.widget_default("atlas_dir", state.url_text("atlas", runs[0] if runs else ""), typed=True)

with st.expander("Run a small atlas", expanded=not runs and not st.session_state.atlas_dir):
    st.write(f"Model: **{sel.model_name}** (the sidebar's). Results go to `{home}`.")
    source = st.radio("Examples", ["Lines typed here", "A file (.txt, .csv, .parquet)",
                                   "Only the built-in probe set"], key="atlas_source",
                      horizontal=True)
    typed = upload = None
    if source.startswith("Lines"):
        typed = st.text_area("One example per line", "\n".join(sel.model.examples()),
                             key="atlas_lines", height=120)
    elif source.startswith("A file"):
        upload = st.file_uploader("Data file", type=["txt", "csv", "tsv", "parquet"],
                                  key="atlas_upload")
    c1, c2, c3 = st.columns(3)
    limit = c1.number_input(f"At most (1–{MAX_RUN})", 1, MAX_RUN, 500, key="atlas_limit")
    engine = c2.selectbox("Engine", ["auto", "ray", "local"], key="atlas_engine",
                          help="auto: in this process, moving to a local Ray with two model "
                          "workers once the rest would take long enough for Ray to pay off "
                          "(docs/ATLAS.md); ray: always Ray; local: always in one process")
    probe = c3.number_input("Probe examples", 0, 500, 32, key="atlas_probe",
                            help="repeated random tokens, for the induction score")
    # a flag set by the click's callback survives a rerun of the script before it gets here
    st.button("Run the atlas", key="atlas_run", type="primary",
              on_click=lambda: st.session_state.update(_atlas_start=True))
    if st.session_state.pop("_atlas_start", False):
        out = new_run_dir(sel.model_name, home)
        if source.startswith("Lines"):
            data = out / "data.txt"
            data.write_text(typed or "", encoding="utf-8")
        elif source.startswith("A file"):
            if upload is None:
                st.error("Choose a file first.")
                st.stop()
            data = out / f"data{Path(upload.name).suffix.lower()}"
            data.write_bytes(upload.getvalue())
        else:
            data = "probe"
        job = launch(sel.model_name, str(data), out, limit=int(limit), engine=engine,
                     probe=int(probe), device=sel.device)
        bar = st.progress(0.0, text="Starting…")
        while not job.finished():
            p = job.progress()
            total = max(int(p.get("total") or 0), 1)
            bar.progress(min(int(p.get("done") or 0) / total, 1.0),
                         text=f"{p.get('done', 0)}/{p.get('total') or '?'} examples · "
                              f"{p.get('rate', 0.0):.1f} examples/s")
            time.sleep(0.5)
        if job.error():
            st.error(job.error(), icon="⚠️")
        else:
            bar.progress(1.0, text="Done.")
            st.session_state.atlas_dir = str(out)

c1, c2 = st.columns([3, 2])
c1.text_input("Atlas directory", key="atlas_dir",
              help="An output directory of `python -m viz_core.atlas`.")
if runs:
    c2.selectbox("Recent runs", ["—", *runs], key="atlas_recent",
                 on_change=lambda: st.session_state.update(
                     atlas_dir=st.session_state.atlas_recent
                     if st.session_state.atlas_recent != "—" else st.session_state.atlas_dir))
path = st.session_state.atlas_dir.strip()
state.to_url(atlas=path)
if not path:
    st.info("Run an atlas above, or give the directory of a finished one "
            "(`python -m viz_core.atlas --model NAME --data FILE --out DIR`, or `--task "
            "patching --pairs FILE` for head patching over pairs).")
    st.stop()
folder = Path(path).expanduser()
if not deployment_policy().allow_local_paths and home.resolve() not in folder.resolve().parents:
    st.error(f"This deployment opens only atlases under {home}.")
    st.stop()
if not is_atlas(folder):
    st.error(f"{path} is not an atlas directory (no manifest.json).")
    st.stop()


def pick_clicked_head(key: str) -> None:
    """A clicked cell of a map picks the head shown below (before its inputs are drawn)."""
    points = st.session_state[key]["selection"]["points"]
    if points:
        st.session_state.atlas_layer = int(points[0].get("y", 0))
        st.session_state.atlas_head = int(points[0].get("x", 0))


def pick_kind(kinds: list[str]) -> str:
    state.widget_default("atlas_kind", state.url_choice("akind", kinds, kinds[0]))
    if st.session_state.atlas_kind not in kinds:
        st.session_state.atlas_kind = kinds[0]
    return st.selectbox("Block", kinds, key="atlas_kind",
                        format_func=lambda k: KIND_LABELS.get(k, k))


def pick_head(n_layers: int, n_heads: int, c1, c2) -> tuple[int, int]:
    state.widget_default("atlas_layer", state.url_int("alayer", 0, 0, n_layers - 1))
    state.widget_default("atlas_head", state.url_int("ahead", 0, 0, n_heads - 1))
    st.session_state.atlas_layer = max(0, min(int(st.session_state.atlas_layer), n_layers - 1))
    st.session_state.atlas_head = max(0, min(int(st.session_state.atlas_head), n_heads - 1))
    layer = c1.number_input(f"Layer (0–{n_layers - 1})", 0, n_layers - 1, key="atlas_layer")
    head = c2.number_input(f"Head (0–{n_heads - 1})", 0, n_heads - 1, key="atlas_head")
    return int(layer), int(head)


if is_patching(folder):  # `python -m viz_core.atlas --task patching --pairs FILE`
    with reported("reading the patching run"):
        patched = load_patching(folder)
    info = patched.info
    st.write(f"**Head patching** · **{info.get('model')}** on `{info.get('data')}` · "
             f"{info.get('patched', 0):,} of {info.get('examples', 0):,} pairs patched · "
             "effect 0 = the corrupted run's metric, 1 = the clean run's")
    if info.get("failed"):
        first = (info.get("errors") or [{}])[0]
        n_failed = int(info["failed"])
        st.warning(f"{n_failed:,} {'pair' if n_failed == 1 else 'pairs'} could not be patched "
                   f"and {'is' if n_failed == 1 else 'are'} left out; the first (pair "
                   f"{first.get('example')}): {first.get('error')}", icon="⚠️")
    if not info.get("complete"):
        st.warning(f"Partial run: {info.get('shards_done')} of {info.get('shards')} shards "
                   "finished. Continue it with `--resume`.", icon="⏸️")
    if patched.summary.empty:
        st.info("No pair patched yet.")
        st.stop()
    present = set(patched.summary["kind"])
    kind = pick_kind([k for k in KIND_LABELS if k in present] + sorted(present - set(KIND_LABELS)))
    part = patched.summary[patched.summary["kind"] == kind]
    chart(patching_map(patched.summary, kind), key="patch_map", name="atlas-patching",
          on_select=lambda: pick_clicked_head("patch_map"))
    chart(patching_ranking(patched.summary, kind), key="patch_rank",
          name="atlas-patching-ranking")
    st.subheader("One head")
    c1, c2 = st.columns(2)
    layer, head = pick_head(int(part["layer"].max()) + 1, int(part["head"].max()) + 1, c1, c2)
    state.to_url(akind=kind, alayer=layer, ahead=head)
    row = part[(part["layer"] == layer) & (part["head"] == head)]
    if len(row):
        r = row.iloc[0]
        st.write(f"Mean effect **{r['mean']:.3f}** · spread (std) {r['std']:.3f} · standard "
                 f"error {r['sem']:.3f} · from {r['min']:.3f} to {r['max']:.3f} over "
                 f"{int(r['n'])} pairs")
    st.caption("The pairs where patching this head restores the most")
    st.dataframe(patching_pairs_table(patched, kind, layer, head), key="patch_top",
                 hide_index=True, width="stretch")
    st.stop()
with reported("reading the atlas"):
    atlas = load_atlas(folder)

info = atlas.info
cut = info.get("input", {}).get("chars_cut", 0)
st.write(f"**{info.get('model')}** on `{info.get('data')}` · {info.get('examples', 0):,} "
         f"examples + {info.get('probe_examples', 0):,} probe · "
         f"{info.get('token_cut', 0):,} cut to the model's length, {cut:,} over the character "
         f"limit, {info.get('failed', 0):,} failed")
if not info.get("complete"):
    st.warning(f"Partial atlas: {info.get('shards_done')} of {info.get('shards')} shards "
               "finished. Continue it with `--resume`.", icon="⏸️")
if atlas.summary.empty:
    st.info("No finished shard yet.")
    st.stop()

present = set(atlas.summary["kind"])
kind = pick_kind([k for k in KIND_LABELS if k in present] + sorted(present - set(KIND_LABELS)))
part = atlas.summary[atlas.summary["kind"] == kind]
n_layers, n_heads = int(part["layer"].max()) + 1, int(part["head"].max()) + 1


tabs = st.tabs(["Dominant role", *(ROLE_LABELS[r] for r in ROLES)])
with tabs[0]:
    chart(role_map(atlas.summary, kind), key="atlas_map", name="atlas-roles",
          on_select=lambda: pick_clicked_head("atlas_map"))
for tab, role in zip(tabs[1:], ROLES):
    with tab:
        chart(score_map(atlas.summary, kind, role), key=f"atlas_map_{role}",
              name=f"atlas-{role}", on_select=lambda k=f"atlas_map_{role}": pick_clicked_head(k))
        chart(heads_distribution(atlas.summary, kind, role), key=f"atlas_dist_{role}",
              name=f"atlas-{role}-heads")

st.subheader("One head")
c1, c2, c3 = st.columns([1, 1, 2])
layer, head = pick_head(n_layers, n_heads, c1, c2)
row = part[(part["layer"] == layer) & (part["head"] == head)]
dominant = row["dominant"].iloc[0] if len(row) else "mixed"
state.widget_default("atlas_role", state.url_choice(
    "arole", list(ROLES), dominant if dominant in ROLES else "previous"))
role = c3.selectbox("Role", list(ROLES), key="atlas_role", format_func=LABELS.get)
state.to_url(akind=kind, alayer=int(layer), ahead=int(head), arole=role)
st.write(f"Dominant role: **{LABELS[dominant]}**")
chart(head_distribution(atlas.hist, kind, int(layer), int(head)), key="atlas_head_dist",
      name=f"atlas-{kind}-{layer}-{head}")
st.caption(f"Top examples for {LABELS[role]} · peak: the query position (and token) where "
           "the head scores highest · open: this example and head on the Attention page")
st.dataframe(top_table(atlas, kind, int(layer), int(head), role), key="atlas_top",
             hide_index=True, width="stretch",
             column_config={"open": st.column_config.LinkColumn("open", display_text="open ↗")})
