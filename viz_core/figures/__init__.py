"""Figure builders: numpy arrays + token lists in, plotly figures out. Never imports streamlit.

Click handling for pages (st.plotly_chart(fig, on_select="rerun", selection_mode="points")):
- layer_head_grid / trace_grid: ``selected_cell(event.selection) -> (layer, head) | None``
- beam_tree_figure: ``selected_node(event.selection) -> node id | None``
- matrix_heatmap and its windows: ``cells.clickable_cells(fig)`` adds a click target per cell
  (customdata [query, key]); attention_lab.ui.cells.clicked_cell reads the selection;
  ``cells.outline_cell(fig, query, key)`` frames the explained cell in a copy of the figure
"""

from .aggregates import (
    aggregate_heatmap,
    alignment_figure,
    head_similarity_figure,
    head_stat_figure,
    rollout_figure,
    trace_rollout_figure,
)
from .beam import beam_tree_figure, selected_node, tree_layout
from .common import pool2d, unique_labels
from .grid import layer_head_grid, selected_cell, trace_grid
from .headview import block_head_view, head_view
from .heatmap import attention_heatmap, block_heatmap, matrix_heatmap
from .inside import block_inside_head, head_internals, inside_head_figures
from .masks import (
    causal_mask,
    mask_panels,
    mask_union_figure,
    masking_steps_figure,
    padding_batch_figure,
    padding_mask,
)
from .positional import (
    dominant_wavelengths,
    pe_similarity,
    positional_curves,
    positional_heatmap,
    similarity_figure,
    sinusoidal_table,
    sinusoidal_wavelengths,
    wavelength_figure,
)

__all__ = [
    "aggregate_heatmap", "alignment_figure", "attention_heatmap", "beam_tree_figure",
    "block_head_view", "block_heatmap", "block_inside_head", "causal_mask",
    "dominant_wavelengths", "head_internals", "head_similarity_figure", "head_stat_figure",
    "head_view", "inside_head_figures", "layer_head_grid", "mask_panels", "mask_union_figure",
    "masking_steps_figure", "matrix_heatmap", "padding_batch_figure", "padding_mask",
    "pe_similarity", "pool2d", "positional_curves", "positional_heatmap", "rollout_figure",
    "selected_cell", "selected_node", "similarity_figure", "sinusoidal_table",
    "sinusoidal_wavelengths", "trace_grid", "trace_rollout_figure", "tree_layout",
    "unique_labels", "wavelength_figure",
]
