"""The operator console: server-rendered pages at /console on the registry API's port."""
