"""The Head atlas page (AppTest): opens a finished atlas; its links carry the Attention
page's URL state; bad directories give a message, not a traceback."""

from __future__ import annotations


def test_every_map_cell_can_be_clicked(atlas_dir):
    """Streamlit reports clicks on scatter points only: each cell carries an invisible one."""
    from viz_core.atlas import load_atlas
    from viz_core.atlas.figures import role_map, score_map

    atlas = load_atlas(atlas_dir)
    for fig in (role_map(atlas.summary, "decoder.self"),
                score_map(atlas.summary, "decoder.self", "previous")):
        cells = fig.data[1]
        assert cells.type == "scatter" and fig.layout.clickmode == "event+select"
        assert sorted(zip(cells.y, cells.x)) == [(layer, head) for layer in range(2)
                                                 for head in range(4)]
        assert all("layer" in t for t in cells.text)
