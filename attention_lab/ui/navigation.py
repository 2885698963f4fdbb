"""The app's pages in one list: app.py builds st.navigation from it (hidden) and draws the
sidebar's page links from it (page_links, in the reader's language), and the Home page's tour
is written from it, so a page added here appears in all three by construction.

Adding a page is one line in PAGES: its script, title, icon, URL path and a one-line
description for the tour (Markdown; keep it to one sentence).
"""

from __future__ import annotations

from dataclasses import dataclass

from viz_core.i18n import N_, _


@dataclass(frozen=True)
class PageSpec:
    path: str  # the page script, relative to app.py
    title: str  # shown in the navigation and the tour
    icon: str  # a Material icon (":material/name:")
    url_path: str  # the page's address ("" for the default page)
    blurb: str  # one line for the Home page's tour

    def page(self):
        """The st.Page of this spec (the first page in PAGES is the default one)."""
        import streamlit as st

        if not self.url_path:
            return st.Page(self.path, title=_(self.title), icon=self.icon, default=True)
        return st.Page(self.path, title=_(self.title), icon=self.icon,
                       url_path=self.url_path)


PAGES: list[PageSpec] = [
    PageSpec("pages/home.py", N_("Home"), ":material/home:", "",
             N_("This page: a tour and the model's card.")),
    PageSpec("pages/attention.py", N_("Attention"), ":material/grid_on:", "attention",
             N_("Pick a block (encoder self, decoder self, cross), a layer and a head: rows are queries "
             "(top to bottom), columns are keys. Click a cell of the layer × head grid to open that "
             "head; compare heads in the head view; see mean/max over heads and the rollout.")),
    PageSpec("pages/inside.py", N_("Inside a head"), ":material/calculate:", "inside",
             N_("Follow one query token from q and k through QKᵀ/√d_k, the mask and the softmax to the "
             "weighted sum of values.")),
    PageSpec("pages/block.py", N_("The whole block"), ":material/stacks:", "block",
             N_("Heads split, concatenated and mixed by W_O, then residual + norm and the feed-forward; how"
             " large the residual stream is per layer and what each sublayer adds.")),
    PageSpec("pages/positional.py", N_("Positional encoding"), ":material/waves:", "positional",
             N_("The model's own encoding (a table, or rotary), the sinusoids for any size, and sinusoidal "
             "vs rotary side by side.")),
    PageSpec("pages/masks.py", N_("Masks"), ":material/visibility_off:", "masks",
             N_("Padding and causal masks on a batch of your sentences, and what they do to the scores.")),
    PageSpec("pages/pretraining.py", N_("Pretraining objectives"), ":material/school:", "pretraining",
             N_("GPT, BERT, RoBERTa, span masking, UniLM, XLNet and more, each as its attention masks and "
             "its inputs and targets.")),
    PageSpec("pages/pairs.py", N_("Sentence pairs"), ":material/join:", "pairs",
             N_("BERT's input for two sentences: [CLS]/[SEP], the segments, and the three embeddings that "
             "are added up.")),
    PageSpec("pages/relative.py", N_("Relative positions"), ":material/straighten:", "relative",
             N_("T5's learned relative bias from the model's weights, and a Transformer-XL score split into"
             " its four terms.")),
    PageSpec("pages/beam.py", N_("Beam search"), ":material/account_tree:", "beam",
             N_("The whole search tree; click a node to see what the model looked at when it chose that "
             "token.")),
    PageSpec("pages/heads.py", N_("Head analysis"), ":material/analytics:", "heads",
             N_("Statistics per head, head similarity, and switching heads off.")),
    PageSpec("pages/heads_matter.py", N_("Which heads matter"), ":material/troubleshoot:", "heads_matter",
             N_("Whether a head matters for the output and why it attends where it does: logit attribution,"
             " the logit lens, patching a clean run into a corrupted one, head composition, and a search"
             " for the heads that link two tokens.")),
    PageSpec("pages/flow.py", N_("Information flow"), ":material/route:", "flow",
             N_("How the prediction got there: the routes through positions, heads and MLPs, layer by"
             " layer, with raw attention, rollout and attention flow side by side.")),
    PageSpec("pages/circuits.py", N_("Circuits"), ":material/hub:", "circuits",
             N_("Which connections between heads and MLPs carry the answer on a clean / corrupted"
             " pair (EAP, EAP-IG, exact edge patching), with the faithfulness of the top edges.")),
    PageSpec("pages/compare.py", N_("Compare"), ":material/compare:", "compare",
             N_("Two inputs or two models side by side, with their difference; or a teacher and"
             " its distilled student, layer by layer.")),
    PageSpec("pages/atlas.py", N_("Head atlas"), ":material/map:", "atlas",
             N_("What every head does across a whole dataset, as a layer × head map.")),
]


def st_pages() -> list:
    """The st.Page objects for st.navigation, in PAGES order."""
    return [spec.page() for spec in PAGES]


def tour_markdown(pages: list[PageSpec] | None = None) -> str:
    """The Home page's tour: picking a model, then one numbered line per page but Home."""
    pages = PAGES if pages is None else pages
    lines = [_("**30-second tour**"),
             "1. " + _("Pick a model in the sidebar (the default translates English to French) "
                       "and type a sentence.")]
    for i, spec in enumerate((p for p in pages if p.url_path), start=2):
        lines.append(f"{i}. **{_(spec.title)}** — {_(spec.blurb)}")
    lines.append("")
    lines.append(_("Every setting lives in the address bar: copy it to share exactly what you see."))
    return "\n".join(lines)


SHOWN_PAGES = 10  # page links above the fold; the rest in an expander (as Streamlit's own)


def page_links(pages: list, current, queries: dict[str, dict[str, str]] | None = None,
               container=None) -> None:
    """The page list in the sidebar, in the reader's language: the first SHOWN_PAGES pages,
    then the others in an expander that is open when one of them is the current page
    (Streamlit's own list folds them under an English "View N more"). Each link carries its
    query from ``queries`` (url_path -> the sidebar's settings and the page's own:
    ui/sidebar.link_queries), so the page it opens has its address at once (and a link
    opened in a new tab shows the same model and text). ``container``: where to draw them
    (the sidebar when None)."""
    import streamlit as st

    queries = queries or {}
    with container or st.sidebar:
        for page in pages[:SHOWN_PAGES]:
            st.page_link(page, query_params=queries.get(page.url_path))
        rest = pages[SHOWN_PAGES:]
        if rest:
            here = any(p.url_path == current.url_path for p in rest)
            with st.expander(_("{n} more pages").format(n=len(rest)), expanded=here):
                for page in rest:
                    st.page_link(page, query_params=queries.get(page.url_path))
