"""Capture: one run, recorded. Every attention call of every model goes through
``recorder.attend`` (q, k, v, the real mask, SDPA for the output); a per-call ``Recorder`` in a
ContextVar keeps what the call asks for, and ``trace`` turns it into lazy ``AttentionTrace`` /
``BlockTrace`` views on the model's device (``residency`` bounds what they hold there;
``device`` picks the device and precision; ``memory`` the CPU allocator; ``export`` writes
traces as NPZ / JSON). Nothing here knows a model family, and nothing is kept on a module."""
