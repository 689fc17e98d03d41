"""The HTTP transport copies a request's ``params._meta`` trace context to its headers."""

from __future__ import annotations

import json

import httpx2
import pytest

from prism.mcp._http import _trace_headers

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _post(meta: object, *, raw: bytes | None = None) -> httpx2.Request:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": meta}}
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx2.Request("POST", "http://127.0.0.1/mcp", content=content)


def test_a_calls_trace_context_becomes_its_headers() -> None:
    request = _post({"traceparent": PARENT, "tracestate": "vendor=a1"})
    _trace_headers(request)
    assert request.headers["traceparent"] == PARENT
    assert request.headers["tracestate"] == "vendor=a1"


@pytest.mark.parametrize(
    "request_",
    [
        _post({"traceparent": PARENT.upper()}),  # not the W3C form
        _post({"traceparent": PARENT + "\r\nx-injected: 1"}),
        _post({"traceparent": 7}),
        _post(["traceparent"]),
        _post({}, raw=b'{"traceparent": '),  # not JSON
        _post({}, raw=b'["traceparent"]'),  # not an object
        httpx2.Request("GET", "http://127.0.0.1/mcp"),
    ],
    ids=["upper", "header injection", "number", "meta not an object", "torn", "list", "GET"],
)
def test_anything_but_a_well_formed_traceparent_adds_no_header(request_: httpx2.Request) -> None:
    _trace_headers(request_)
    assert "traceparent" not in request_.headers
    assert "tracestate" not in request_.headers


def test_a_bad_tracestate_is_left_out_and_the_traceparent_kept() -> None:
    request = _post({"traceparent": PARENT, "tracestate": "a=1\nb=2"})
    _trace_headers(request)
    assert request.headers["traceparent"] == PARENT
    assert "tracestate" not in request.headers
