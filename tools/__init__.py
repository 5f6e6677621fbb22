"""Developer tooling that is not the library: the kernels' ahead-of-time report and benches.

Run from the repository root, e.g. `python -m tools.kernels_aot`.
"""
