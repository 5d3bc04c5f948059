"""The chain REST gateway (interface C's HTTP side): Cosmos-style GET routes transcoded onto
the node's gRPC query methods.

Where a REST path becomes a gRPC call, in request order:
`routes.py` (the route table, from descriptors or reflection, plus aliases) →
`transcode.py` (path variables and query parameters into the request message) →
`upstream.py` (the gRPC call) → `render.py` (the answer as Cosmos JSON); `errors.py`
maps gRPC statuses to HTTP, `app.py` is the ASGI application around them.
"""

from twinhub.chain.gateway.app import GatewayApp, create_gateway_app

__all__ = ["GatewayApp", "create_gateway_app"]
