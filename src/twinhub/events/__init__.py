"""Events and webhooks: every state change of note as an ordered event (a transactional
outbox), readable as pages or a live stream, and pushed to signed webhook subscriptions.

types       the catalogue of event types and the ledger-transaction → events mapping
store       writing events inside a change's transaction, and reading them in order
sequencer   numbering committed events (the one ordering that never skips a late commit)
webhooks    subscriptions, signing (Standard Webhooks), the URL policy against SSRF
dispatcher  delivering to receivers in the background: retries, back-off, time limits
hub         the pieces wired together for a Platform (start/stop)
"""
