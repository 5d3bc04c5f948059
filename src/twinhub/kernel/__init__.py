"""The shared kernel: what every layer of twinhub may use and nothing else depends on.

Errors, principals, identifiers, the clock and rate limiting live here so that storage, the
domain contexts and the interfaces can share them without importing one another. The kernel
imports only `twinhub.settings`, `twinhub.logging` and third-party libraries.
"""
