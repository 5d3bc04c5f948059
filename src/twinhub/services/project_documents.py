"""A project's design document (PDD), the evidence it cites, the verifiers accredited for
it and its validation: what must hold before anything of the project is issued.

Rules that live here:
- attachments are stored by the SHA-256 of their bytes; an upload whose bytes do not hash
  to the digest it claims is refused, and a stored one never changes;
- the proponent (a controller of the project holding the proponent role) stores the
  project document; every attachment it cites must be stored first;
- the registry role accredits a verifier for a project with a credential it signs; an
  admin cannot (no admin bypass of the workflow roles);
- an accredited verifier validates the newest document with a signed credential naming
  its digest and the accreditation's; a newer document needs a new validation;
- until validated, a project issues nothing; a parameter still marked `placeholder` blocks
  issuance, named (`issuance_blockers`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Attachment, Credential, Domain, ProjectDocument
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, FieldProblem, Forbidden, Invalid, NotFound, Problems
from twinhub.kernel.identifiers import is_did
from twinhub.kernel.principals import Principal, require_workflow_role
from twinhub.mrv import trust_chain as chain
from twinhub.mrv.project_document import ProjectDocument as PddModel
from twinhub.mrv.project_document import check_project_document
from twinhub.security.jcs import DIGEST, CanonicalizationError
from twinhub.services.credentials import steps, store_step
from twinhub.services.domains import verified_project
from twinhub.services.ledger import Ledger

MAX_DOCUMENT_BYTES = 1024 * 1024


class NotValidated(Conflict):
    code = "project_not_validated"


class PlaceholderParameter(Conflict):
    code = "placeholder_parameter"


@dataclass(frozen=True)
class Validation:
    """A project's standing validation: the document it validated and the credential."""

    document: dict[str, Any]
    document_digest: str
    credential: dict[str, Any]
    digest: str


def checked(document: Any, where: str = "document") -> PddModel:
    """The document checked by the methodology's rules (mrv.project_document); Invalid
    naming every fault's path otherwise."""
    problems = Problems()
    model = None
    try:
        if len(orjson.dumps(document)) > MAX_DOCUMENT_BYTES:
            problems.add(where, f"at most {MAX_DOCUMENT_BYTES} bytes")
        else:
            model = check_project_document(document, problems, where)
    except (TypeError, CanonicalizationError) as error:
        problems.add(where, f"not canonical JSON: {error}")
    if model is None:
        problems.raise_if_any("The project document is invalid.")
        raise Invalid("The project document is invalid.", [FieldProblem(where, "invalid")])
    return model


def placeholders(document: dict[str, Any]) -> list[str]:
    """Paths of the figures the document (with the country defaults it takes) still marks
    placeholder: each blocks issuance."""
    return checked(document).placeholders()


class ProjectDocuments:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        max_attachment_bytes: int = 10_485_760,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        # REGISTRY_MAX_ATTACHMENT_BYTES: the API's body limit for the route is the same
        # figure, so an over-size upload over HTTP is refused (413) before it is read.
        self._max_attachment_bytes = max_attachment_bytes

    # -- attachments -------------------------------------------------------------------------
    async def put_attachment(
        self, content: bytes, claimed: str, media_type: str, actor: Principal
    ) -> dict[str, Any]:
        """Store evidence by its hash; (view, created)."""
        if not actor.roles & {"proponent", "verifier", "registry", "writer", "admin"}:
            raise Forbidden("Storing evidence needs a writer or workflow role.")
        problems = Problems()
        if not isinstance(claimed, str) or not DIGEST.match(claimed):
            problems.add("digest", "sha256:<64 lower-case hex> of the content")
        if not content:
            problems.add("content", "the attachment is empty")
        elif len(content) > self._max_attachment_bytes:
            problems.add(
                "content",
                f"at most {self._max_attachment_bytes} bytes (REGISTRY_MAX_ATTACHMENT_BYTES)",
            )
        problems.raise_if_any("The attachment is invalid.")
        actual = "sha256:" + hashlib.sha256(content).hexdigest()
        if actual != claimed:
            raise Invalid(
                "The attachment's content does not match its hash.",
                [FieldProblem("content", f"hashes to {actual}, not to the digest {claimed}")],
            )
        async with self._ledger.write() as write:
            row = await write.session.get(Attachment, actual)
            if row is None:
                row = Attachment(
                    digest=actual,
                    content=content,
                    media_type=media_type[:100] or "application/octet-stream",
                    size=len(content),
                    actor=actor.did,
                    created_at=utcnow(),
                )
                write.session.add(row)
                await write.append(
                    "attachment.store",
                    actor.did,
                    actor.did,
                    {"digest": actual, "size": len(content)},
                )
            return {"digest": row.digest, "mediaType": row.media_type, "size": row.size}

    async def attachment(self, claimed: str) -> tuple[bytes, str]:
        async with self._sessions() as session:
            row = await session.get(Attachment, claimed) if DIGEST.match(claimed) else None
        if row is None:
            raise NotFound(f"No attachment {claimed}.")
        return row.content, row.media_type

    # -- the project document ------------------------------------------------------------
    async def store(
        self, project: str, document: Any, actor: Principal
    ) -> tuple[dict[str, Any], bool]:
        """The proponent's document, stored (once per content); (view, created)."""
        require_workflow_role(actor, "proponent")
        model = checked(document)
        found = model.digest
        async with self._ledger.write() as write:
            session = write.session
            domain = await self._project(session, project)
            if actor.did not in domain.controller:
                raise Forbidden(f"Only a controller of {project} stores its project document.")
            missing = []
            for cited in sorted(model.attachments()):
                if await session.get(Attachment, cited) is None:
                    missing.append(cited)
            if missing:
                raise Invalid(
                    "The project document cites evidence that is not stored; upload it first.",
                    [FieldProblem("document", f"no attachment {m}") for m in missing],
                )
            existing = await session.scalar(
                select(ProjectDocument).where(
                    ProjectDocument.project_did == project, ProjectDocument.digest == found
                )
            )
            if existing is not None:
                return self._view(existing), False
            row = ProjectDocument(
                project_did=project,
                digest=found,
                document=orjson.dumps(document).decode(),
                actor=actor.did,
                created_at=utcnow(),
            )
            session.add(row)
            await write.append("project.document", project, actor.did, {"digest": found})
            await session.flush()
            return self._view(row), True

    async def document(self, project: str) -> dict[str, Any]:
        """The newest document, whether it is validated, and by whom."""
        async with self._sessions() as session:
            row = await self._newest(session, project)
            if row is None:
                raise NotFound(f"{project} has no project document.")
            validation = await self.validation_of(session, project)
        view = self._view(row)
        view["validation"] = (
            validation.credential
            if validation is not None and validation.document_digest == row.digest
            else None
        )
        view["placeholders"] = placeholders(orjson.loads(row.document))
        return view

    # -- accreditation and validation -----------------------------------------------------
    async def credential_request(
        self, project: str, step: str, verifier: str | None, actor: Principal
    ) -> dict[str, Any]:
        """The unsigned accreditation (the registry's) or validation (the verifier's)."""
        if step == "accreditation":
            require_workflow_role(actor, "registry")
            if not is_did(verifier):
                raise Invalid(
                    "Name the verifier to accredit.",
                    [FieldProblem("verifier", "the verifier's DID")],
                )
            assert verifier is not None
            return chain.unsigned_credential(
                chain.ACCREDITATION,
                actor.did,
                chain.accreditation_subject(verifier, project),
                utcnow(),
            )
        if step == "validation":
            subject = await self._validation_subject(project, actor)
            return chain.unsigned_credential(chain.VALIDATION, actor.did, subject, utcnow())
        raise Invalid("Unknown step.", [FieldProblem("step", "accreditation or validation")])

    async def accredit(self, project: str, credential: Any, actor: Principal) -> dict[str, Any]:
        """The registry's signed accreditation of a verifier for the project."""
        require_workflow_role(actor, "registry")
        subject = credential.get("credentialSubject") if isinstance(credential, dict) else None
        verifier = subject.get("id") if isinstance(subject, dict) else None
        if not is_did(verifier):
            raise Invalid(
                "The accreditation names no verifier.",
                [FieldProblem("credential.credentialSubject.id", "the verifier's DID")],
            )
        expected = chain.accreditation_subject(verifier, project)
        self._check(credential, chain.ACCREDITATION, actor, expected)
        async with self._ledger.write() as write:
            await self._project(write.session, project)
            found = await store_step(
                write.session, credential, chain.ACCREDITATION, project, utcnow()
            )
            await write.append(
                "verifier.accredit", project, actor.did, {"verifier": verifier, "digest": found}
            )
        return {"verifier": verifier, "project": project, "digest": found, "credential": credential}

    async def validate(self, project: str, credential: Any, actor: Principal) -> dict[str, Any]:
        """An accredited verifier's signed validation of the newest document."""
        expected = await self._validation_subject(project, actor)
        self._check(credential, chain.VALIDATION, actor, expected)
        async with self._ledger.write() as write:
            # Checked again under the ledger's turn: the newest document may have changed.
            if await self._validation_subject(project, actor, write.session) != expected:
                raise Conflict("The project document changed meanwhile; validate it again.")
            found = await store_step(write.session, credential, chain.VALIDATION, project, utcnow())
            await write.append(
                "project.validate",
                project,
                actor.did,
                {"document": expected["projectDocument"], "digest": found},
            )
        return {"project": project, "digest": found, "credential": credential}

    async def accreditation_of(
        self, session: AsyncSession, verifier: str, project: str
    ) -> Credential | None:
        rows = await steps(session, project, chain.ACCREDITATION, subject=verifier)
        return rows[-1] if rows else None

    async def validation_of(self, session: AsyncSession, project: str) -> Validation | None:
        """The newest document's validation, or None (not validated, or a newer document)."""
        newest = await self._newest(session, project)
        if newest is None:
            return None
        for row in reversed(await steps(session, project, chain.VALIDATION)):
            signed = orjson.loads(row.document)
            if signed["credentialSubject"].get("projectDocument") == newest.digest:
                return Validation(
                    orjson.loads(newest.document), newest.digest, signed, row.digest or ""
                )
        return None

    async def validation_named(
        self, session: AsyncSession, project: str, found: str
    ) -> Validation | None:
        """The validation whose digest is `found`, with the document it validated."""
        for row in await steps(session, project, chain.VALIDATION):
            if row.digest == found:
                signed = orjson.loads(row.document)
                named = signed["credentialSubject"].get("projectDocument")
                document = await session.scalar(
                    select(ProjectDocument).where(
                        ProjectDocument.project_did == project, ProjectDocument.digest == named
                    )
                )
                if document is not None:
                    return Validation(orjson.loads(document.document), named, signed, found)
        return None

    async def issuance_blockers(self, session: AsyncSession, project: str) -> Validation:
        """The validation issuance rests on; NotValidated or PlaceholderParameter, naming
        what blocks it, otherwise."""
        validation = await self.validation_of(session, project)
        if validation is None:
            raise NotValidated(
                f"{project} is not validated: no accredited verifier has validated its newest "
                "project document, so nothing of it can be submitted or issued."
            )
        held = placeholders(validation.document)
        if held:
            raise PlaceholderParameter(
                f"The project document of {project} still marks {', '.join(held)} as a "
                "placeholder: it cannot be used for issuance.",
                [FieldProblem(f"document.{path}", "status is placeholder") for path in held],
            )
        return validation

    # -- helpers -----------------------------------------------------------------------------
    async def _validation_subject(
        self, project: str, actor: Principal, session: AsyncSession | None = None
    ) -> dict[str, Any]:
        require_workflow_role(actor, "verifier")
        if session is None:
            async with self._sessions() as own:
                return await self._validation_subject(project, actor, own)
        await self._project(session, project)
        accreditation = await self.accreditation_of(session, actor.did, project)
        if accreditation is None:
            raise Forbidden(f"{actor.did} is not accredited by the registry for {project}.")
        newest = await self._newest(session, project)
        if newest is None:
            raise Conflict(f"{project} has no project document to validate.")
        return chain.validation_subject(project, newest.digest, accreditation.digest or "")

    @staticmethod
    def _check(credential: Any, kind: str, actor: Principal, subject: dict[str, Any]) -> None:
        problems = chain.credential_problems(credential, kind, actor.did, subject)
        if problems:
            raise Invalid(f"The {kind} is not the one expected.", problems)

    @staticmethod
    async def _project(session: AsyncSession, project: str) -> Domain:
        return await verified_project(
            session, project, "have a project document", purpose="documents are a project's"
        )

    @staticmethod
    async def _newest(session: AsyncSession, project: str) -> ProjectDocument | None:
        return await session.scalar(
            select(ProjectDocument)
            .where(ProjectDocument.project_did == project)
            .order_by(ProjectDocument.id.desc())
            .limit(1)
        )

    @staticmethod
    def _view(row: ProjectDocument) -> dict[str, Any]:
        return {
            "project": row.project_did,
            "digest": row.digest,
            "document": orjson.loads(row.document),
            "storedBy": row.actor,
            "storedAt": row.created_at.isoformat(),
        }
