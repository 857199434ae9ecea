"""Peer memory systems measured beside P-Mem on the same machine (benchmarks/peers/README.md)."""
