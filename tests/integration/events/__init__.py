"""Integration tests of the events context."""
