"""Core services: the rules of the platform, called by every interface, free of HTTP and SQL
details of the caller."""
