"""Validation of the performance model against public measurements (``omniplane perf validate``)
and the fit of its efficiency factors (``omniplane perf fit``). See docs/reference/perf.md."""
