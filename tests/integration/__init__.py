"""Tests through the real application on real databases, Redis and broker, per context."""
