"""The error tree of ``prism.core``.

::

    PrismError
    ├── ConfigurationError (ValueError)       bad options, raised at construction
    ├── DuplicateToolError (ValueError)       a second tool under a registered name
    ├── ToolSchemaRejectedError (ValueError)  a validator refuses a tool's schema
    ├── PermissionDeniedError                 a permission policy refused a request
    ├── ExecutionDeniedError                  an execution policy refused an action
    ├── ModelProviderError (RuntimeError)     a model provider failed or answered nonsense
    │   └── ScriptExhaustedError              a ScriptedProvider ran out of turns
    ├── SessionBusyError (RuntimeError)       a second run started on a busy AgentSession
    ├── ExtensionError                        an extension's setup failed or misused its API
    ├── TrioRequiredError (RuntimeError)      a Prism coroutine awaited outside trio
    └── AsyncioHostClosedError (RuntimeError) an AsyncioHost used after (or closed during) its block

Other packages derive their own errors from :class:`PrismError`, so one
``except PrismError`` catches everything Prism raises on purpose.
"""

from __future__ import annotations

__all__ = [
    "AsyncioHostClosedError",
    "ConfigurationError",
    "DuplicateToolError",
    "ExecutionDeniedError",
    "ExtensionError",
    "ModelProviderError",
    "PermissionDeniedError",
    "PrismError",
    "ScriptExhaustedError",
    "SessionBusyError",
    "ToolSchemaRejectedError",
    "TrioRequiredError",
]


class PrismError(Exception):
    """Base of every error Prism raises on purpose."""


class ToolSchemaRejectedError(PrismError, ValueError):
    """A validator refuses a schema: it breaks a limit, is unsafe, or cannot be compiled.

    Raised by a validator's ``compile``; :class:`~prism.core.ToolParameterValidator`
    turns it into a ``schema_rejected`` refusal of the tool's calls. Validators
    subclass it (``prism.validation.jsonschema.SchemaRejectedError``).

    Attributes:
        reason: why, in words a model or an operator can act on.
        path: a JSON Pointer (``#/properties/a/pattern``) to the offending part, if known.
    """

    def __init__(self, reason: str, path: str | None = None) -> None:
        super().__init__(
            f"schema rejected at {path}: {reason}" if path else f"schema rejected: {reason}"
        )
        self.reason = reason
        self.path = path


_NO_VALUE: object = object()


class ConfigurationError(PrismError, ValueError):
    """An option was given a value Prism cannot use; the message names both.

    Attributes:
        option: the option's dotted name (``"RunOptions.max_turns"``), when known.
        value: the rejected value, when known (``None`` otherwise; see ``has_value``).
        has_value: whether ``value`` is the rejected value.
    """

    def __init__(
        self, message: str, *, option: str | None = None, value: object = _NO_VALUE
    ) -> None:
        super().__init__(message)
        self.option = option
        self.has_value = value is not _NO_VALUE
        self.value: object = None if value is _NO_VALUE else value


class DuplicateToolError(PrismError, ValueError):
    """A tool was registered under a name the registry already holds."""

    def __init__(self, name: str) -> None:
        super().__init__(f"a tool named {name!r} is already registered")
        self.name = name


class PermissionDeniedError(PrismError):
    """A :class:`~prism.core.PermissionPolicy` refused a request."""

    def __init__(self, key: str, reason: str | None = None) -> None:
        message = f"permission denied for {key}"
        if reason:
            message = f"{message}: {reason}"
        super().__init__(message)
        self.key = key
        self.reason = reason


class ExecutionDeniedError(PrismError):
    """An :class:`~prism.core.ExecutionPolicy` refused an action.

    Attributes:
        reason: the policy's reason, shown to the model.
        details: structured facts about the decision (for events and the ledger).
    """

    def __init__(self, reason: str, *, details: dict[str, object] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details: dict[str, object] = dict(details or {})


class ModelProviderError(PrismError, RuntimeError):
    """A model provider raised, or answered with something that is not an assistant message."""


class ScriptExhaustedError(ModelProviderError):
    """A :class:`~prism.core.ScriptedProvider` was asked for more turns than it holds."""


class SessionBusyError(PrismError, RuntimeError):
    """A run was started on an :class:`~prism.core.AgentSession` that is already running."""


class ExtensionError(PrismError):
    """An extension's ``setup`` failed, or it used its :class:`~prism.core.ExtensionAPI` wrongly."""


class TrioRequiredError(PrismError, RuntimeError):
    """A Prism coroutine was awaited outside a trio task (on asyncio, use the asyncio host)."""


class AsyncioHostClosedError(PrismError, RuntimeError):
    """An :class:`~prism.core.AsyncioHost` was used after its block, or closed during a call."""
