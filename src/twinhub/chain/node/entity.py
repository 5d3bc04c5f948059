"""`ixo.entity.v1beta1.Query` and `ixo.iid.v1beta1.Query`: domains as ixo entities and IID
documents. An entity names its protocol by the IID context entry `class`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import grpc

from twinhub.chain.node.common import (
    Servicer,
    encoded_field,
    page_response,
    query,
    timestamp,
    window,
)
from twinhub.chain.protos.ixo.entity.v1beta1 import entity_pb2
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2 as entity_query
from twinhub.chain.protos.ixo.entity.v1beta1 import query_pb2_grpc as entity_grpc
from twinhub.chain.protos.ixo.iid.v1beta1 import iid_pb2, types_pb2
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2 as iid_query
from twinhub.chain.protos.ixo.iid.v1beta1 import query_pb2_grpc as iid_grpc
from twinhub.kernel.errors import Invalid, NotFound
from twinhub.services.builtin_protocols import SYSTEM_ACTOR
from twinhub.services.domains import ACTIVE, DomainFilter
from twinhub.services.paging import Window
from twinhub.services.read_model import DomainRow

CREATED, CLOSED = 0, 1  # ixo entity status
ENTITIES_FIELD = entity_query.QueryEntityListResponse.ENTITIES_FIELD_NUMBER
assert ENTITIES_FIELD < entity_query.QueryEntityListResponse.PAGINATION_FIELD_NUMBER


def entity_message(record: dict[str, Any]) -> entity_pb2.Entity:
    return entity_pb2.Entity(
        id=record["did"],
        type=record["type"],
        start_date=timestamp(record["validFrom"]),
        end_date=timestamp(record["validUntil"]),
        status=CREATED if record["status"] == ACTIVE else CLOSED,
        relayer_node=SYSTEM_ACTOR,
        credentials=[c.get("id") or c["type"] for c in record["verifiableCredential"]],
        entity_verified=record["verified"],
        metadata=entity_pb2.EntityMetadata(
            version_id=str(record["version"]),
            created=timestamp(record["createdAt"]),
            updated=timestamp(record["updatedAt"]),
        ),
    )


def iid_document(record: dict[str, Any], types: dict[str, str]) -> iid_pb2.IidDocument:
    did = record["did"]
    return iid_pb2.IidDocument(
        context=[types_pb2.Context(key="class", val=record["class"])],
        id=did,
        controller=record["controller"],
        service=[
            types_pb2.Service(
                id=f"{did}{service['id']}",
                type=service["type"],
                serviceEndpoint=service["endpoint"],
            )
            for service in record["services"]
        ],
        linkedEntity=[
            types_pb2.LinkedEntity(
                type=types.get(edge["target"], ""), id=edge["target"], relationship=edge["type"]
            )
            for edge in record["relationships"]
        ],
        metadata=types_pb2.IidMetadata(
            versionId=str(record["version"]),
            created=timestamp(record["createdAt"]),
            updated=timestamp(record["updatedAt"]),
            deactivated=record["status"] != ACTIVE,
        ),
    )


class DomainReads(Servicer):
    """Reads both services share: a domain's messages, built once per version on the
    node's read path (see services/read_model.py), or from the domain service where that
    path is not available (PostgreSQL)."""

    async def _record(self, did: str) -> dict[str, Any]:
        if not did:
            raise Invalid("id is required")
        return await self.platform.domains.get(did)

    async def _iid(self, records: list[dict[str, Any]]) -> list[iid_pb2.IidDocument]:
        targets = sorted({edge["target"] for r in records for edge in r["relationships"]})
        types = await self.reads.domains.types_of(targets)
        return [iid_document(record, types) for record in records]

    async def _row(self, did: str) -> DomainRow:
        if not did:
            raise Invalid("id is required")
        row = await self.reads.domains.domain_row(did)
        if row is None:
            raise NotFound(f"No domain {did}.")
        return row

    def _has(self, kind: str) -> Callable[[str, int], bool]:
        return lambda did, version: self.cache.get(kind, did, version) is not None

    async def _complete(self, kind: str, row: DomainRow) -> DomainRow:
        """A page row whose message was built when the page was read has no columns; if
        that message has left the cache since, read the row again."""
        if row.raw is None and self.cache.get(kind, row.did, row.version) is None:
            return await self.reads.domains.domain_row(row.did) or row
        return row

    def _entity(self, row: DomainRow) -> entity_pb2.Entity:
        cached = self.cache.get("entity", row.did, row.version)
        return cached or self.cache.put(
            "entity", row.did, row.version, entity_message(row.record())
        )

    async def _document(self, row: DomainRow) -> iid_pb2.IidDocument:
        cached = self.cache.get("iid", row.did, row.version)
        if cached is None:
            (document,) = await self._iid([await self.reads.domains.domain(row)])
            cached = self.cache.put("iid", row.did, row.version, document)
        return cached

    async def _entity_of(self, did: str) -> entity_pb2.Entity:
        if self.reads.fast:
            return self._entity(await self._row(did))
        return entity_message(await self._record(did))

    async def _document_of(self, did: str) -> iid_pb2.IidDocument:
        if self.reads.fast:
            return await self._document(await self._row(did))
        (document,) = await self._iid([await self._record(did)])
        return document

    async def _entity_page(self, request: Any) -> tuple[list[entity_pb2.Entity], Any]:
        page = await self.platform.domains.window(DomainFilter(), window(request))
        return [entity_message(r) for r in page.items], page_response(page)

    async def _entity_items(self, shown: Window) -> tuple[bytes, int | None]:
        """A page's entities joined and its next key: each entity encoded as an item of
        `entities` once per version ("entity_item"); only the rows whose items are not built
        are read whole."""
        page = await self.reads.domains.domain_keys(replace(shown, count_total=False))
        items = self.cache.items
        parts = [items.get(("entity_item", did, version)) for did, _seq, version in page.items]
        if None in parts:
            wanted = [key[0] for key, part in zip(page.items, parts, strict=True) if part is None]
            rows = await self.reads.domains.domain_rows(wanted)
            for index, (did, _seq, _version) in enumerate(page.items):
                if parts[index] is not None:
                    continue
                row = rows.get(did) or await self.reads.domains.domain_row(did)
                if row is None:  # deleted since the page's statement: not in the page
                    parts[index] = b""
                    continue
                encoded = encoded_field(
                    ENTITIES_FIELD, entity_message(row.record()).SerializeToString()
                )
                parts[index] = self.cache.put("entity_item", row.did, row.version, encoded)
        return b"".join(parts), page.next_key

    async def _document_page(self, request: Any) -> tuple[list[iid_pb2.IidDocument], Any]:
        if self.reads.fast:
            rows = await self.reads.domains.domain_page(window(request), self._has("iid"))
            items = [await self._complete("iid", row) for row in rows.items]
            documents = [await self._document(row) for row in items]
            return documents, page_response(rows)
        page = await self.platform.domains.window(DomainFilter(), window(request))
        return await self._iid(page.items), page_response(page)


class EntityQuery(DomainReads, entity_grpc.QueryServicer):
    @query
    async def Params(
        self, request: entity_query.QueryParamsRequest, context: grpc.aio.ServicerContext
    ) -> entity_query.QueryParamsResponse:
        return entity_query.QueryParamsResponse(
            params=entity_pb2.Params(createSequence=await self.platform.domains.sequence())
        )

    @query
    async def Entity(
        self, request: entity_query.QueryEntityRequest, context: grpc.aio.ServicerContext
    ) -> entity_query.QueryEntityResponse | bytes:
        if not self.reads.fast:
            record = await self._record(request.id)
            (document,) = await self._iid([record])
            return entity_query.QueryEntityResponse(
                entity=entity_message(record), iidDocument=document
            )
        key = await self.reads.domains.domain_key(request.id) if request.id else None
        if key is not None:
            cached = self.cache.get("entity_response", key[0], key[2])
            if cached is not None:
                return cached  # serialised once per version
        row = await self._row(request.id)
        cached = self.cache.get("entity_response", row.did, row.version)
        if cached is None:
            cached = self.cache.put(
                "entity_response", row.did, row.version, await self._entity_response(row)
            )
        return cached  # serialised once per version

    async def _entity_response(self, row: DomainRow) -> bytes:
        """`Entity`'s answer for a whole row, serialised: its entity and IID document from
        one resolved record (what it inherits from its protocol, services and membership,
        is no field of the entity message), so a miss makes the record once, not twice."""
        entity = self.cache.get("entity", row.did, row.version)
        document = self.cache.get("iid", row.did, row.version)
        if entity is None or document is None:
            record = await self.reads.domains.domain(row)
            if entity is None:
                entity = self.cache.put("entity", row.did, row.version, entity_message(record))
            if document is None:
                (made,) = await self._iid([record])
                document = self.cache.put("iid", row.did, row.version, made)
        answer = entity_query.QueryEntityResponse(entity=entity, iidDocument=document)
        return answer.SerializeToString()

    @query
    async def EntityMetaData(
        self, request: entity_query.QueryEntityMetadataRequest, context: grpc.aio.ServicerContext
    ) -> entity_query.QueryEntityMetadataResponse:
        return entity_query.QueryEntityMetadataResponse(entity=await self._entity_of(request.id))

    @query
    async def EntityIidDocument(
        self,
        request: entity_query.QueryEntityIidDocumentRequest,
        context: grpc.aio.ServicerContext,
    ) -> entity_query.QueryEntityIidDocumentResponse:
        return entity_query.QueryEntityIidDocumentResponse(
            iidDocument=await self._document_of(request.id)
        )

    @query
    async def EntityVerified(
        self, request: entity_query.QueryEntityVerifiedRequest, context: grpc.aio.ServicerContext
    ) -> entity_query.QueryEntityVerifiedResponse:
        entity = await self._entity_of(request.id)
        return entity_query.QueryEntityVerifiedResponse(entity_verified=entity.entity_verified)

    @query
    async def EntityList(
        self, request: entity_query.QueryEntityListRequest, context: grpc.aio.ServicerContext
    ) -> entity_query.QueryEntityListResponse | bytes:
        if self.reads.fast:
            return await self.page_answer(
                "domains", request, self._entity_items, entity_query.QueryEntityListResponse
            )
        entities, pagination = await self._entity_page(request)
        return entity_query.QueryEntityListResponse(entities=entities, pagination=pagination)


class IidQuery(DomainReads, iid_grpc.QueryServicer):
    @query
    async def IidDocument(
        self, request: iid_query.QueryIidDocumentRequest, context: grpc.aio.ServicerContext
    ) -> iid_query.QueryIidDocumentResponse:
        return iid_query.QueryIidDocumentResponse(iidDocument=await self._document_of(request.id))

    @query
    async def IidDocuments(
        self, request: iid_query.QueryIidDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> iid_query.QueryIidDocumentsResponse:
        documents, pagination = await self._document_page(request)
        return iid_query.QueryIidDocumentsResponse(iidDocuments=documents, pagination=pagination)
