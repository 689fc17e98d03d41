"""Abort signals, bridged to trio cancel scopes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import trio

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["AbortController", "AbortSignal", "cancel_on_abort"]

_log = logging.getLogger("prism.core")


@attrs.define(eq=False)
class AbortSignal:
    """Says whether a run was aborted, and wakes whoever waits for it.

    Obtain one from :class:`AbortController`; a signal cannot abort itself.
    Callbacks run synchronously in the thread that calls
    :meth:`AbortController.abort` (the trio thread, in practice).
    """

    _aborted: bool = attrs.field(default=False, init=False)
    _reason: str | None = attrs.field(default=None, init=False)
    _callbacks: dict[int, Callable[[], None]] = attrs.field(factory=dict, init=False)
    _next_id: int = attrs.field(default=0, init=False)
    _event: trio.Event | None = attrs.field(default=None, init=False)

    @property
    def aborted(self) -> bool:
        """Whether :meth:`AbortController.abort` was called."""
        return self._aborted

    @property
    def reason(self) -> str | None:
        """The reason given to :meth:`AbortController.abort`, if any."""
        return self._reason

    async def wait(self) -> None:
        """Return once the signal is aborted.

        Always checkpoints. Cancelling the caller cancels the wait and nothing else.
        """
        if self._aborted:
            await trio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()

    def add_callback(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` when the signal aborts (at once if it already has).

        Returns:
            A function that removes the callback; calling it twice is harmless.
        """
        if self._aborted:
            fn()
            return _noop
        key = self._next_id
        self._next_id += 1
        self._callbacks[key] = fn

        def remove() -> None:
            self._callbacks.pop(key, None)

        return remove

    def _fire(self, reason: str | None) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        callbacks = list(self._callbacks.values())
        self._callbacks.clear()
        if self._event is not None:
            self._event.set()
        for fn in callbacks:
            try:
                fn()
            except Exception:
                # One broken listener must not stop the others from hearing the abort.
                _log.exception("an abort callback raised")


def _noop() -> None:
    return None


@attrs.define(eq=False)
class AbortController:
    """Owns an :class:`AbortSignal` and fires it once."""

    signal: AbortSignal = attrs.field(factory=AbortSignal, init=False)

    def abort(self, reason: str | None = None) -> None:
        """Abort the signal; later calls do nothing. Call from the trio thread."""
        self.signal._fire(reason)


def cancel_on_abort(signal: AbortSignal | None) -> _CancelOnAbort:
    """A cancel scope that is cancelled when ``signal`` aborts (use it in a ``with``).

    A pre-aborted signal gives an already-cancelled scope, so the first
    checkpoint inside raises :class:`trio.Cancelled` (caught at the scope).
    """
    return _CancelOnAbort(signal)


class _CancelOnAbort:
    """The context manager of :func:`cancel_on_abort`.

    A class rather than a generator: every abortable dispatch enters one, and
    a generator-based context manager costs about a microsecond more.
    """

    __slots__ = ("_remove", "_scope", "_signal")

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._scope = trio.CancelScope()
        self._remove: Callable[[], None] = _noop

    def __enter__(self) -> trio.CancelScope:
        scope = self._scope.__enter__()
        if self._signal is not None:
            self._remove = self._signal.add_callback(scope.cancel)
        return scope

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self._remove()
        return self._scope.__exit__(kind, error, traceback)
