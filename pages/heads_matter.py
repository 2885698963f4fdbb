"""Which heads matter, and why: logit attribution, the logit lens, activation and attribution
patching, head composition, head search and QK attribution, for the sidebar's model and text.

Each tab is a module of attention_lab/ui/tabs/ and an st.fragment: only the open tab runs
(lazy tabs), and a change inside it reruns that tab alone. Every setting is in the address
(tab, pos, tok, against, and each tab's own).
"""

from functools import partial

import streamlit as st

from attention_lab.ui.controls import lazy_tabs
from attention_lab.ui.page import selection
from attention_lab.ui.tabs.attribution import attribution_tab
from attention_lab.ui.tabs.composition import composition_tab
from attention_lab.ui.tabs.entropy import entropy_tab
from attention_lab.ui.tabs.explain import what_to_explain
from attention_lab.ui.tabs.lens import lens_tab
from attention_lab.ui.tabs.patching import patching_tab
from attention_lab.ui.tabs.qk import qk_tab
from attention_lab.ui.tabs.search import search_tab
from viz_core.i18n import _

sel = selection()
st.title(_("Which heads matter"))
st.caption(_("Attention weights say where a head looks, not whether it matters. Here: how much "
           "each head adds to the output (logit attribution), what every layer would predict "
           "(logit lens), what restores the output when copied from a clean run into a "
           "corrupted one (patching), how heads feed each other (composition), which heads "
           "link two tokens (head search), why a head attends where it does (QK "
           "attribution) and how spread out each head's attention is (head entropy)."))
explained = what_to_explain(sel)  # the position, token and contrast token

lazy_tabs({  # URL value: (label, the tab); a new tab is its module and one line here
    "attribution": (_("Logit attribution"), partial(attribution_tab, sel, explained)),
    "lens": (_("Logit lens"), partial(lens_tab, sel)),
    "patching": (_("Patching"), partial(patching_tab, sel, explained)),
    "composition": (_("Composition"), partial(composition_tab, sel)),
    "search": (_("Head search"), partial(search_tab, sel)),
    "qk": (_("Why this score?"), partial(qk_tab, sel)),
    "entropy": (_("Head entropy"), partial(entropy_tab, sel)),
})
