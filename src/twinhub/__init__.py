"""twinhub: verifiable digital-twin domains, reachable over USSD and a chain REST gateway."""

__version__ = "0.1.0"
