"""MRV rules, pure: methodologies as data, a monitoring period's computation, learned
plausibility, the inputs read from telemetry rollups, a claim's credits and the
verified-only rule.

No database, no I/O beyond the built-in methodology documents shipped beside this package,
no workers: the oracle's running services (twinhub.oracle) and the claim services
(twinhub.services) read the data and call these functions, so a credit is computed the same
way wherever it is computed and an auditor can recompute it from the report alone.
"""
