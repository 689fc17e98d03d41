"""A downstream server's questions (elicitation, sampling) forwarded to the client it serves."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import trio
from mcp.shared.message import ServerMessageMetadata

from prism.mcp import (
    McpElicitation,
    McpElicitationAnswer,
    McpElicitCallback,
    McpLogCallback,
    McpLogMessage,
    McpSampleCallback,
    McpSamplingAnswer,
    McpSamplingRequest,
)

from ._approval import CallScope
from ._errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Forwarder", "UpstreamCannotAnswerError"]

_EMPTY_FORM: dict[str, Any] = {"type": "object", "properties": {}}
_LOG_BACKLOG = 64


class UpstreamCannotAnswerError(GatewayError):
    """A downstream server asked something the calling client cannot be asked."""


@attrs.define(eq=False)
class Forwarder:
    """The calls running on each downstream server, and whom its requests go to.

    A server's request (``elicitation/create``, ``sampling/createMessage``)
    carries nothing that says which of the gateway's calls it belongs to, so
    it goes to the one client with calls running on that server. With calls
    of several clients running there, or none, it is refused rather than put
    to a client it may not belong to; so is a request the client did not
    declare the capability for, or cannot receive mid-call (a 2026-07-28 or
    stateless connection).
    """

    _calls: dict[str, list[CallScope]] = attrs.field(factory=dict)
    # Log messages waiting to be sent, by call (the bridge's log callback cannot wait).
    _pending: dict[CallScope, list[types.LoggingMessageNotification]] = attrs.field(factory=dict)
    _wake: trio.Event = attrs.field(factory=trio.Event)

    @contextlib.contextmanager
    def calling(self, server_id: str, scope: CallScope) -> Iterator[None]:
        """Mark ``scope`` as a call running on ``server_id`` while the block runs."""
        running = self._calls.setdefault(server_id, [])
        running.append(scope)
        try:
            yield
        finally:
            running.remove(scope)
            if not running:
                del self._calls[server_id]

    def _asker(self, server_id: str, capability: str) -> CallScope:
        running = self._calls.get(server_id, [])
        if not running:
            raise UpstreamCannotAnswerError(
                f"no client call to MCP server {server_id!r} is running: nobody to ask"
            )
        clients = {scope.client for scope in running}
        if len(clients) > 1:
            raise UpstreamCannotAnswerError(
                f"calls of {len(clients)} clients are running on MCP server {server_id!r}: "
                "the gateway cannot tell which one the question is for"
            )
        scope = running[0]
        declared = scope.session.client_capabilities
        if declared is None or getattr(declared, capability, None) is None:
            raise UpstreamCannotAnswerError(f"the client did not declare {capability}")
        if not scope.session.can_send_request:
            raise UpstreamCannotAnswerError(
                "the client's connection cannot carry a request in the middle of a call"
            )
        return scope

    def elicit(self, server_id: str) -> McpElicitCallback:
        """The ``elicit`` callback of server ``server_id``'s bridge."""

        async def elicit(request: McpElicitation) -> McpElicitationAnswer:
            scope = self._asker(server_id, "elicitation")
            # Said to come from the server, so it is never taken for the gateway's own
            # approval question ("Prism asks whether the tool ...").
            message = f"MCP server {server_id!r} asks (forwarded by Prism): {request.message}"
            if request.mode == "url" and request.url is not None:
                result = await scope.session.elicit_url(
                    message,
                    request.url,
                    request.elicitation_id or "",
                    related_request_id=scope.request_id,
                )
            else:
                result = await scope.session.elicit_form(
                    message,
                    request.requested_schema or _EMPTY_FORM,
                    related_request_id=scope.request_id,
                )
            content = result.content if result.action == "accept" else None
            return McpElicitationAnswer(action=result.action, content=content)

        return elicit

    def sample(self, server_id: str) -> McpSampleCallback:
        """The ``sample`` callback of server ``server_id``'s bridge."""

        async def sample(request: McpSamplingRequest) -> McpSamplingAnswer:
            scope = self._asker(server_id, "sampling")
            # The server's request as it sent it (the SDK's create_message helper is
            # deprecated with sampling itself, and would rebuild it field by field).
            params = types.CreateMessageRequestParams.model_validate(request.params)
            result = await scope.session.send_request(
                types.CreateMessageRequest(params=params),
                types.CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=scope.request_id),
            )
            content = result.content
            if not isinstance(content, types.TextContent):
                raise UpstreamCannotAnswerError("the client's model answered with no text")
            return McpSamplingAnswer(
                text=content.text, model=result.model, stop_reason=result.stop_reason
            )

        return sample

    def log(self, server_id: str) -> McpLogCallback:
        """The ``on_log`` callback of server ``server_id``'s bridge.

        A log message goes, as ``notifications/message`` on the call's stream
        and with the logger named ``mcp:<server>/<logger>``, to the one client
        with calls running on the server, when its connection is a 2025-11-25
        one (2026-07-28 clients opt in to logs per request); otherwise, or past
        64 waiting for one call, it is dropped. Messages are sent as they come,
        and those still waiting when the call ends are sent before its result.
        """

        def on_log(message: McpLogMessage) -> None:
            running = self._calls.get(server_id, [])
            if len({scope.client for scope in running}) != 1 or running[0].modern:
                return
            logger = f"mcp:{server_id}/{message.logger}" if message.logger else f"mcp:{server_id}"
            notification = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level=message.level,  # type: ignore[arg-type]
                    logger=logger,
                    data=message.data,
                )
            )
            waiting = self._pending.setdefault(running[0], [])
            if len(waiting) < _LOG_BACKLOG:
                waiting.append(notification)
                self._wake.set()

        return on_log

    async def send_logs(self) -> None:
        """Send the forwarded log messages as they come (runs while the gateway is open)."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            for scope in list(self._pending):
                await self.flush(scope)

    def drop(self, scope: CallScope) -> None:
        """Forget the log messages still waiting for ``scope``'s call."""
        self._pending.pop(scope, None)

    async def flush(self, scope: CallScope) -> None:
        """Send the log messages still waiting for ``scope``'s call."""
        for notification in self._pending.pop(scope, []):
            with contextlib.suppress(Exception):  # the call (or the client) may be gone
                await scope.session.send_notification(
                    notification, related_request_id=scope.request_id
                )
