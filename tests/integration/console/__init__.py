"""Integration tests of the console context."""
