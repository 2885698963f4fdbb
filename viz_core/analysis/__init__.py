"""Analysis: what a trace says about the heads, computed from traces (numpy / torch in, tables
and arrays out): head statistics, aggregates, rollout and similarity (``heads``), the whole
block and the residual stream (``block``), cross-attention alignment (``alignment``). It never
loads a model (no backends, no loading) and never plots."""
