"""Integration tests of the telemetry context."""
