"""Benchmarks for kts (run as modules, e.g. ``python -m bench.bench_stats``)."""
