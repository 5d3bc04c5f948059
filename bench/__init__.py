"""twinhub benchmarks, run as ``python -m bench <name>`` (``./dev bench <name>``).

They live outside ``src/`` because they drive a running server from the outside, the way
load arrives in production, and need tools (wrk) that the package itself does not.
"""
