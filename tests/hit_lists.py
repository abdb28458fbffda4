"""Compare the hits of two indexes that should rank alike: ids, order and evidence exactly, scores within a
tolerance. Rounding both to N places is not a comparison: two scores 1e-7 apart round apart whenever they
straddle a rounding boundary (a build and a series of writes add float32 rows in another order)."""

from __future__ import annotations


def assert_same_hits(*runs, tol: float = 1e-5) -> None:
    """Each run is a list (one per query) of hit tuples whose element 1 is the score; every other element
    must match exactly."""
    first = runs[0]
    for other in runs[1:]:
        assert len(other) == len(first)
        for q, (a, b) in enumerate(zip(first, other)):
            assert [x[:1] + x[2:] for x in a] == [y[:1] + y[2:] for y in b], f"query {q}: {a} != {b}"
            far = [(x, y) for x, y in zip(a, b) if abs(x[1] - y[1]) > tol]
            assert not far, f"query {q}: scores differ by more than {tol}: {far}"
