"""A TCP proxy for outage tests: forwards a local port to a real server, and can cut it.

`cut()` closes the listener (new connections are refused) and aborts every live connection
on both sides; `restore()` listens again on the same port, so clients configured with the
proxy's address reconnect by themselves.

    async with TcpProxy("127.0.0.1", 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/db"
        await proxy.cut()
        await proxy.restore()
        proxy.hang()      # connections stay open but nothing passes: a hung server
        proxy.unhang()
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

CHUNK = 65536


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1") -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.listen_host = listen_host
        self.port = 0  # chosen by the OS on the first start, then kept
        self.connections_accepted = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._generation = 0  # bumped by every cut
        self.hanging = False  # while set, bytes are swallowed both ways

    @property
    def is_up(self) -> bool:
        return self._server is not None

    async def start(self) -> TcpProxy:
        """Listen (on a free port the first time, on the same port afterwards)."""
        if self._server is not None:
            return self
        self._server = await asyncio.start_server(
            self._serve, self.listen_host, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def cut(self) -> None:
        """Refuse new connections and abort every live one, client and server side."""
        self._generation += 1
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        tasks = list(self._tasks)
        if tasks:
            # Aborted transports end their copies at once; cancel only what still lingers.
            _, pending = await asyncio.wait(tasks, timeout=1)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def hang(self) -> None:
        """Keep every connection open (and accept new ones) but pass no byte either way."""
        self.hanging = True

    def unhang(self) -> None:
        self.hanging = False

    async def restore(self) -> None:
        """Listen again on the same port."""
        await self.start()

    async def close(self) -> None:
        await self.cut()

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _serve(self, reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        generation = self._generation
        self._tasks.add(task)
        self.connections_accepted += 1
        self._writers.add(client)
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                upstream_reader, upstream = await asyncio.open_connection(
                    self.target_host, self.target_port
                )
            except OSError:
                return
            if generation != self._generation:
                return  # cut while connecting upstream: this connection is dead too
            self._writers.add(upstream)
            await asyncio.gather(
                _pipe(reader, upstream, self), _pipe(upstream_reader, client, self)
            )
        finally:
            self._tasks.discard(task)
            for writer in (client, upstream):
                if writer is not None:
                    self._writers.discard(writer)
                    writer.transport.abort()


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proxy: TcpProxy
) -> None:
    """Copy until EOF, then half-close; a reset on either side ends the copy quietly."""
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(CHUNK):
            if proxy.hanging:
                continue
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
