"""asyncio integration: a manual-dispatch client driven by the event loop.

The library signals waiting callbacks through an event fd; the loop watches it with
``add_reader`` and runs them with ``dispatch`` on the loop's thread, so completions
resolve asyncio futures directly, with no extra threads and no locking.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Mapping, Optional, Union

from .client import Client, operation_names
from .errors import ParleyError


class AsyncClient:
    """Like :class:`Client`, with awaitable operations. Create it inside a running loop."""

    def __init__(self, config: Union[None, str, Mapping[str, Any]] = None, **options: Any) -> None:
        options["dispatch_mode"] = "manual"
        self._loop = asyncio.get_running_loop()
        self.client = Client(config, **options)
        self._fd = self.client.event_fd
        self._loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        if not self.client.closed:
            self.client.dispatch()

    async def _await(self, start: Callable[[Any], int]) -> Any:
        future: "asyncio.Future[Any]" = self._loop.create_future()

        def done(result: Optional[Any], error: Optional[ParleyError]) -> None:
            if future.cancelled():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        operation = start(done)
        try:
            return await future
        except asyncio.CancelledError:
            if not self.client.closed:
                try:
                    self.client.cancel(operation)
                except ParleyError:
                    pass  # it completed meanwhile
            raise

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """Sends a raw REST request; returns the decoded JSON answer or raises ParleyError."""
        return await self._await(lambda done: self.client.request_with_callback(method, path, body, done))

    async def connect(self, user_id: str, session_token: str) -> Any:
        """Connects as `user_id`; returns the user object."""
        return await self._await(lambda done: self.client.connect_with_callback(user_id, session_token, done))

    def disconnect(self) -> None:
        self.client.disconnect()

    async def perform(self, operation: str, params: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> Any:
        """Performs a catalog operation; returns the server's answer."""
        merged = dict(params or {})
        merged.update(kwargs)
        return await self._await(lambda done: self.client.perform_with_callback(operation, merged, done))

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_") or name not in operation_names():
            raise AttributeError(name)
        return lambda params=None, **kwargs: self.perform(name, params, **kwargs)

    def post(self, function: Any) -> None:
        self.client.post(function)

    async def close(self) -> None:
        """Removes the fd watch and closes the client (pending operations get Cancelled)."""
        if self.client.closed:
            return
        self._loop.remove_reader(self._fd)
        self.client.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()
