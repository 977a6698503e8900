"""asv benchmarks for ctok (see docs/benchmarks.md). Helpers are in common.py."""
