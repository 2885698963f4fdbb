"""Training: ``python -m viz_core.training.train`` makes the shipped checkpoints from the task
generators in ``viz_core.tasks``; ``toy`` builds tiny random-weight native models for tests and
benchmarks."""
