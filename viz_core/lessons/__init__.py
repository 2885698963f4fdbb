"""Lessons: the textbook pages' computations, one topic a module: pretraining objectives and
their masks, sinusoidal and learned position tables, rotary and relative positions, scoring
functions, order blindness, BERT's input embeddings, BLEU. Each is small, pure and cited; none
loads a model (no backends, no loading) or plots."""
