"""The options of :func:`~prism.mcp.open_mcp_tools`, checked before anything starts."""

from __future__ import annotations

import math
import os
import re
from typing import Literal

import attrs

from prism.core.options import (
    OptionCheck,
    callable_value,
    instance_of,
    integer,
    number,
    one_of,
    optional,
)

from ._annotations import McpApprovalCallback
from ._callbacks import (
    McpElicitationCompleteCallback,
    McpElicitCallback,
    McpLogCallback,
    McpRootsCallback,
    McpSampleCallback,
    root_uris,
)
from ._transports import StdioTransport, StreamableHttpTransport

__all__ = ["DEFAULT_MAX_CALL_S", "BridgeOptions", "ProtocolMode", "bridge_options"]

ProtocolMode = Literal["auto", "legacy"]

DEFAULT_MAX_CALL_S = 600.0
_OWNER = "open_mcp_tools"
_SERVER_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_PREFIX = re.compile(r"[A-Za-z0-9_.:/-]{0,128}")

_seconds = number(minimum=0, above=True)
_callback = optional(callable_value())
_CHECKS: dict[str, OptionCheck] = {
    "server_id": OptionCheck(
        "1-64 characters of A-Z a-z 0-9 _ . -",
        lambda value: isinstance(value, str) and _SERVER_ID.fullmatch(value) is not None,
    ),
    "transport": instance_of(StdioTransport, StreamableHttpTransport),
    "name_prefix": optional(
        OptionCheck(
            "up to 128 characters of A-Z a-z 0-9 _ . : / -",
            lambda value: isinstance(value, str) and _PREFIX.fullmatch(value) is not None,
        )
    ),
    "list_cache_ttl_s": _seconds,
    "call_timeout_s": _seconds,
    "connect_timeout_s": _seconds,
    # None (a host that passes its own unset option through) still gets the
    # default ceiling; only an explicit infinity removes it.
    "max_call_s": optional(_seconds)
    | OptionCheck("math.inf", lambda value: isinstance(value, float) and value == math.inf),
    "max_result_bytes": integer(minimum=1024, maximum=1 << 30),
    "protocol": one_of("auto", "legacy"),
    "max_list_bytes": integer(minimum=1024, maximum=1 << 30),
    "max_list_pages": integer(minimum=1, maximum=1000),
    "max_server_requests": integer(minimum=1, maximum=1024),
    "elicit": _callback,
    "sample": _callback,
    "on_log": _callback,
    "on_elicitation_complete": _callback,
    "accept_change": _callback,
    "pins_file": optional(instance_of(str, os.PathLike, description="a path")),
}


@attrs.frozen(kw_only=True)
class BridgeOptions:
    """The checked options of one bridge (see :func:`~prism.mcp.open_mcp_tools`)."""

    server_id: str
    transport: StdioTransport | StreamableHttpTransport
    name_prefix: str
    list_cache_ttl_s: float
    call_timeout_s: float
    connect_timeout_s: float
    max_call_s: float | None
    max_result_bytes: int
    protocol: ProtocolMode
    max_list_bytes: int
    max_list_pages: int
    max_server_requests: int
    elicit: McpElicitCallback | None = None
    sample: McpSampleCallback | None = None
    roots: tuple[str, ...] | McpRootsCallback | None = None
    on_log: McpLogCallback | None = None
    on_elicitation_complete: McpElicitationCompleteCallback | None = None
    pins_file: str | None = None
    accept_change: McpApprovalCallback | None = None


def bridge_options(**given: object) -> BridgeOptions:
    """Check every option of ``open_mcp_tools`` and return them normalised.

    Raises:
        ConfigurationError: an option is invalid (naming it and the value).
    """
    for option, check in _CHECKS.items():
        check.check(_OWNER, option, given.get(option))
    server_id = given["server_id"]
    prefix = given["name_prefix"]
    max_call = given["max_call_s"]
    roots = given.get("roots")
    pins_file = given.get("pins_file")
    values = {
        **given,
        "name_prefix": f"mcp:{server_id}:" if prefix is None else prefix,
        "list_cache_ttl_s": float(given["list_cache_ttl_s"]),  # type: ignore[arg-type]
        "call_timeout_s": float(given["call_timeout_s"]),  # type: ignore[arg-type]
        "connect_timeout_s": float(given["connect_timeout_s"]),  # type: ignore[arg-type]
        "max_call_s": DEFAULT_MAX_CALL_S
        if max_call is None
        else None
        if max_call == math.inf
        else float(max_call),  # type: ignore[arg-type]
        "roots": None if roots is None else roots if callable(roots) else root_uris(roots),  # type: ignore[arg-type]
        "pins_file": None if pins_file is None else os.fspath(pins_file),  # type: ignore[call-overload]
    }
    return BridgeOptions(**values)  # type: ignore[arg-type]
