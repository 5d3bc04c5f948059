"""Telemetry of physical twins: declared by protocols, ingested by HTTP and MQTT, kept as raw
readings with rollups, live state and a stream of events."""
