"""Benchmarks: each module has run(quick: bool) -> list[dict] rows; `python -m bench` prints."""
