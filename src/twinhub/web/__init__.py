"""HTTP concerns shared by every interface: client addresses, operator access, rate limits,
JSON errors, health records and metrics."""
