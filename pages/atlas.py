"""Head atlas: what every head does across a dataset (viz_core.atlas), as a layer x head map.

Open a finished atlas directory (or a `--task patching` run: the mean and spread of every
head's patching effect over a dataset of pairs; or a `--task circuit` run: the mean circuit),
or run a small atlas here (as a subprocess: this server never starts Ray itself). URL state:
atlas (the directory), akind, alayer, ahead, arole (a circuit run: circ_top).
"""

from pathlib import Path

import streamlit as st

from attention_lab.ui import state
from attention_lab.ui.atlas import (
    pick_clicked_head,
    pick_head,
    pick_kind,
    run_small_atlas,
    show_circuit_run,
    show_patching_run,
)
from attention_lab.ui.charts import chart, table
from attention_lab.ui.controls import url_select
from attention_lab.ui.errors import reported
from attention_lab.ui.page import selection
from attention_lab.ui.sidebar import deployment_policy
from viz_core.atlas import ROLE_LABELS, ROLES, is_atlas, is_patching, load_atlas
from viz_core.atlas.circuit import is_circuit
from viz_core.atlas.figures import (
    LABELS,
    head_distribution,
    heads_distribution,
    role_map,
    score_map,
    top_table,
)
from viz_core.atlas.launch import atlas_home, recent_runs
from viz_core.i18n import _, bound

sel = selection()
st.title(_("Head atlas"))
st.caption(_("What each head does across many inputs: every head is scored on every example "
           "for eight roles (definitions in docs/ATLAS.md), and coloured by its dominant one. "
           "A head-patching run (`--task patching`) shows how much each head restores over a "
           "dataset of clean / corrupted pairs, and a circuit run (`--task circuit`) which "
           "edges between heads carry the answer over such pairs."))

home = atlas_home()
runs = [str(p) for p in recent_runs(home)]
state.widget_default("atlas_dir", state.url_text("atlas", runs[0] if runs else ""), typed=True)

run_small_atlas(sel, home, runs)

c1, c2 = st.columns([3, 2])
c1.text_input(_("Atlas directory"), key="atlas_dir",
              help=_("An output directory of `python -m viz_core.atlas`."))
if runs:
    c2.selectbox(_("Recent runs"), ["—", *runs], key="atlas_recent",
                 on_change=lambda: st.session_state.update(
                     atlas_dir=st.session_state.atlas_recent
                     if st.session_state.atlas_recent != "—" else st.session_state.atlas_dir))
path = st.session_state.atlas_dir.strip()
state.to_url(atlas=path)
if not path:
    st.info(_("Run an atlas above, or give the directory of a finished one "
            "(`python -m viz_core.atlas --model NAME --data FILE --out DIR`, or `--task "
            "patching --pairs FILE` for head patching over pairs, `--task circuit --pairs FILE` "
            "for their circuit)."))
    state.stop()
folder = Path(path).expanduser()
if not deployment_policy().allow_local_paths and home.resolve() not in folder.resolve().parents:
    st.error(_("This deployment opens only atlases under {home}.").format(home=home))
    state.stop()
if not is_atlas(folder):
    st.error(_("{path} is not an atlas directory (no manifest.json).").format(path=path))
    state.stop()


if is_patching(folder):  # `python -m viz_core.atlas --task patching --pairs FILE`
    show_patching_run(folder)
    state.stop()
if is_circuit(folder):  # `--task circuit --pairs FILE`: edge attribution over the pairs
    show_circuit_run(folder)
    state.stop()
with reported(_("reading the atlas")):
    atlas = load_atlas(folder)

info = atlas.info
cut = info.get("input", {}).get("chars_cut", 0)
st.write(_("**{get}** on `{get2}` · {get3:,} examples + {get4:,} probe · {get5:,} cut to the "
           "model's length, {cut:,} over the character limit, {get6:,} failed").format(
             get=info.get('model'), get2=info.get('data'), get3=info.get('examples', 0),
             get4=info.get('probe_examples', 0), get5=info.get('token_cut', 0), cut=cut,
             get6=info.get('failed', 0)))
if info.get("input", {}).get("probes_left_out"):
    st.info(_("The probe set was left out: too few words are one token on each of this model's "
              "stacks (a translator reads the probe on both sides, in two vocabularies), so "
              "its induction roles come from your examples."))
if not info.get("complete"):
    st.warning(_("Partial atlas: {get} of {get2} shards finished. Continue it with `--resume`.").format(
                   get=info.get('shards_done'), get2=info.get('shards')), icon="⏸️")
if atlas.summary.empty:
    st.info(_("No finished shard yet."))
    state.stop()

kind = pick_kind(set(atlas.summary["kind"]))
part = atlas.summary[atlas.summary["kind"] == kind]
n_layers, n_heads = int(part["layer"].max()) + 1, int(part["head"].max()) + 1


tabs = st.tabs([_("Dominant role"), *(_(ROLE_LABELS[r]) for r in ROLES)])
with tabs[0]:
    chart(role_map(atlas.summary, kind), key="atlas_map", name="atlas-roles",
          on_select=lambda: pick_clicked_head("atlas_map"))
for tab, role in zip(tabs[1:], ROLES):
    with tab:
        chart(score_map(atlas.summary, kind, role), key=f"atlas_map_{role}",
              name=f"atlas-{role}", on_select=lambda k=f"atlas_map_{role}": pick_clicked_head(k))
        chart(heads_distribution(atlas.summary, kind, role), key=f"atlas_dist_{role}",
              name=f"atlas-{role}-heads")

st.subheader(_("One head"))
c1, c2, c3 = st.columns([1, 1, 2])
layer, head = pick_head(n_layers, n_heads, c1, c2)
row = part[(part["layer"] == layer) & (part["head"] == head)]
dominant = row["dominant"].iloc[0] if len(row) else "mixed"
role = url_select(_("Role"), "atlas_role", list(ROLES), dominant if dominant in ROLES else "previous",
                  url_key="arole", container=c3, format_func=bound(lambda r: _(LABELS[r])))
st.write(_("Dominant role: **{value}**").format(value=_(LABELS[dominant])))
chart(head_distribution(atlas.hist, kind, int(layer), int(head)), key="atlas_head_dist",
      name=f"atlas-{kind}-{layer}-{head}")
st.caption(_("Top examples for {value} · peak: the query position (and token) where the head "
             "scores highest · open: this example and head on the Attention page").format(
               value=_(LABELS[role])))
with reported(_("reading the atlas's examples")):
    table(top_table(atlas, kind, int(layer), int(head), role), key="atlas_top",
          hide_index=True, width="stretch",
          column_config={"open": st.column_config.LinkColumn(_("open"),
                                                             display_text=_("open ↗"))})
