"""P-Mem's benchmarks: each ``python -m benchmarks.NAME`` from the repository root (benchmarks/README.md)."""
