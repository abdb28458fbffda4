"""Evaluation protocols: one module per protocol, results as JSON-ready dicts."""
