"""End to end: real processes, real ports, a real browser."""
