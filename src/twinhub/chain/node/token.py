"""`ixo.token.v1beta1.Query`: credit classes (CARBON, ...) as ixo tokens.

On ixo a minter account owns an ixo1155 contract per token class. twinhub mints for
approved claims itself, so every class has one minter, the platform's credential issuer
(its did:key), and a class is addressed by its name where ixo has a contract address.
`supply` is what was ever minted; `retired` lists each retirement.
"""

from __future__ import annotations

from typing import Any

import grpc

from twinhub.chain.node.common import Servicer, query, window
from twinhub.chain.protos.cosmos.base.query.v1beta1 import pagination_pb2
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2 as q
from twinhub.chain.protos.ixo.token.v1beta1 import query_pb2_grpc, token_pb2
from twinhub.kernel.errors import Invalid, NotFound
from twinhub.services.protocols import TOKEN_CLASS_PATTERN
from twinhub.services.read_model import TokenRow


def _view(row: TokenRow) -> dict[str, Any]:
    """The fields of the credit service's token view that the messages use."""
    return {"name": row.name, "protocol": row.protocol, "minted": row.minted}


class TokenQuery(Servicer, query_pb2_grpc.QueryServicer):
    @property
    def minter(self) -> str:
        return self.platform.credentials.issuer.did

    async def _views(self) -> list[dict[str, Any]]:
        """Every token class by name, with the fields the messages use. The read model
        reads them in one statement (the services also sum each class's balances, which
        no message carries)."""
        if self.reads.fast:
            return [_view(row) for row in await self.reads.claims.tokens()]
        return await self.platform.credits.tokens()

    async def _view(self, name: str) -> dict[str, Any]:
        if not self.reads.fast:
            return await self.platform.credits.token(name)
        row = await self.reads.claims.token(name) if TOKEN_CLASS_PATTERN.match(name) else None
        if row is None:
            raise NotFound(f"No credits of class {name!r} were ever minted.")
        return _view(row)

    async def _movements(self, name: str, kind: str) -> list[dict[str, Any]]:
        if not self.reads.fast:
            return await self.platform.credits.movements_of(name, kind)
        return [
            {"id": m.id, "reason": m.reason, "amount": m.amount, "from": m.sender}
            for m in await self.reads.claims.movements(name, kind)
        ]

    async def _token(self, view: dict[str, Any]) -> token_pb2.Token:
        retired = await self._movements(view["name"], "retire")
        transferred = await self._movements(view["name"], "transfer")
        return token_pb2.Token(
            minter=self.minter,
            contract_address=view["name"],
            **{"class": view["protocol"]},
            name=view["name"],
            description=f"{view['name']} credits issued by verified monitoring periods",
            type="twinhub-credit",
            cap="0",
            supply=str(view["minted"]),
            retired=[
                token_pb2.TokensRetired(
                    id=str(m["id"]),
                    reason=m["reason"] or "",
                    amount=str(m["amount"]),
                    owner=m["from"],
                )
                for m in retired
            ],
            transferred=[
                token_pb2.CreditsTransferred(
                    id=str(m["id"]), amount=str(m["amount"]), owner=m["from"]
                )
                for m in transferred
            ],
        )

    @query
    async def Params(
        self, request: q.QueryParamsRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryParamsResponse:
        return q.QueryParamsResponse(params=token_pb2.Params(ixo1155_contract_code=0))

    @query
    async def TokenList(
        self, request: q.QueryTokenListRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryTokenListResponse:
        if not request.minter:
            raise Invalid("minter is required")
        page = window(request)
        views = await self._views() if request.minter == self.minter else []
        if page.reverse:
            views.reverse()
        start = page.offset + (page.key or 0)  # a key here is the index of the next class
        chosen = views[start : start + page.limit]
        more = start + page.limit < len(views)
        return q.QueryTokenListResponse(
            tokenDocs=[await self._token(v) for v in chosen],
            pagination=pagination_pb2.PageResponse(
                next_key=str(start + page.limit).encode() if more else b"",
                total=len(views) if page.count_total else 0,
            ),
        )

    @query
    async def TokenDoc(
        self, request: q.QueryTokenDocRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryTokenDocResponse:
        if request.minter != self.minter:
            raise NotFound(f"{request.minter!r} minted no tokens here.")
        view = await self._view(request.contract_address)
        return q.QueryTokenDocResponse(tokenDoc=await self._token(view))

    @query
    async def TokenMetadata(
        self, request: q.QueryTokenMetadataRequest, context: grpc.aio.ServicerContext
    ) -> q.QueryTokenMetadataResponse:
        view = await self._view(request.id)
        return q.QueryTokenMetadataResponse(
            name=view["name"],
            description=f"{view['name']} credits issued by verified monitoring periods",
            decimals="0",
            index=view["name"],
            properties=q.TokenMetadataProperties(**{"class": view["protocol"]}, cap="0"),
        )
