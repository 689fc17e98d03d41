"""Helpers the four tools share: argument checks, policy checks, error results."""

from __future__ import annotations

import errno
import math
import os
from typing import TYPE_CHECKING, TypeVar, cast

from prism.core import (
    ConfigurationError,
    ExecutionAction,
    ExecutionDeniedError,
    ExecutionPolicy,
    JsonObject,
    JsonValue,
    PrismError,
    ToolResult,
    assert_execution_allowed,
)
from prism.core.options import OptionCheck, instance_of, integer, number, one_of, string
from prism.core.text import NAME_LIMIT, clip

from ._errors import CodingToolsConfigurationError

if TYPE_CHECKING:
    from collections.abc import Mapping

_T = TypeVar("_T")

__all__ = [
    "check_cwd",
    "check_option",
    "check_positive_int",
    "check_timeout",
    "denied_result",
    "encodable",
    "file_error_result",
    "json_safe",
    "optional_int",
    "optional_number",
    "policy_check",
    "required_path",
    "required_str",
]

_MAX_PATH_CHARS = 4096


class _ArgumentError(Exception):
    """The model's arguments are malformed; becomes an ``invalid arguments`` error result."""

    def result(self, tool: str) -> ToolResult:
        """The error result the model sees."""
        return ToolResult.error(f"{tool}: invalid arguments: {self}", invalid_arguments=str(self))


def required_str(args: JsonObject, key: str, *, allow_empty: bool = True) -> str:
    """``args[key]`` as a string, or :class:`_ArgumentError`."""
    value = args.get(key)
    if not isinstance(value, str):
        raise _ArgumentError(f"{key!r} must be a string, got {_kind(value)}")
    if not allow_empty and not value:
        raise _ArgumentError(f"{key!r} must not be empty")
    return value


def encodable(value: str, key: str) -> str:
    """``value`` if it can be encoded as UTF-8 (JSON allows lone surrogates; the OS does not)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _ArgumentError(f"{key!r} is not valid Unicode text ({exc.reason})") from None
    return value


def required_path(args: JsonObject, key: str = "path") -> str:
    """A non-empty path without NUL characters."""
    value = encodable(required_str(args, key, allow_empty=False), key)
    if "\0" in value:
        raise _ArgumentError(f"{key!r} must not contain NUL characters")
    if len(value) > _MAX_PATH_CHARS:
        raise _ArgumentError(f"{key!r} is longer than {_MAX_PATH_CHARS} characters")
    return value


def optional_int(args: JsonObject, key: str, *, minimum: int) -> int | None:
    """``args[key]`` as an int >= ``minimum`` when present (``None`` counts as absent)."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _ArgumentError(f"{key!r} must be an integer, got {_kind(value)}")
    if value < minimum:
        raise _ArgumentError(f"{key!r} must be >= {minimum}, got {value}")
    return value


def optional_number(args: JsonObject, key: str) -> float | None:
    """``args[key]`` as a finite number > 0 when present."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _ArgumentError(f"{key!r} must be a number, got {_kind(value)}")
    if not math.isfinite(value) or value <= 0:
        raise _ArgumentError(f"{key!r} must be a finite number > 0, got {value!r}")
    return float(value)


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    return type(value).__name__


def check_option(check: OptionCheck, owner: str, option: str, value: _T) -> _T:
    """``check.check(owner, option, value)``, raising :class:`CodingToolsConfigurationError`."""
    try:
        return check.check(owner, option, value)
    except ConfigurationError as exc:
        raise CodingToolsConfigurationError(str(exc), option=exc.option, value=value) from None


def check_positive_int(owner: str, name: str, value: object, *, maximum: int | None = None) -> int:
    """Validate an integer option at construction time."""
    return cast("int", check_option(integer(minimum=1, maximum=maximum), owner, name, value))


def check_timeout(owner: str, name: str, value: object, *, allow_inf: bool) -> float:
    """Validate a seconds option at construction time."""
    seconds = number(minimum=0, above=True)
    if allow_inf:
        seconds = seconds | one_of(math.inf)
    return float(cast("float", check_option(seconds, owner, name, value)))


def check_cwd(owner: str, cwd: object) -> str:
    """Validate the ``cwd`` every tool factory takes; it is made absolute."""
    path = string() | instance_of(os.PathLike, description="a path")
    check_option(path, owner, "cwd", cwd)
    text = os.fspath(cast("str", cwd))
    if not isinstance(text, str) or not text or "\0" in text:
        raise CodingToolsConfigurationError(
            f"{owner}.cwd must be a non-empty path without NUL, got {cwd!r}",
            option=f"{owner}.cwd",
            value=cwd,
        )
    return os.path.abspath(text)


def json_safe(value: object, depth: int = 0) -> JsonValue:
    """A JSON copy of a policy's ``details`` (non-JSON values shown by ``repr``)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= 8:
        return clip(repr(value), NAME_LIMIT)
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in list(value.items())[:100]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v, depth + 1) for v in list(value)[:100]]
    return clip(repr(value), NAME_LIMIT)


def denied_result(tool: str, exc: ExecutionDeniedError, action: ExecutionAction) -> ToolResult:
    """The error result for an action the execution policy refused."""
    return ToolResult.error(
        f"{tool}: denied by the execution policy: {exc.reason}",
        execution_denied=True,
        reason=exc.reason,
        decision=json_safe(exc.details),
        action={
            "kind": action.kind,
            "operation": action.operation,
            "paths": list(action.paths),
            "command": action.command,
        },
    )


async def policy_check(
    tool: str, policy: ExecutionPolicy | None, action: ExecutionAction
) -> ExecutionAction | ToolResult:
    """The (possibly modified) action, or the error result when the policy refuses it."""
    try:
        return await assert_execution_allowed(policy, action)
    except ExecutionDeniedError as exc:
        return denied_result(tool, exc, action)


_MESSAGES: Mapping[int, str] = {
    errno.ENOENT: "file not found",
    errno.EISDIR: "is a directory",
    errno.ENOTDIR: "a parent of the path is not a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.ELOOP: "too many levels of symbolic links",
    errno.ENAMETOOLONG: "file name too long",
}


def file_error_result(tool: str, path: str, exc: OSError | PrismError | ValueError) -> ToolResult:
    """The error result for a failed file operation on ``path``."""
    if isinstance(exc, OSError):
        code = exc.errno
        reason = _MESSAGES.get(code or 0) or exc.strerror or str(exc)
        return ToolResult.error(
            f"{tool}: {path}: {reason}", path=path, errno=code, error=type(exc).__name__
        )
    return ToolResult.error(f"{tool}: {path}: {exc}", path=path, error=type(exc).__name__)
