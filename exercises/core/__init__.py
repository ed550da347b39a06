"""The engine: the exercise model, numbers, the step registry and pipeline, parsing and
grading, the kind contract and discovery, the time budgets."""
