"""The `twinhub` command: serve the interfaces, migrate the database, operator tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Coroutine, Iterator
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console

from twinhub import __version__
from twinhub.logging import configure_logging
from twinhub.settings import Settings


def _group(help: str, **options: Any) -> typer.Typer:
    """A command group; help is read as Markdown, so a docstring's line breaks do not cut
    its sentences in the terminal."""
    return typer.Typer(help=help, rich_markup_mode="markdown", **options)


app = _group(
    "twinhub: digital-twin domains, a USSD gateway and a chain REST gateway.",
    no_args_is_help=True,
    add_completion=False,
)
serve_app = _group("Run the platform's interfaces (all of them by default).")
ussd_app = _group("USSD gateway operator tasks.", no_args_is_help=True)
keys_app = _group("API keys of the registry API.", no_args_is_help=True)
ledger_app = _group("The ledger: the registry's append-only history.", no_args_is_help=True)
app.add_typer(serve_app, name="serve")
app.add_typer(ussd_app, name="ussd")
app.add_typer(keys_app, name="keys")
app.add_typer(ledger_app, name="ledger")
devices_app = _group(
    "Device tokens of physical twins (telemetry credentials).", no_args_is_help=True
)
app.add_typer(devices_app, name="devices")
# No emoji codes (a did:key: DID would print as "did🔑z6Mk..."), and a message stays on
# its line whatever the terminal's width.
console = Console(stderr=True, emoji=False, soft_wrap=True)
_verbose = False  # `twinhub --verbose`: a one-shot command's log lines on standard error


@app.callback()
def _options(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show the log lines of a one-shot command on standard error (servers always log).",
        ),
    ] = False,
) -> None:
    """twinhub: digital-twin domains, a USSD gateway and a chain REST gateway."""
    global _verbose
    _verbose = verbose


def _out() -> Console:
    """Standard output, where a command says what it did (or prints its data): made at each
    use, so that it reads the terminal's width of the moment."""
    return Console(soft_wrap=True, emoji=False, highlight=False)


JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")
]
LimitOption = Annotated[
    int, typer.Option("--limit", min=1, max=10_000, help="Show at most this many rows.")
]


def _print_json(value: Any) -> None:
    import orjson

    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode())


def _show_rows(
    rows: list[dict[str, Any]],
    as_json: bool,
    noun: str,
    columns: list[tuple[str, Any]],
    more: bool = False,
) -> None:
    """`rows` as JSON (the whole records) or as a table of `columns` (header, cell of a
    row) on standard output, and how many there are on standard error; long cells fold
    over lines instead of being cut. `more`: there were more than the rows shown."""
    from rich.table import Table

    if as_json:
        _print_json(rows)
    else:
        table = Table(*(header for header, _ in columns), highlight=False)
        for column in table.columns:
            column.overflow = "fold"
        for row in rows:
            table.add_row(*(str(cell(row) or "") for _, cell in columns))
        if rows:
            Console(emoji=False, highlight=False).print(table)
    plural = noun if len(rows) == 1 else f"{noun}s"
    console.print(
        f"{len(rows)} {plural}" + (" shown; there are more (raise --limit)" if more else "")
    )


HostOption = Annotated[
    str | None, typer.Option("--host", help="Interface to bind (default HOST, 127.0.0.1).")
]
PortOption = Annotated[
    int | None, typer.Option("--port", help="USSD gateway port (default PORT, 3000).")
]


def load_settings(serving: bool = False, **overrides: Any) -> Settings:
    """Settings from the environment; a clear message and exit code 2 when they are wrong.

    A server (`serving`) logs at LOG_LEVEL; a one-shot command shows its own progress and
    result, so its log lines are kept to errors unless `twinhub --verbose` asks for them."""
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as error:
        for problem in error.errors():
            name = Settings.environment_name_of(tuple(problem["loc"]))
            console.print(f"[red]configuration error[/red] {name}: {problem['msg']}")
        raise typer.Exit(2) from None
    problems = settings.problems_for_production()
    for problem in problems:
        console.print(f"[red]refusing to start[/red]: {problem}")
    if problems:
        raise typer.Exit(2)
    level = settings.observability.log_level if serving or _verbose else "error"
    configure_logging(level, settings.observability.log_format)
    return settings


def _run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coroutine)


def _serve(settings: Settings, interfaces: list[str], reuse_port: bool = False) -> None:
    """Run `interfaces` (ussd, registry, node, gateway) in this process, on one loop.

    The gateway fronts GATEWAY_GRPC_UPSTREAM when set, else a node started here; a gateway
    fronting another node needs no database, so then no platform is opened. A start-up
    failure is one line and its exit status (see twinhub.startup).
    """
    from twinhub.chain.gateway import create_gateway_app
    from twinhub.chain.gateway.app import resolve_routes_from
    from twinhub.platform import Platform
    from twinhub.registry.app import create_registry_app
    from twinhub.server import Listener, NodeListener, run, serve
    from twinhub.startup import StartupError
    from twinhub.ussd.app import create_ussd_app

    upstream = settings.chain.gateway_grpc_upstream
    runs_node = "node" in interfaces or ("gateway" in interfaces and not upstream)
    node = NodeListener(settings.server.host, settings.chain.node_port) if runs_node else None
    routes_from = resolve_routes_from(settings, upstream_given=bool(upstream))

    def gateway(_: Platform | None) -> Any:
        target = upstream or (node.address if node is not None else None)
        return create_gateway_app(settings, target, routes_from)

    server = settings.server
    guard = (
        server.http_keep_alive_seconds,
        server.http_header_timeout_seconds,
        server.http_max_connections_per_client,
    )
    builders = {
        "ussd": Listener(
            "ussd",
            lambda p: create_ussd_app(p),
            settings.server.host,
            settings.ussd.port,
            "PORT",
            *guard,
        ),
        "registry": Listener(
            "registry",
            lambda p: create_registry_app(p),
            settings.server.host,
            settings.registry.port,
            "REGISTRY_PORT",
            *guard,
        ),
        "gateway": Listener(
            "gateway",
            gateway,
            settings.server.host,
            settings.chain.gateway_port,
            "GATEWAY_PORT",
            *guard,
        ),
    }
    listeners = [builders[name] for name in interfaces if name in builders]
    needs_platform = runs_node or any(name in ("ussd", "registry") for name in interfaces)

    async def main() -> None:
        try:
            platform = Platform(settings) if needs_platform else None
        except RuntimeError as error:
            console.print(f"[red]refusing to start[/red]: {error}")
            raise SystemExit(2) from None
        await serve(platform, listeners, node, reuse_port=reuse_port)

    try:
        run(main)
    except StartupError as error:
        _startup_failed(error)


def _startup_failed(error: Exception) -> None:
    """One line on stderr and the cause's exit status."""
    from twinhub.startup import StartupError

    assert isinstance(error, StartupError)
    print(f"twinhub: cannot start: {error}", file=sys.stderr)
    raise SystemExit(int(error.code))


def _prepare(settings: Settings) -> None:
    """Migrate the database and make the development keys once, in the parent, before the
    workers start (they would otherwise race to do it)."""
    from twinhub.platform import Platform
    from twinhub.startup import database_failure

    # No background work here: the parent would otherwise open an MQTT session of its own,
    # subscribed to the shared group long after the parent moved on to supervising.
    settings = settings.model_copy(update={"background_workers_enabled": False})

    async def main() -> None:
        try:
            platform = Platform(settings)
        except RuntimeError as error:
            console.print(f"[red]refusing to start[/red]: {error}")
            raise SystemExit(2) from None
        try:
            await platform.start()
        except Exception as error:
            raise database_failure(error) from None
        finally:
            await platform.stop()

    asyncio.run(main())


RegistryPortOption = Annotated[
    int | None, typer.Option("--registry-port", help="Registry API port (default 8000).")
]
NodePortOption = Annotated[
    int | None, typer.Option("--node-port", help="Chain node gRPC port (default NODE_PORT, 9090).")
]
GatewayPortOption = Annotated[
    int | None,
    typer.Option("--gateway-port", help="Chain REST gateway port (default GATEWAY_PORT, 1317)."),
]


@serve_app.callback(invoke_without_command=True)
def serve_all(
    ctx: typer.Context,
    host: HostOption = None,
    port: PortOption = None,
    registry_port: RegistryPortOption = None,
    node_port: NodePortOption = None,
    gateway_port: GatewayPortOption = None,
    workers: Annotated[
        str | None,
        typer.Option(
            "--workers",
            help="Processes of each kind (default WORKERS, 1; auto: one per core); more than "
            "one needs REDIS_URL.",
        ),
    ] = None,
) -> None:
    """Every interface: USSD gateway (3000), registry API (8000), chain node (9090) and
    chain REST gateway (1317). The USSD gateway runs in processes of its own, so that no
    API traffic can delay a phone's reply."""
    if ctx.invoked_subcommand is None:
        from twinhub.processes import check_ports, check_workers, supervise, worker_count
        from twinhub.startup import StartupError

        settings = load_settings(
            serving=True,
            host=host,
            port=port,
            registry_port=registry_port,
            node_port=node_port,
            gateway_port=gateway_port,
            workers=workers,
        )
        try:
            count = worker_count(settings.server.workers)
            check_workers(settings, count)
            check_ports(settings)
            _prepare(settings)
        except StartupError as error:
            _startup_failed(error)
        raise SystemExit(supervise(settings, count))


ReusePortOption = Annotated[
    bool,
    typer.Option(
        "--reuse-port",
        hidden=True,
        help="Share the ports with other processes (SO_REUSEPORT); set by `serve --workers`.",
    ),
]


@serve_app.command("api")
def serve_api(host: HostOption = None, reuse_port: ReusePortOption = False) -> None:
    """The registry API, the chain node and the chain REST gateway, in one process (the
    ports come from REGISTRY_PORT, NODE_PORT and GATEWAY_PORT)."""
    _serve(load_settings(serving=True, host=host), ["registry", "node", "gateway"], reuse_port)


@serve_app.command("registry")
def serve_registry(
    host: HostOption = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Registry API port (default REGISTRY_PORT, 8000).")
    ] = None,
) -> None:
    """Only the registry API (interface A, with GraphQL)."""
    _serve(load_settings(serving=True, host=host, registry_port=port), ["registry"])


@serve_app.command("ussd")
def serve_ussd(
    host: HostOption = None, port: PortOption = None, reuse_port: ReusePortOption = False
) -> None:
    """Only the USSD gateway. No background work (events, webhooks, telemetry) runs here:
    the phones' process serves the phones only."""
    settings = load_settings(serving=True, host=host, port=port, background_workers_enabled=False)
    _serve(settings, ["ussd"], reuse_port)


@serve_app.command("node")
def serve_node(
    host: HostOption = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Chain node gRPC port (default NODE_PORT, 9090).")
    ] = None,
) -> None:
    """Only the chain node: ixo's gRPC query services, reflection and health."""
    _serve(load_settings(serving=True, host=host, node_port=port), ["node"])


@serve_app.command("gateway")
def serve_gateway(
    host: HostOption = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="Chain REST gateway port (default GATEWAY_PORT, 1317)."),
    ] = None,
    grpc_upstream: Annotated[
        str | None,
        typer.Option(
            "--grpc-upstream",
            help="host:port of the node to front (default GATEWAY_GRPC_UPSTREAM; unset: a "
            "node started in this process on NODE_PORT).",
        ),
    ] = None,
    node_port: NodePortOption = None,
    routes_from: Annotated[
        str | None,
        typer.Option(
            "--routes-from",
            help="auto, descriptors or reflection (default GATEWAY_ROUTES_FROM, auto).",
        ),
    ] = None,
) -> None:
    """The chain REST gateway (with its own node unless --grpc-upstream names one)."""
    settings = load_settings(
        serving=True,
        host=host,
        gateway_port=port,
        gateway_grpc_upstream=grpc_upstream,
        node_port=node_port,
        gateway_routes_from=routes_from,
    )
    _serve(settings, ["gateway"])


@contextlib.contextmanager
def _quieter(logger: str, level: int) -> Iterator[None]:
    """`logger` at `level` for a while, then as it was: a caller running the CLI in its own
    process (as the tests do) keeps its lines afterwards."""
    held = logging.getLogger(logger)
    before = held.level
    held.setLevel(level)
    try:
        yield
    finally:
        held.setLevel(before)


@app.command()
def migrate() -> None:
    """Bring the database schema to the newest revision (also done on every start)."""
    from twinhub.db.engine import create_engine
    from twinhub.db.migrate import schema_revisions, upgrade_database

    settings = load_settings()

    async def main() -> None:
        engine = create_engine(settings.storage)
        try:
            before, head = await schema_revisions(engine)
            console.print(f"database at revision {before or '(empty)'}; newest is {head}")
            await upgrade_database(engine)
            after, _ = await schema_revisions(engine)
            console.print(f"[green]database at revision {after}[/green]")
        finally:
            await engine.dispose()

    _run(main())


@ussd_app.command("locks")
def ussd_locks() -> None:
    """The PIN lock-outs in force: key (account:ID, own:ID or phone:NUMBER) and end."""

    async def work(platform: Any) -> Any:
        return await platform.customers.lockouts()

    locks = _with_platform(work)
    for lock in locks:
        until = lock.locked_until.isoformat() if lock.locked_until else "until unlocked"
        print(f"{lock.key}\t{until}\tlock-outs so far: {lock.lockouts}")
    if not locks:
        console.print("no lock-outs in force")


@ussd_app.command("unlock")
def ussd_unlock(
    customer_id: Annotated[str, typer.Argument(help="A customer ID, or a phone number (+E.164).")],
) -> None:
    """Lift the PIN lock-outs of a customer ID, or of a phone (+E.164), after checking who
    is asking."""
    from twinhub.platform import Platform

    settings = load_settings()

    async def main() -> bool:
        platform = Platform(settings)
        try:
            await platform.start()
            return await platform.customers.unlock(customer_id)
        finally:
            await platform.stop()

    if not _run(main()):
        console.print(f"[red]no customer or lock-out for {customer_id}[/red]")
        raise typer.Exit(1)
    _out().print(f"[green]customer {customer_id} unlocked[/green]: its PIN lock-outs are lifted")


def _with_platform(work: Any, background: bool = False) -> Any:
    """Run `work(platform)` against a started platform (migrated database), then stop it.
    A one-shot command runs no background work (no webhook is sent from `keys create`);
    `background` starts it for a command that needs it (the simulator's MQTT ingestion)."""
    from twinhub.platform import Platform

    settings = load_settings(background_workers_enabled=background)

    async def main() -> Any:
        platform = Platform(settings)
        try:
            await platform.start()
            return await work(platform)
        finally:
            await platform.stop()

    return _run(main())


@keys_app.command("create")
def keys_create(
    principal: Annotated[str, typer.Argument(help="The key owner's DID, e.g. did:ixo:org/acme.")],
    role: Annotated[
        list[str],
        typer.Option(
            "--role",
            "-r",
            help="A role (repeatable): admin, writer, reader, or a workflow role held by a "
            "did:key alone: proponent, verifier, registry.",
        ),
    ],
    label: Annotated[str, typer.Option(help="A note to recognise the key by.")] = "",
) -> None:
    """Make an API key; the key is printed once, on standard output, and never again."""
    from twinhub.kernel.errors import Invalid

    try:
        token, view = _with_platform(lambda p: p.api_keys.create(principal, role, label))
    except Invalid as error:
        for detail in error.details:
            console.print(f"[red]{detail.field}[/red]: {detail.error}")
        raise typer.Exit(2) from None
    console.print(f"key {view.key_id} for {view.principal} ({', '.join(view.roles)})")
    typer.echo(token)


@keys_app.command("list")
def keys_list(as_json: JsonOption = False) -> None:
    """Every API key (never the secret): id, owner, roles, label, created, state."""
    rows = [
        {
            "keyId": key.key_id,
            "principal": key.principal,
            "roles": list(key.roles),
            "label": key.label,
            "createdAt": key.created_at.isoformat(),
            "revokedAt": key.revoked_at.isoformat() if key.revoked_at else None,
        }
        for key in _with_platform(lambda p: p.api_keys.list())
    ]
    _show_rows(
        rows,
        as_json,
        "API key",
        [
            ("key id", lambda r: r["keyId"]),
            ("owner", lambda r: r["principal"]),  # in full, folded over lines when narrow
            ("roles", lambda r: ", ".join(r["roles"])),  # wraps between roles
            ("label", lambda r: r["label"]),
            ("created", lambda r: r["createdAt"][:10]),
            ("state", lambda r: f"revoked {r['revokedAt'][:10]}" if r["revokedAt"] else "active"),
        ],
    )


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id.")]) -> None:
    """Revoke a key; it stops working within seconds on every process."""
    if not _with_platform(lambda p: p.api_keys.revoke(key_id)):
        console.print(f"[red]no active key {key_id}[/red]")
        raise typer.Exit(1)
    _out().print(f"[green]key {key_id} revoked[/green]; it stops working within seconds")


@ledger_app.command("verify")
def ledger_verify() -> None:
    """Recompute the hash chain, then replay the ledger and reconcile balances, supplies,
    domains and claims with the tables; exit 1 naming every place that does not fit."""
    from rich.progress import Progress

    from twinhub.services.ledger_state import reconcile

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("verifying the ledger", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        async def check(platform: Any) -> tuple[Any, list[Any]]:
            report = await platform.ledger.verify(progress=advance)
            if not report.ok:
                return report, []
            progress.update(task, description="replaying the ledger", completed=0)
            replayed = await reconcile(
                platform.sessionmaker, progress=lambda h: progress.update(task, completed=h)
            )
            return report, replayed

        report, differences = _with_platform(check)
    if not report.ok:
        console.print(f"[red]ledger damaged[/red] at height {report.bad_height}: {report.problem}")
        raise typer.Exit(1)
    if differences:
        # One line per difference, never folded at the terminal's width: auditors grep them.
        console.print(
            f"[red]tables disagree with the ledger[/red] in {len(differences)} place(s) "
            f"(hash chain intact, {report.checked} transactions):",
            soft_wrap=True,
        )
        for difference in differences:
            console.print(f"  {difference}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print(
        f"[green]ledger intact[/green]: {report.checked} transactions, height {report.height}; "
        "balances, supplies, domains and claims match it"
    )
    # Publish this elsewhere (a report, a notary, a chain): a chain alone cannot reveal a
    # rewrite of everything after a point by someone who controls the database.
    console.print(
        f"head hash at height {report.height}: {report.head_hash}", highlight=False, soft_wrap=True
    )


@app.command()
def demo(
    stoves: Annotated[
        int, typer.Option(min=1, max=5000, help="How many stoves (and customers) to load.")
    ] = 300,
) -> None:
    """Load a clean-cooking programme to try twinhub with; running it again adds nothing."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from twinhub import demo as programme

    # The demo's own thousands of telemetry posts would bury its progress bar in one audit
    # line each; the ledger records every write, and the report below sums them up.
    with (
        _quieter("twinhub.audit", logging.WARNING),
        Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
        ) as bar,
    ):
        task = bar.add_task("loading the demo programme", total=None)

        def advance(label: str, done: int, total: int) -> None:
            bar.update(task, description=f"loading: {label}", completed=done, total=total)

        async def load(platform: Any) -> Any:
            loaded = await programme.load_demo(platform, stoves, advance)
            bar.update(task, description="loading: the last full month of telemetry", completed=0)
            telemetry = await programme.load_telemetry(
                platform, stoves, lambda done, total: advance("telemetry", done, total)
            )
            return loaded, telemetry

        report, telemetry = _with_platform(load)
    made = (
        ", ".join(
            f"{n} {what if n > 1 else what.removesuffix('s')}"  # every kind is a plain plural
            for what, n in report.created.items()
            if n
        )
        or "nothing new"
    )
    out = Console(soft_wrap=True, emoji=False)  # did:key: is no emoji
    out.print(f"[green]demo programme ready[/green] (this run created: {made})")
    out.print(f"  organisation  {programme.ORGANISATION} (controller {programme.OPERATOR})")
    out.print(f"  project       {programme.PROJECT} (verified by {programme.GROUP})")
    out.print(f"  oracle        {programme.ORACLE} (controller {programme.ORACLE_OPERATOR})")
    out.print(f"  collection    {report.collection} (protocol {programme.CLAIM_PROTOCOL})")
    out.print(
        f"  stoves        did:ixo:entity/demo-stove-0001 ... ({stoves}), one per customer, "
        "each with its model, household size and calibrated meter"
    )
    first, last = programme.telemetry_month()
    out.print(
        f"  telemetry     {first.isoformat()} to {last.isoformat()}: {telemetry.accepted} "
        f"readings stored this run ({telemetry.duplicates} already there, "
        f"{telemetry.rejected} rejected from the faulty meters)"
    )
    out.print(
        f"  survey        {report.survey} (household sizes; {report.answers} answers this run)"
    )
    out.print(
        "  workflow      "
        + (", ".join(report.workflow) if report.workflow else "validated already")
        + " (the design document, the verifier's accreditation and validation)"
    )
    for role, key in report.keys.items():  # the DIDs and where their secrets are, never those
        out.print(f"  {role:<13} {key.did}")
        out.print(f"  {'':<13} key {key.key_file}, API key {key.api_key_file}")
    out.print(
        f"Try it: dial as {report.sample_phone} (customer {report.sample_customer}, "
        f"PIN {programme.DEMO_PIN}); the README's walk-through has every command."
    )


# -- telemetry (issue 12) ------------------------------------------------------------------
CLI_OPERATOR = "did:ixo:org/twinhub-cli"


def _operator() -> Any:
    from twinhub.kernel.principals import Principal

    return Principal(CLI_OPERATOR, frozenset({"admin"}))


def _device_call(work: Any) -> Any:
    """Run a device-token operation; service errors become a message and exit code 1."""
    from twinhub.kernel.errors import ServiceError

    try:
        return _with_platform(work)
    except ServiceError as error:
        console.print(f"[red]{error.message}[/red]")
        for detail in error.details:
            console.print(f"  {detail.field}: {detail.error}")
        raise typer.Exit(1) from None


@devices_app.command("create")
def devices_create(
    did: Annotated[str, typer.Argument(help="The physical twin's DID.")],
    label: Annotated[str, typer.Option(help="A note to recognise the device by.")] = "",
) -> None:
    """Enrol a device: its token is printed once, on standard output, and never again."""
    token, view = _device_call(lambda p: p.device_tokens.create(did, _operator(), label))
    console.print(f"device token {view.id} for {view.domain}")
    typer.echo(token)


@devices_app.command("list")
def devices_list(
    did: Annotated[str, typer.Argument(help="The physical twin's DID.")],
    as_json: JsonOption = False,
) -> None:
    """A twin's device tokens (never the secret): id, label, created, state."""
    views = _device_call(lambda p: p.device_tokens.list(did, _operator()))
    _show_rows(
        [view.as_record() for view in views],
        as_json,
        "device token",
        [
            ("token id", lambda r: r["id"]),
            ("label", lambda r: r["label"]),
            ("created", lambda r: r["createdAt"][:10]),
            ("state", lambda r: f"revoked {r['revokedAt'][:10]}" if r["revokedAt"] else "active"),
        ],
    )


@devices_app.command("rotate")
def devices_rotate(
    did: Annotated[str, typer.Argument(help="The physical twin's DID.")],
    token_id: Annotated[str, typer.Argument(help="The token's id.")],
) -> None:
    """Revoke a token and print its successor (once)."""
    token, view = _device_call(lambda p: p.device_tokens.rotate(did, token_id, _operator()))
    console.print(f"token {token_id} revoked; new device token {view.id}")
    typer.echo(token)


@devices_app.command("revoke")
def devices_revoke(
    did: Annotated[str, typer.Argument(help="The physical twin's DID.")],
    token_id: Annotated[str, typer.Argument(help="The token's id.")],
) -> None:
    """Revoke a device token; it stops working within seconds on every process."""
    _device_call(lambda p: p.device_tokens.revoke(did, token_id, _operator()))
    _out().print(f"[green]device token {token_id} of {did} revoked[/green]")


def _telemetry_bar() -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
    )


@app.command()
def simulate(
    stoves: Annotated[int, typer.Option(min=1, max=100_000, help="How many stoves.")] = 20,
    days: Annotated[int, typer.Option(min=1, max=3660, help="How many days, up to today.")] = 7,
    mqtt: Annotated[
        bool, typer.Option("--mqtt", help="Publish to the MQTT_URL broker instead of HTTP.")
    ] = False,
    url: Annotated[
        str | None,
        typer.Option(help="A running registry API to post to (default: this process's)."),
    ] = None,
) -> None:
    """Drive simulated clean-cooking households through the real ingestion paths."""
    from twinhub.simulator import SIM_PROJECT
    from twinhub.simulator import simulate as run_simulation

    settings = load_settings()
    if mqtt and settings.telemetry.mqtt_url is None:
        console.print("[red]--mqtt needs MQTT_URL[/red] (for example mqtt://127.0.0.1:1883)")
        raise typer.Exit(2)
    with _telemetry_bar() as bar:
        task = bar.add_task(f"{stoves} stoves, {days} days", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        totals = _with_platform(lambda p: run_simulation(p, stoves, days, mqtt, advance, url=url))
    Console(soft_wrap=True).print(
        f"[green]simulated[/green] {totals.batches} batches: {totals.accepted} readings stored, "
        f"{totals.duplicates} duplicates, {totals.rejected} rejected, {totals.failed} failed; "
        f"project {SIM_PROJECT}"
    )


@app.command()
def config() -> None:
    """Print the effective settings, secrets masked."""
    settings = load_settings()
    for name, value in settings.environment_values().items():
        shown = "********" if "Secret" in type(value).__name__ else value
        typer.echo(f"{name}={shown if shown is not None else ''}")


@app.command()
def version() -> None:
    """Print the installed version of twinhub."""
    typer.echo(__version__)


def main() -> None:
    app(prog_name="twinhub")


# -- households (issue 17) -------------------------------------------------------------------
customers_app = _group(
    "Households (USSD customers): find, show, unlock, hand stoves to them.",
    no_args_is_help=True,
)
app.add_typer(customers_app, name="customers")


def _customer_call(work: Any) -> Any:
    """Run a customer operation; service errors become a message and exit code 1."""
    return _device_call(work)


async def _customer_or_fail(platform: Any, customer_id: str) -> Any:
    from twinhub.kernel.errors import NotFound
    from twinhub.services.customer_ids import is_valid_customer_id

    found = None
    if is_valid_customer_id(customer_id):
        found = await platform.customers.by_customer_id(customer_id)
    if found is None:
        raise NotFound(f"No customer {customer_id}.")
    return found


@customers_app.command("find")
def customers_find(
    who: Annotated[str, typer.Argument(help="A phone number (+E.164) or a customer ID.")],
) -> None:
    """Find a customer by phone number or customer ID: ID, name, phone, locked or not."""

    async def work(platform: Any) -> Any:
        customers = platform.customers
        found = await (customers.by_phone(who) if who.startswith("+") else None)
        if found is None and not who.startswith("+"):
            found = await customers.by_customer_id(who)
        return found, (await customers.locks_of(found)) if found else []

    found, locks = _customer_call(work)
    if found is None:
        console.print(f"[red]no customer {who}[/red]")
        raise typer.Exit(1)
    state = "locked out" if locks else "not locked"
    typer.echo(f"{found.customer_id}\t{found.full_name}\t{found.phone_number}\t{state}")


@customers_app.command("show")
def customers_show(
    customer_id: Annotated[str, typer.Argument(help="The household's customer ID.")],
) -> None:
    """A customer: their account, lock-outs, stoves and latest claims."""
    from twinhub.services.ownership import stoves_of_customer

    async def work(platform: Any) -> Any:
        customer = await _customer_or_fail(platform, customer_id)
        return (
            customer,
            await platform.customers.locks_of(customer),
            await stoves_of_customer(platform.domains, customer_id),
            await platform.stoves.claims_of(customer_id, None, 10),
        )

    customer, locks, stoves, claims = _customer_call(work)
    typer.echo(f"customer {customer.customer_id}: {customer.full_name}, {customer.phone_number}")
    typer.echo(f"  since {customer.created_at:%Y-%m-%d}")
    for lock in locks:
        until = lock.locked_until.isoformat() if lock.locked_until else "until unlocked"
        typer.echo(f"  locked ({lock.key.split(':', 1)[0]}) {until}")
    if not locks:
        typer.echo("  not locked")
    typer.echo(f"stoves: {len(stoves)}")
    for stove in stoves:
        name = (stove.get("metadata") or {}).get("name") or ""
        typer.echo(f"  {stove['did']}\t{name}\t{stove['status']}")
    typer.echo(f"claims: {claims.older + len(claims.items)} (newest first)")
    for line in claims.items:
        typer.echo(f"  {line.id}\t{line.status}\t{line.report_type or ''}\t{line.asset or ''}")


@customers_app.command("unlock")
def customers_unlock(
    customer_id: Annotated[str, typer.Argument(help="The household's customer ID.")],
) -> None:
    """Lift every PIN lock-out keeping the customer out, their phone's included."""

    async def work(platform: Any) -> bool:
        customer = await _customer_or_fail(platform, customer_id)
        return bool(await platform.customers.unlock_customer(customer))

    if not _customer_call(work):
        console.print(f"[yellow]customer {customer_id} was not locked out[/yellow]")
        raise typer.Exit(1)
    _out().print(
        f"[green]customer {customer_id} unlocked[/green]: every PIN lock-out of the account "
        "and of its phone is lifted"
    )


def _assign(
    stove: str, customer_id: str, expected: str | None, free_only: bool = False
) -> dict[str, Any]:
    from twinhub.services.ownership import assign_stove

    async def work(platform: Any) -> Any:
        await _customer_or_fail(platform, customer_id)
        return await assign_stove(
            platform.domains, stove, customer_id, _operator(), expected, free_only=free_only
        )

    result: dict[str, Any] = _customer_call(work)
    return result


@customers_app.command("assign-stove")
def customers_assign_stove(
    stove: Annotated[str, typer.Argument(help="The stove's DID.")],
    customer_id: Annotated[str, typer.Argument(help="The household's customer ID.")],
) -> None:
    """Give a stove to a household (sets its ownerCustomerId); a stove that belongs to
    another household is refused: use move-stove."""
    record = _assign(stove, customer_id, None, free_only=True)
    _out().print(
        f"[green]stove {stove} now belongs to customer {customer_id}[/green] "
        f"(the stove's record is at version {record['version']})"
    )


@customers_app.command("move-stove")
def customers_move_stove(
    stove: Annotated[str, typer.Argument(help="The stove's DID.")],
    to: Annotated[str, typer.Option("--to", help="The new household's customer ID.")],
    from_: Annotated[
        str | None,
        typer.Option("--from", help="The household expected to hold it now (checked)."),
    ] = None,
) -> None:
    """Move a stove to another household; with --from, only if that household holds it."""
    record = _assign(stove, to, from_)
    _out().print(
        f"[green]stove {stove} moved to customer {to}[/green] "
        f"(the stove's record is at version {record['version']})"
    )


# -- support: the stove problems households report ------------------------------------------
support_app = _group(
    "The support queue: stove problems households reported over USSD.",
    no_args_is_help=True,
)
app.add_typer(support_app, name="support")


@support_app.command("list")
def support_list(
    status: Annotated[
        str | None,
        typer.Option("--status", help="open or resolved (default: open); all: both."),
    ] = "open",
    stove: Annotated[str | None, typer.Option("--stove", help="Only this stove's (DID).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Reported stove problems, oldest first: reference, status, kind, stove, customer,
    reported, and for resolved ones who resolved them and how."""
    wanted = None if status in (None, "all") else status

    async def work(platform: Any) -> list[Any]:
        from twinhub.db.visibility import EVERYTHING  # the CLI's operator sees every stove

        found, cursor = [], None
        while True:
            page = await platform.stove_care.problems(wanted, stove, cursor, 100, viewer=EVERYTHING)
            found += page.items
            cursor = page.next_cursor
            if cursor is None:
                return found

    problems = _device_call(work)
    if as_json:
        _print_json([p.as_json() for p in problems])
        return
    for p in problems:
        line = [p.reference, p.status, p.kind, p.stove, p.customer_id, p.reported_at.isoformat()]
        if p.resolved_at is not None:
            line += [p.resolved_at.isoformat(), p.resolved_by or "", p.note or ""]
        typer.echo("\t".join(line))
    console.print(f"{len(problems)} problem{'' if len(problems) == 1 else 's'}")


@support_app.command("resolve")
def support_resolve(
    reference: Annotated[str, typer.Argument(help="The problem's reference.")],
    note: Annotated[str, typer.Option("--note", help="How the problem was resolved.")],
) -> None:
    """Resolve an open stove problem (as the CLI operator), saying how."""
    from rich.markup import escape

    from twinhub.db.visibility import EVERYTHING  # the CLI's operator sees every stove

    view = _device_call(
        lambda p: p.stove_care.resolve_problem(reference, _operator().did, note, viewer=EVERYTHING)
    )
    _out().print(
        f"[green]problem {view.reference} resolved[/green] ({view.kind}, stove {view.stove}); "
        f"note: {escape(view.note or '')}"
    )


# -- oracle (issue 18) ---------------------------------------------------------------------
oracle_app = _group("The claim oracle: monitoring periods and their reports.", no_args_is_help=True)
app.add_typer(oracle_app, name="oracle")


@serve_app.command("oracle")
def serve_oracle() -> None:
    """Only the claim oracle: evaluates submitted claims, on this machine or another (any
    number of oracle processes share the work through leases). No other background work."""
    from twinhub.platform import Platform
    from twinhub.server import run, serve
    from twinhub.startup import StartupError

    settings = load_settings(serving=True, background_workers_enabled=False)

    async def main() -> None:
        try:
            platform = Platform(settings)
        except RuntimeError as error:
            console.print(f"[red]refusing to start[/red]: {error}")
            raise SystemExit(2) from None
        await serve(platform, [], None, background=[platform.oracle.run])

    try:
        run(main)
    except StartupError as error:
        _startup_failed(error)


def _day(value: str, option: str) -> Any:
    from datetime import date

    try:
        return date.fromisoformat(value)
    except ValueError:
        console.print(f"[red]{option} expects a date such as 2026-10-01[/red]")
        raise typer.Exit(2) from None


@oracle_app.command("run-period")
def oracle_run_period(
    project: Annotated[str, typer.Argument(help="The project's DID.")],
    start: Annotated[str, typer.Option("--from", help="First day (UTC), e.g. 2026-10-01.")],
    end: Annotated[str, typer.Option("--to", help="Last day (UTC), inclusive.")],
) -> None:
    """Compute a project's monitoring period as a draft (a second run recomputes the draft;
    a submitted period stays as frozen); prints the period as JSON. Credits come with the
    workflow: `twinhub period submit`, `verify`, `issue`."""
    import orjson

    from twinhub.kernel.errors import ServiceError
    from twinhub.oracle.monitoring import DRAFT_STEPS

    first, last = _day(start, "--from"), _day(end, "--to")

    async def work(platform: Any) -> Any:
        with _telemetry_bar() as bar:  # on stderr: a large programme takes minutes
            task = bar.add_task("starting", total=None)

            async def progress(step: str, done: int, total: int) -> None:
                shown = DRAFT_STEPS.get(step, step)
                bar.update(task, description=shown, completed=done, total=total)

            return await platform.monitoring.run(project, first, last, _operator(), progress)

    try:
        view, created = _with_platform(work)
    except ServiceError as error:
        details = "; ".join(f"{d.field}: {d.error}" for d in error.details)
        console.print(f"[red]{error.message}[/red]" + (f" ({details})" if details else ""))
        raise typer.Exit(1) from None
    print(orjson.dumps(view, option=orjson.OPT_INDENT_2).decode())
    console.print(
        ("draft computed" if created else "draft recomputed (or frozen since)")
        + "; nothing is minted until the registry issues it"
    )


@oracle_app.command("keep-digests")
def oracle_keep_digests(
    start: Annotated[str, typer.Option("--from", help="First day (UTC), e.g. 2026-10-01.")],
    end: Annotated[str, typer.Option("--to", help="Last day (UTC), inclusive.")],
) -> None:
    """Digest and keep every stove-day's readings of the closed days from `--from` to `--to`
    (what the daily pass does for the last ORACLE_DAY_DIGESTS_DAYS days), so the first draft
    of a period among them reads one small row a stove-day instead of its readings: for a
    deployment's history, once. Days already kept and unchanged are skipped."""
    from datetime import date

    from twinhub.kernel.clock import utcnow

    first, last = _day(start, "--from"), _day(end, "--to")
    today = utcnow().date()
    if first > last:
        console.print("[red]--from must not be after --to[/red]")
        raise typer.Exit(2)
    if last >= today:
        console.print(f"[red]--to must be a closed day, before today ({today.isoformat()})[/red]")
        raise typer.Exit(2)
    days = (last - first).days + 1

    async def work(platform: Any) -> tuple[int, int]:
        with _telemetry_bar() as bar:  # on stderr: a year of a large programme takes minutes
            task = bar.add_task(f"digesting from {first.isoformat()}", total=days)

            async def each(day: date) -> None:
                bar.update(task, description=f"digested {day.isoformat()}", advance=1)

            return await platform.day_digests.fill(first, last, each)

    kept, made = _with_platform(work)
    console.print(f"{made:,} stove-days digested and kept, {kept:,} already kept, over {days} days")


def _require_database() -> None:
    """Stop with a message (exit 2) unless the configured database exists, answers and
    holds twinhub's schema at this program's revision: a read-only command never creates
    or migrates one (an auditor running it from another folder would get an empty
    `./data` and a report full of differences)."""
    from pathlib import Path

    from twinhub.db.engine import create_engine, sqlite_file
    from twinhub.db.migrate import schema_problem

    storage = load_settings(background_workers_enabled=False).storage
    path = sqlite_file(storage.resolved_database_url)

    if path is not None and not Path(path).is_file():  # SQLite would make one on connecting
        _no_database(f"no database file at {path}")

    async def problem() -> str | None:
        engine = create_engine(storage)
        try:
            return await schema_problem(engine)
        finally:
            await engine.dispose()

    found = _run(problem())
    if found is not None:
        _no_database(found)


def _no_database(problem: str) -> None:
    console.print(
        f"[red]no twinhub database to check against: {problem}[/red] "
        "(set DATABASE_URL or DATA_DIR to the registry's database)"
    )
    raise typer.Exit(2)


@oracle_app.command("verify-report")
def oracle_verify_report(
    file: Annotated[str, typer.Argument(help="A monitoring report (JSON) as the API gave it.")],
) -> None:
    """Recompute a monitoring report from the stored telemetry; print each difference and
    exit 1 when there is any."""
    from pathlib import Path

    import orjson

    try:
        report = orjson.loads(Path(file).read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        console.print(f"[red]cannot read {file}: {error}[/red]")
        raise typer.Exit(2) from None

    async def work(platform: Any) -> Any:
        return await platform.monitoring.verify(report)

    _require_database()
    differences = _with_platform(work)
    for difference in differences:
        print(difference)
    if differences:
        console.print(f"[red]{len(differences)} difference(s)[/red]")
        raise typer.Exit(1)
    console.print("[green]the report matches the stored telemetry[/green]")


@oracle_app.command("verify-evidence")
def oracle_verify_evidence(
    file: Annotated[str, typer.Argument(help="An evidence bundle (JSON) as the API gave it.")],
) -> None:
    """Check a monitoring period's evidence bundle from the bundle alone (no database, no
    network): every signature and digest of its chain, the readings behind its frozen
    inputs, and every credit recomputed. Prints each difference; exits 1 when there is any."""
    from pathlib import Path

    import orjson

    from twinhub.mrv.evidence_bundle import verify_bundle

    try:
        bundle = orjson.loads(Path(file).read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        console.print(f"[red]cannot read {file}: {error}[/red]")
        raise typer.Exit(2) from None
    differences = verify_bundle(bundle)
    for difference in differences:
        print(difference)
    if differences:
        console.print(f"[red]{len(differences)} difference(s)[/red]")
        raise typer.Exit(1)
    console.print("[green]the evidence checks: signatures, digests and every credit[/green]")


# -- the verification workflow's signed steps (issue 29) ------------------------------------
period_app = _group(
    "A monitoring period's signed steps: submit, verify, issue.", no_args_is_help=True
)
project_app = _group(
    "A project's accreditation of verifiers and its validation.", no_args_is_help=True
)
app.add_typer(period_app, name="period")
app.add_typer(project_app, name="project")
KeyFile = Annotated[
    str, typer.Option("--key", help="The role's key file (made by `twinhub keys new`).")
]
UrlOption = Annotated[
    str,
    typer.Option(
        "--url",
        envvar="TWINHUB_URL",
        help="The registry API's address (default http://127.0.0.1:8000).",
    ),
]
ApiKeyOption = Annotated[
    str,
    typer.Option("--api-key", envvar="TWINHUB_API_KEY", help="The role's API key."),
]
DEFAULT_URL = "http://127.0.0.1:8000"
ProjectArg = Annotated[str, typer.Argument(help="The project's DID.")]
PeriodArg = Annotated[int, typer.Argument(help="The monitoring period's number.")]


@keys_app.command("new")
def keys_new(
    file: Annotated[
        str, typer.Argument(help="Where to write the new key (a file that must not exist yet).")
    ],
) -> None:
    """Make a role's signing key (Ed25519) in FILE, readable by you alone; prints its DID
    (did:key), which an admin gives the role: `twinhub keys create DID --role verifier`."""
    import os
    import secrets
    from pathlib import Path

    import orjson

    from twinhub.security.signing import Issuer

    seed = secrets.token_bytes(32)
    did = Issuer(seed).did
    path = Path(file)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        console.print(f"[red]cannot write {file}: {error.strerror}[/red]")
        raise typer.Exit(2) from None
    with os.fdopen(descriptor, "wb") as out:
        out.write(orjson.dumps({"type": "Ed25519", "did": did, "seed": seed.hex()}))
    console.print(f"signing key written to {file} (readable by you alone); its DID:")
    typer.echo(did)


def _refuse(message: str, code: int) -> NoReturn:
    """One line on standard error (however long, whatever the server sent), then exit
    `code`: 2 when the command could not do its work (no registry, no usable key), 1 when
    the registry refused the step."""
    from rich.text import Text

    console.print(Text(" ".join(message.split()), style="red"), soft_wrap=True)
    raise typer.Exit(code)


def _signer(file: str) -> Any:
    from pathlib import Path

    import orjson

    from twinhub.security.signing import Issuer

    if not file:
        _refuse("no key file: give the role's key file with --key (twinhub keys new)", 2)
    try:
        stored = orjson.loads(Path(file).read_bytes())
        signer = Issuer(bytes.fromhex(stored["seed"]))
    except OSError as error:
        _refuse(f"cannot read the key file {file}: {error.strerror or error}", 2)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        _refuse(
            f"{file} is not a key file: expected the JSON that `twinhub keys new` writes "
            '({"did": ..., "seed": <64 hex>})',
            2,
        )
    if stored.get("did") not in (None, signer.did):
        _refuse(f"{file} is damaged: its did is not the one its seed makes", 2)
    return signer


def _signed_step(
    url: str, api_key: str, key: str, request: str, body: dict[str, Any], post: str, done: str
) -> None:
    """Ask the registry for the step's unsigned credential, sign it with the key file,
    post it; print the answer (and `done`, what happened, on standard error), or one line
    saying why not (exit 1 when the registry refused, 2 when the command could not ask it)."""
    import httpx
    import orjson

    signer = _signer(key)
    if not api_key:
        _refuse("no API key: give the role's API key with --api-key or TWINHUB_API_KEY", 2)
    address = url or DEFAULT_URL
    headers = {"Authorization": f"Bearer {api_key}"}
    try:
        with httpx.Client(base_url=address, headers=headers, timeout=60) as client:
            offered = client.post(request, json=body)
            answer = offered
            if offered.status_code == 200:
                try:
                    credential = offered.json()
                    issuer, valid_from = credential["issuer"], credential["validFrom"]
                except (ValueError, KeyError, TypeError):
                    _refuse(f"{address} answered no credential: is it a twinhub registry?", 2)
                if issuer != signer.did:
                    _refuse(
                        f"the key file {key} is {signer.did}, but the API key acts as "
                        f"{issuer}: sign with the key file of the API key's own DID",
                        2,
                    )
                signed = signer.sign(credential, valid_from)
                answer = client.post(post, json={"credential": signed})
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        _refuse(f"cannot reach the registry at {address}: {error or type(error).__name__}", 2)
    if answer.status_code >= 400:
        try:
            problem = answer.json()["error"]
            details = "; ".join(f"{d['field']}: {d['error']}" for d in problem["details"])
            message = f"{problem['message']}" + (f" ({details})" if details else "")
        except (ValueError, KeyError, TypeError):
            message = f"{answer.status_code}: {answer.text[:300]}"
        _refuse(f"refused ({answer.status_code}): {message}", 1)
    print(orjson.dumps(answer.json(), option=orjson.OPT_INDENT_2).decode())
    console.print(f"[green]{done}[/green], signed by {signer.did}", highlight=False)


def _period_path(project: str, period: int) -> str:
    return f"/v1/domains/{project}/monitoring-periods/{period}"


@project_app.command("accredit")
def project_accredit(
    project: ProjectArg,
    verifier: Annotated[str, typer.Argument(help="The verifier's DID (a did:key).")],
    key: KeyFile,
    url: UrlOption = "",
    api_key: ApiKeyOption = "",
) -> None:
    """The registry accredits VERIFIER (a did:key) for PROJECT, signed with its key."""
    _signed_step(
        url,
        api_key,
        key,
        f"/v1/domains/{project}/credential-request",
        {"step": "accreditation", "verifier": verifier},
        f"/v1/domains/{project}/accreditations",
        f"{verifier} accredited for {project}",
    )


@project_app.command("validate")
def project_validate(
    project: ProjectArg, key: KeyFile, url: UrlOption = "", api_key: ApiKeyOption = ""
) -> None:
    """An accredited verifier validates PROJECT's newest project document, signed."""
    _signed_step(
        url,
        api_key,
        key,
        f"/v1/domains/{project}/credential-request",
        {"step": "validation"},
        f"/v1/domains/{project}/validation",
        f"{project} validated",
    )


@period_app.command("submit")
def period_submit(
    project: ProjectArg,
    period: PeriodArg,
    key: KeyFile,
    url: UrlOption = "",
    api_key: ApiKeyOption = "",
) -> None:
    """The proponent submits a draft period: its inputs freeze, its stove-days are held."""
    base = _period_path(project, period)
    _signed_step(
        url,
        api_key,
        key,
        f"{base}/credential-request",
        {"step": "submission"},
        f"{base}/submit",
        f"monitoring period {period} of {project} submitted",
    )


@period_app.command("verify")
def period_verify(
    project: ProjectArg,
    period: PeriodArg,
    key: KeyFile,
    outcome: Annotated[str, typer.Option(help="The verdict: approved, rejected or corrections.")],
    finding: Annotated[list[str] | None, typer.Option(help="A finding (repeatable).")] = None,
    sample: Annotated[
        list[str] | None, typer.Option(help="A stove sampled, by its DID (repeatable).")
    ] = None,
    url: UrlOption = "",
    api_key: ApiKeyOption = "",
) -> None:
    """An accredited verifier's verdict on a submitted period, signed."""
    base = _period_path(project, period)
    body = {
        "step": "verification",
        "outcome": outcome,
        "findings": finding or [],
        "sampledStoves": sample or [],
    }
    _signed_step(
        url,
        api_key,
        key,
        f"{base}/credential-request",
        body,
        f"{base}/verification",
        f"monitoring period {period} of {project} verified: {outcome}",
    )


@period_app.command("issue")
def period_issue(
    project: ProjectArg,
    period: PeriodArg,
    key: KeyFile,
    url: UrlOption = "",
    api_key: ApiKeyOption = "",
) -> None:
    """The registry issues a verified period: its credits are minted to the proponent."""
    base = _period_path(project, period)
    _signed_step(
        url,
        api_key,
        key,
        f"{base}/credential-request",
        {"step": "issuance"},
        f"{base}/issuance",
        f"monitoring period {period} of {project} issued",
    )


# -- programme views: stoves, claims, monitoring periods, webhooks (issue 32) -----------------
stoves_app = _group(
    "The stoves of the programme (physical twins): list them, show one.", no_args_is_help=True
)
claims_app = _group("Claims: list them, show one with its evaluations.", no_args_is_help=True)
webhooks_app = _group("Webhook subscriptions: list them, show one.", no_args_is_help=True)
app.add_typer(stoves_app, name="stoves")
app.add_typer(claims_app, name="claims")
app.add_typer(webhooks_app, name="webhooks")
STOVE_PROTOCOL = "did:ixo:protocol/clean-cooking"


def _read(work: Any) -> Any:
    """A read for a list or show command: the database must be there already (a read never
    makes one), and service errors become a message and exit code 1."""
    _require_database()
    return _device_call(work)


async def _pages(fetch: Any, limit: int) -> tuple[list[Any], bool]:
    """Up to `limit` items of a paged service call `fetch(cursor, size)`, and whether
    there were more."""
    found: list[Any] = []
    cursor = None
    while len(found) <= limit:
        page = await fetch(cursor, min(500, limit + 1 - len(found)))
        found += page.items
        cursor = page.next_cursor
        if cursor is None:
            break
    return found[:limit], len(found) > limit or cursor is not None


def _stove_row(record: dict[str, Any]) -> dict[str, Any]:
    properties = record.get("properties") or {}
    projects = [r["target"] for r in record.get("relationships", []) if r["type"] == "project"]
    return {
        "did": record["did"],
        "name": (record.get("metadata") or {}).get("name"),
        "serial": properties.get("serialNumber"),
        "customer": properties.get("ownerCustomerId"),
        "project": projects[0] if projects else None,
        "status": record["status"],
        "verified": record["verified"],
    }


STOVE_COLUMNS = [
    ("stove", lambda r: r["did"]),
    ("name", lambda r: r["name"]),
    ("serial", lambda r: r["serial"]),
    ("customer", lambda r: r["customer"]),
    ("status", lambda r: r["status"]),
    ("verified", lambda r: "yes" if r["verified"] else "no"),
]


@stoves_app.command("list")
def stoves_list(
    customer: Annotated[
        str | None, typer.Option("--customer", help="Only the stoves of this customer ID.")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="Only active or only deactivated stoves.")
    ] = None,
    verified: Annotated[
        bool | None,
        typer.Option("--verified/--unverified", help="Only verified or only unverified stoves."),
    ] = None,
    protocol: Annotated[
        str, typer.Option("--protocol", help="The stoves' protocol (DID).")
    ] = STOVE_PROTOCOL,
    limit: LimitOption = 100,
    as_json: JsonOption = False,
) -> None:
    """The stoves, oldest first: DID, name, serial number, customer, status, verified."""
    from twinhub.services.domains import DomainFilter

    where = DomainFilter(protocol=protocol, owner=customer, status=status, verified=verified)

    async def work(platform: Any) -> Any:
        return await _pages(lambda c, n: platform.domains.list(where, c, n), limit)

    records, more = _read(work)
    _show_rows([_stove_row(r) for r in records], as_json, "stove", STOVE_COLUMNS, more)


def _twin_show(did: str, as_json: bool, noun: str) -> None:
    """A physical twin (a stove, a device): its record, latest telemetry, device tokens."""

    async def work(platform: Any) -> Any:
        record = await platform.domains.get(did)
        state = await platform.telemetry.state(did)
        tokens = await platform.device_tokens.list(did, _operator())
        return record, state, [t.as_record() for t in tokens]

    record, state, tokens = _read(work)
    if as_json:
        _print_json({noun: record, "telemetry": state, "deviceTokens": tokens})
        return
    row = _stove_row(record)
    out = _out()
    out.print(f"{noun} {row['did']}: {row['name'] or '(no name)'}", markup=False)
    for label, value in (
        ("serial", row["serial"]),
        ("customer", row["customer"]),
        ("project", row["project"]),
        ("status", f"{row['status']}, {'verified' if row['verified'] else 'not verified'}"),
        ("model", (record.get("properties") or {}).get("stoveModel")),
        ("readings", state.get("readings")),
        ("last seen", state.get("lastSeen")),
        ("online", None if state.get("lastSeen") is None else "yes" if state["online"] else "no"),
        ("meter total", state.get("meterTotal")),
        (
            "device tokens",
            f"{sum(1 for t in tokens if not t['revokedAt'])} active of {len(tokens)}",
        ),
    ):
        if value is not None:
            out.print(f"  {label:<14}{value}", markup=False)


@stoves_app.command("show")
def stoves_show(
    did: Annotated[str, typer.Argument(help="The stove's DID.")],
    as_json: JsonOption = False,
) -> None:
    """A stove: its record, its latest telemetry and its device tokens."""
    _twin_show(did, as_json, "stove")


@devices_app.command("show")
def devices_show(
    did: Annotated[str, typer.Argument(help="The physical twin's DID.")],
    as_json: JsonOption = False,
) -> None:
    """A physical twin (any device): its record, its latest telemetry and its tokens."""
    _twin_show(did, as_json, "device")


CLAIM_COLUMNS = [
    ("claim", lambda r: r["id"]),
    ("collection", lambda r: r["collection"]),
    ("stove", lambda r: r["asset"]),
    ("status", lambda r: r["status"]),
    ("report", lambda r: (r.get("data") or {}).get("reportType")),
    ("submitted", lambda r: (r["submittedAt"] or "")[:16]),
    ("amount", lambda r: r["amount"]),
]


@claims_app.command("list")
def claims_list(
    collection: Annotated[
        int | None, typer.Option("--collection", help="Only the claims of this collection.")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            help="Only claims in this state: pending, approved, rejected, flagged, disputed "
            "or invalidated.",
        ),
    ] = None,
    stove: Annotated[
        str | None, typer.Option("--stove", help="Only the claims about this stove (DID).")
    ] = None,
    limit: LimitOption = 100,
    as_json: JsonOption = False,
) -> None:
    """Claims, oldest first: id, collection, stove, status, report, submitted, amount."""
    from twinhub.services.claims import ClaimFilter

    where = ClaimFilter(collection=collection, status=status, asset=stove)

    async def work(platform: Any) -> Any:
        return await _pages(lambda c, n: platform.claims.views.claims(where, c, n), limit)

    views, more = _read(work)
    _show_rows(views, as_json, "claim", CLAIM_COLUMNS, more)


@claims_app.command("show")
def claims_show(
    claim_id: Annotated[str, typer.Argument(help="The claim's id.")],
    as_json: JsonOption = False,
) -> None:
    """A claim: what it says, its state and every evaluation, with the reasons given."""
    view = _read(lambda p: p.claims.views.claim(claim_id))
    if as_json:
        _print_json(view)
        return
    out = _out()
    out.print(f"claim {view['id']} ({view['status']})", markup=False)
    for label, value in (
        ("collection", view["collection"]),
        ("by", view["agent"]),
        ("stove", view["asset"]),
        ("submitted", view["submittedAt"]),
        ("evaluated", view["evaluatedAt"]),
        ("amount", view["amount"]),
        ("reason", view["reason"]),
    ):
        if value is not None:
            out.print(f"  {label:<12}{value}", markup=False)
    for name, value in (view.get("data") or {}).items():
        out.print(f"  data.{name}: {value}", markup=False)
    for e in view.get("evaluations", []):
        said = f" ({e['reason']})" if e["reason"] else ""
        out.print(f"  evaluated {e['status']} by {e['by']} at {e['at']}{said}", markup=False)


PERIOD_COLUMNS = [
    ("period", lambda r: r["id"]),
    ("from", lambda r: r["from"]),
    ("to", lambda r: r["to"]),
    ("state", lambda r: r["state"]),
    ("credits", lambda r: r["credits"]),
    ("claim", lambda r: r["claim"]),
]


@period_app.command("list")
def period_list(
    project: Annotated[str, typer.Argument(help="The project's DID.")],
    as_json: JsonOption = False,
) -> None:
    """A project's monitoring periods, oldest first: id, days, state, credits, claim."""
    periods = _read(lambda p: p.monitoring.periods(project))
    _show_rows(periods, as_json, "monitoring period", PERIOD_COLUMNS)


@period_app.command("show")
def period_show(
    project: Annotated[str, typer.Argument(help="The project's DID.")],
    period: Annotated[int, typer.Argument(help="The period's number.")],
    as_json: JsonOption = False,
) -> None:
    """A monitoring period: its days, state, credits, totals and the verifier's findings."""
    view = _read(lambda p: p.monitoring.period(project, period))
    if as_json:
        _print_json(view)
        return
    out = _out()
    out.print(
        f"monitoring period {view['id']} of {view['project']}: {view['from']} to {view['to']}, "
        f"{view['state']}",
        markup=False,
    )
    for label, value in (
        ("proponent", view["proponent"]),
        ("credits", view["credits"]),
        ("claim", view["claim"]),
        ("report digest", view["reportDigest"]),
    ):
        if value is not None:
            out.print(f"  {label:<14}{value}", markup=False)
    for name, value in (view.get("totals") or {}).items():
        out.print(f"  totals.{name}: {value}", markup=False)
    for finding in view.get("findings") or []:
        out.print(f"  finding: {finding}", markup=False)


WEBHOOK_COLUMNS = [
    ("webhook", lambda r: r["id"]),
    ("url", lambda r: r["url"]),
    ("events", lambda r: ", ".join(r["events"]) or "all"),
    ("description", lambda r: r["description"]),
    ("created", lambda r: (r["createdAt"] or "")[:10]),
]


@webhooks_app.command("list")
def webhooks_list(as_json: JsonOption = False) -> None:
    """The webhook subscriptions (never their secrets): id, URL, events, description."""
    views = _read(lambda p: p.events.webhooks.list(_operator()))
    _show_rows(views, as_json, "webhook", WEBHOOK_COLUMNS)


@webhooks_app.command("show")
def webhooks_show(
    webhook_id: Annotated[str, typer.Argument(help="The webhook's id (wh_...).")],
    as_json: JsonOption = False,
) -> None:
    """A webhook subscription and how many of its deliveries are in each state."""
    view = _read(lambda p: p.events.webhooks.get(webhook_id, _operator()))
    if as_json:
        _print_json(view)
        return
    out = _out()
    out.print(f"webhook {view['id']}: {view['url']}", markup=False)
    out.print(f"  events        {', '.join(view['events']) or 'all'}", markup=False)
    if view.get("description"):
        out.print(f"  description   {view['description']}", markup=False)
    counts = ", ".join(f"{n} {status}" for status, n in view["deliveries"].items())
    out.print(f"  deliveries    {counts}", markup=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
