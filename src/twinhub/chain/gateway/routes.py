"""The route table: which HTTP path calls which gRPC method.

Routes are never written by hand. They come from the `google.api.http` annotations of the
query services, read either from the descriptor set compiled into twinhub
(`twinhub.chain.descriptors`) or from the upstream node's gRPC reflection (`reflection.py`),
so the gateway can front any node that offers reflection. The only hand-kept part is the
small table of legacy aliases below: those paths were retired upstream and are in no
descriptor, yet deployed clients still call them.

Matching works on the raw (still percent-encoded) path, so that `%2F` inside a value never
splits it. A DID contains `/`: a template's last variable takes the greedy remainder
(`/ixo/entity/{id}` binds `id=did:ixo:entity/abc`), and templates are tried with the
longest literal suffix first, so `/ixo/entity/{id}/verified` wins over `/ixo/entity/{id}`
for `/ixo/entity/did:ixo:entity/abc/verified`. Any other variable binds one segment; a
value with `/` there must be percent-encoded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote

from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from twinhub.chain.descriptors import QUERY_SERVICES, file_descriptor_set

SOURCE_PREFIX = "ixo"  # the first segment of every ixo route in the protos

# Retired routes still served on request (GATEWAY_LEGACY_ROUTES): path template → method.
# Templates name the request field they fill; `/ixo` is replaced by the route prefix like
# every other ixo route, while the amino-era `/did` and `/project` had no prefix.
LEGACY_ALIASES: tuple[tuple[str, str, str], ...] = (
    ("/ixo/collection/{id}", "ixo.claims.v1beta1.Query", "Collection"),
    ("/ixo/collection", "ixo.claims.v1beta1.Query", "CollectionList"),
    ("/ixo/claim/{id}", "ixo.claims.v1beta1.Query", "Claim"),
    ("/ixo/claim", "ixo.claims.v1beta1.Query", "ClaimList"),
    ("/ixo/dispute/{proof}", "ixo.claims.v1beta1.Query", "Dispute"),
    ("/ixo/dispute", "ixo.claims.v1beta1.Query", "DisputeList"),
    ("/ixo/entity/config", "ixo.entity.v1beta1.Query", "Params"),
    ("/ixo/token/config", "ixo.token.v1beta1.Query", "Params"),
    ("/did/{id}", "ixo.iid.v1beta1.Query", "IidDocument"),
    ("/project/{id}", "ixo.entity.v1beta1.Query", "Entity"),
)

_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)(?:=([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class Method:
    """A unary gRPC method with the message classes to speak it."""

    service: str  # e.g. "ixo.entity.v1beta1.Query"
    name: str  # e.g. "Entity"
    request_type: type[Message]
    response_type: type[Message]

    @property
    def full_name(self) -> str:
        """`ixo.entity.v1beta1.Query/Entity`: how GATEWAY_DISABLED_METHODS names it."""
        return f"{self.service}/{self.name}"

    @property
    def path(self) -> str:
        """The HTTP/2 path of the gRPC call."""
        return f"/{self.service}/{self.name}"

    @property
    def request_descriptor(self) -> Descriptor:
        return self.request_type.DESCRIPTOR


@dataclass(frozen=True, slots=True)
class Binding:
    """One google.api.http rule (or an alias) before it is compiled: verb, path, method."""

    verb: str
    path: str
    service: str
    method: str
    alias: bool = False


@dataclass(slots=True)
class Route:
    """A served path template, compiled, and the method it calls."""

    verb: str  # "get" for every ixo query; kept so other verbs answer 405 or are skipped
    template: str  # as served, e.g. "/chain/entity/{id}"
    method: Method
    alias: bool
    variables: tuple[str, ...]  # request field paths bound from the path, in order
    regex: re.Pattern[str] = field(repr=False)
    suffix_literals: int = 0  # literal segments after the last variable
    literals: int = 0  # literal segments in all
    first_segment: str = ""

    def match(self, raw_path: str) -> dict[str, str] | None:
        """The decoded path variables when `raw_path` fits this template, else None."""
        found = self.regex.fullmatch(raw_path)
        if found is None:
            return None
        return {
            name: unquote(value, errors="strict")
            for name, value in zip(self.variables, found.groups(), strict=True)
        }

    @property
    def sort_key(self) -> tuple[int, int, int, str]:
        return (-self.suffix_literals, -self.literals, -len(self.variables), self.template)


def compile_template(template: str) -> tuple[re.Pattern[str], tuple[str, ...], int, int]:
    """(regex over the raw path, variable field paths, literal suffix, literal count)."""
    variables = [m.group(1) for m in _VARIABLE.finditer(template)]
    parts: list[str] = []
    position = 0
    for index, found in enumerate(_VARIABLE.finditer(template)):
        parts.append(re.escape(template[position : found.start()]))
        last = index == len(variables) - 1
        parts.append(f"({_variable_pattern(found.group(2), greedy=last)})")
        position = found.end()
    parts.append(re.escape(template[position:]))
    stripped = _VARIABLE.sub("\0", template)
    segments = [s for s in stripped.split("/") if s]
    literals = [s for s in segments if "\0" not in s and s not in ("*", "**")]
    after_last = stripped.rsplit("\0", 1)[-1] if variables else stripped
    suffix = len([s for s in after_last.split("/") if s])
    return re.compile("".join(parts)), tuple(variables), suffix, len(literals)


def _variable_pattern(pattern: str | None, greedy: bool) -> str:
    """A variable's regex: one segment, or the remainder for the last variable; an explicit
    `{name=a/*/b/**}` pattern is honoured segment by segment."""
    if pattern is None or pattern == "*":
        return ".+" if greedy else "[^/]+"
    pieces = []
    for segment in pattern.split("/"):
        if segment == "**":
            pieces.append(".+")
        elif segment == "*":
            pieces.append("[^/]+")
        else:
            pieces.append(re.escape(segment))
    return "/".join(pieces)


def served_path(path: str, prefix: str) -> str:
    """Replace the leading `/ixo` of an ixo route with this deployment's prefix."""
    if path == f"/{SOURCE_PREFIX}" or path.startswith(f"/{SOURCE_PREFIX}/"):
        return f"/{prefix}{path[len(SOURCE_PREFIX) + 1 :]}"
    return path


class RouteTable:
    """Every served route, tried in order of specificity; built once, read per request."""

    def __init__(self, routes: Iterable[Route], disabled: Iterable[str] = ()) -> None:
        self.routes = sorted(routes, key=lambda r: r.sort_key)
        self.disabled = frozenset(disabled)
        self._by_first: dict[str, list[Route]] = {}
        for route in self.routes:
            self._by_first.setdefault(route.first_segment, []).append(route)

    def __len__(self) -> int:
        return len(self.routes)

    def __iter__(self) -> Iterator[Route]:
        return iter(self.routes)

    def match(self, raw_path: str) -> tuple[Route, dict[str, str]] | None:
        """The first route whose template fits, with its variables; None for no route.

        Raises UnicodeDecodeError when a percent-encoded value is not UTF-8.
        """
        first = raw_path[1:].split("/", 1)[0]
        for route in self._by_first.get(first, ()):
            values = route.match(raw_path)
            if values is not None:
                return route, values
        return None

    def methods(self) -> set[str]:
        return {route.method.full_name for route in self.routes}

    @classmethod
    def build(
        cls,
        pool: descriptor_pool.DescriptorPool,
        bindings: Iterable[Binding],
        prefix: str,
        legacy: bool,
        disabled: Iterable[str] = (),
    ) -> RouteTable:
        """Compile the bindings (plus the legacy aliases when asked) against `pool`."""
        methods: dict[str, Method] = {}
        all_bindings = list(bindings)
        if legacy:
            all_bindings += [Binding("get", p, s, m, alias=True) for p, s, m in LEGACY_ALIASES]
        routes = []
        for binding in all_bindings:
            try:
                method = methods.get(f"{binding.service}/{binding.method}") or _method(
                    pool, binding.service, binding.method
                )
            except KeyError:
                continue  # an alias of a service this upstream does not offer
            methods[method.full_name] = method
            template = served_path(binding.path, prefix)
            regex, variables, suffix, literals = compile_template(template)
            routes.append(
                Route(
                    verb=binding.verb,
                    template=template,
                    method=method,
                    alias=binding.alias,
                    variables=variables,
                    regex=regex,
                    suffix_literals=suffix,
                    literals=literals,
                    first_segment=template[1:].split("/", 1)[0],
                )
            )
        return cls(routes, disabled)


def _method(pool: descriptor_pool.DescriptorPool, service: str, name: str) -> Method:
    found = pool.FindServiceByName(service).methods_by_name.get(name)
    if found is None:
        raise KeyError(f"{service}/{name}")
    return Method(
        service=service,
        name=name,
        request_type=message_factory.GetMessageClass(found.input_type),
        response_type=message_factory.GetMessageClass(found.output_type),
    )


def build_pool(
    files: Iterable[descriptor_pb2.FileDescriptorProto],
) -> descriptor_pool.DescriptorPool:
    """A pool of its own holding `files`, added dependencies first (the order a reflection
    answer or a descriptor set gives is not guaranteed to be that)."""
    by_name = {file.name: file for file in files}
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str, trail: tuple[str, ...] = ()) -> None:
        if name in added or name in trail:
            return
        file = by_name.get(name)
        if file is None:
            raise KeyError(f"descriptor of {name} is missing")
        for dependency in file.dependency:
            add(dependency, (*trail, name))
        pool.Add(file)
        added.add(name)

    for name in by_name:
        add(name)
    return pool


def http_bindings(
    files: Iterable[descriptor_pb2.FileDescriptorProto], services: Iterable[str] | None = None
) -> list[Binding]:
    """The google.api.http bindings of every method (of `services`, when named); methods
    without an HTTP rule, and streaming ones, have no route."""
    wanted = set(services) if services is not None else None
    bindings = []
    for file in files:
        for service in file.service:
            full_name = f"{file.package}.{service.name}" if file.package else service.name
            if wanted is not None and full_name not in wanted:
                continue
            for method in service.method:
                if method.client_streaming or method.server_streaming:
                    continue
                if not method.options.HasExtension(annotations_pb2.http):
                    continue
                rule = method.options.Extensions[annotations_pb2.http]
                bindings.extend(
                    Binding(verb, path, full_name, method.name) for verb, path in _rules(rule)
                )
    return bindings


def _rules(rule: http_pb2.HttpRule) -> list[tuple[str, str]]:
    found = []
    for binding in (rule, *rule.additional_bindings):
        pattern = binding.WhichOneof("pattern")
        if pattern == "custom":
            found.append((binding.custom.kind.lower(), binding.custom.path))
        elif pattern is not None:
            found.append((pattern, getattr(binding, pattern)))
    return found


def compiled_source() -> tuple[descriptor_pool.DescriptorPool, list[Binding]]:
    """The pool and bindings of the descriptor set shipped with twinhub."""
    files = list(file_descriptor_set().file)
    return build_pool(files), http_bindings(files, QUERY_SERVICES)
