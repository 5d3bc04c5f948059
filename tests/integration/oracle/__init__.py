"""Integration tests of the oracle context."""
