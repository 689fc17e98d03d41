from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism.cli import CliConfigurationError, PrismConfig, load_config, parse_config

FULL = """
[agent]
model = "scripted"
concurrency = 6
max_tool_rounds = 3

[workspace]
roots = ["repo", "/abs/other"]
coding_tools = true
read_only = true

[commands]
allow = ["git status"]
deny = ["curl *"]
ask = ["git push*"]
use_default_deny = true

[permissions]
allow = ["tool:read:execute", "tool:mcp:docs:*:execute"]
deny = ["tool:mcp:docs:delete_*:execute"]
default = "deny"

[validation]
enabled = true
missing_schema = "reject"

[mcp.servers.docs]
command = "python"
args = ["-m", "prism.cli.demo_server"]
env = { DEMO = "1" }
cwd = "servers"
call_timeout_s = 5
max_call_s = 30
max_result_bytes = 200000

[mcp.servers.remote]
url = "http://127.0.0.1:8765/mcp"
headers = { Authorization = "Bearer x" }

[ledger]
path = "out/ledger.jsonl"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prism.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _problem(data: dict[str, object]) -> CliConfigurationError:
    with pytest.raises(CliConfigurationError) as info:
        parse_config(data, source="prism.toml", base_dir="/base")
    return info.value


def test_full_config_loads_and_resolves_paths_against_its_folder(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, FULL))
    assert config.agent.concurrency == 6
    assert config.workspace.roots == (str(tmp_path / "repo"), "/abs/other")
    assert config.workspace.read_only is True
    assert config.commands.ask == ("git push*",)
    assert config.permissions.deny == ("tool:mcp:docs:delete_*:execute",)
    assert config.validation.missing_schema == "reject"
    docs, remote = config.mcp_servers
    assert docs.server_id == "docs"
    assert docs.args == ("-m", "prism.cli.demo_server")
    assert docs.cwd == str(tmp_path / "servers")
    assert docs.call_timeout_s == 5.0
    assert docs.max_result_bytes == 200_000
    assert remote.url == "http://127.0.0.1:8765/mcp"
    assert dict(remote.headers) == {"Authorization": "Bearer x"}
    assert config.ledger == str(tmp_path / "out" / "ledger.jsonl")


def test_empty_config_gets_safe_defaults() -> None:
    config = parse_config({}, base_dir="/base")
    assert isinstance(config, PrismConfig)
    assert config.workspace.roots == ("/base",)
    assert config.permissions.default == "deny"
    assert config.commands.use_default_deny is True
    assert config.validation.enabled is True
    assert config.mcp_servers == ()


def test_unknown_top_level_key_is_named() -> None:
    error = _problem({"agnet": {}})
    assert error.key == "agnet"
    assert "unknown key" in str(error)
    assert str(error).startswith("prism.toml: agnet:")


def test_typo_in_nested_key_is_named_with_its_dotted_path() -> None:
    error = _problem({"mcp": {"servers": {"docs": {"command": "x", "call_timeout": 5}}}})
    assert error.key == "mcp.servers.docs.call_timeout"
    assert "call_timeout_s" in str(error)  # the known keys are listed


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"agent": {"concurrency": 0}}, "agent.concurrency", ">= 1 and <= 64, got 0"),
        ({"agent": {"concurrency": True}}, "agent.concurrency", "an integer"),
        ({"agent": {"max_tool_rounds": "3"}}, "agent.max_tool_rounds", "an integer"),
        ({"workspace": {"roots": []}}, "workspace.roots", "a non-empty sequence"),
        ({"workspace": {"roots": ["ok", 3]}}, "workspace.roots[1]", "non-empty string"),
        ({"workspace": {"read_only": "yes"}}, "workspace.read_only", "a bool"),
        ({"permissions": {"default": "maybe"}}, "permissions.default", "one of 'allow', 'deny'"),
        ({"validation": {"missing_schema": 1}}, "validation.missing_schema", "'allow'"),
        ({"commands": {"deny": "rm"}}, "commands.deny", "a sequence"),
        ({"agent": 3}, "agent", "must be a table"),
        ({"ledger": {"path": ""}}, "ledger.path", "non-empty string"),
    ],
)
def test_bad_values_name_the_key_and_the_value(
    data: dict[str, object], key: str, fragment: str
) -> None:
    error = _problem(data)
    assert error.key == key
    assert error.option == key  # a ConfigurationError like every other bad option
    assert fragment in error.problem
    assert str(error).startswith(f"prism.toml: {key}: ")


@pytest.mark.parametrize(
    ("server", "key", "fragment"),
    [
        ({}, "mcp.servers.docs", "exactly one of 'command' or 'url'"),
        ({"command": "x", "url": "http://h/mcp"}, "mcp.servers.docs", "exactly one"),
        ({"url": "file:///etc/passwd"}, "mcp.servers.docs.url", "http://"),
        ({"command": "x", "call_timeout_s": -1}, "mcp.servers.docs.call_timeout_s", "> 0"),
        ({"command": "x", "call_timeout_s": float("nan")}, "mcp.servers.docs.call_timeout_s", ""),
        ({"command": "x", "max_call_s": float("inf")}, "mcp.servers.docs.max_call_s", ""),
        ({"command": "x", "max_result_bytes": 10}, "mcp.servers.docs.max_result_bytes", "1024"),
        ({"command": "x", "env": {"A": 1}}, "mcp.servers.docs.env", "a table of strings"),
        ({"command": "x", "headers": {"A": "b"}}, "mcp.servers.docs.headers", "HTTP"),
        ({"url": "http://h/mcp", "args": ["x"]}, "mcp.servers.docs.args", "stdio"),
    ],
)
def test_bad_server_tables_name_the_server_key(
    server: dict[str, object], key: str, fragment: str
) -> None:
    error = _problem({"mcp": {"servers": {"docs": server}}})
    assert error.key == key
    assert fragment in error.problem


def test_server_id_that_cannot_be_part_of_a_tool_name_is_refused() -> None:
    error = _problem({"mcp": {"servers": {"a b:c": {"command": "x"}}}})
    assert error.key == "mcp.servers.a b:c"


def test_not_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "[agent\nmodel = 1\n")
    with pytest.raises(CliConfigurationError, match="not valid TOML") as info:
        load_config(path)
    assert info.value.source == str(path)
    assert info.value.key == ""


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(CliConfigurationError, match="cannot read it"):
        load_config(tmp_path / "absent.toml")


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = _write(tmp_path, "# " + "x" * 1_100_000 + "\n")
    with pytest.raises(CliConfigurationError, match="larger than"):
        load_config(path)


_KNOWN_TOP = {
    "agent",
    "workspace",
    "commands",
    "permissions",
    "validation",
    "mcp",
    "ledger",
    "serve",
}


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
def test_any_unknown_top_level_key_is_refused(name: str) -> None:
    if name in _KNOWN_TOP:
        return
    with pytest.raises(CliConfigurationError) as info:
        parse_config({name: {}})
    assert info.value.key == name


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_concurrency_outside_its_range_is_always_refused(value: int) -> None:
    if 1 <= value <= 64:
        assert parse_config({"agent": {"concurrency": value}}).agent.concurrency == value
    else:
        with pytest.raises(CliConfigurationError):
            parse_config({"agent": {"concurrency": value}})


@pytest.mark.parametrize("mode", ["none", "bubblewrap", "landlock", "auto"])
def test_sandbox_modes_are_accepted(mode: str) -> None:
    assert parse_config({"workspace": {"sandbox": mode}}).workspace.sandbox == mode


def test_an_unknown_sandbox_is_refused_with_the_choices() -> None:
    error = _problem({"workspace": {"sandbox": "docker"}})
    assert error.key == "workspace.sandbox"
    assert "one of 'none', 'bubblewrap', 'landlock', 'auto'" in error.problem


def test_sandbox_defaults_to_auto() -> None:
    assert parse_config({}).workspace.sandbox == "auto"


def test_readable_folders_resolve_against_the_file_and_protected_paths_are_kept() -> None:
    config = parse_config(
        {"workspace": {"readable": ["docs", "/opt/ref"], "protected_paths": ["Makefile"]}},
        base_dir="/srv/app",
    )
    assert config.workspace.readable == ("/srv/app/docs", "/opt/ref")
    assert config.workspace.protected_paths == ("Makefile",)


def test_a_readable_entry_that_is_not_a_string_names_the_key() -> None:
    error = _problem({"workspace": {"readable": [3]}})
    assert error.key.startswith("workspace.readable")


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        (
            {"mcp": {"servers": {"d": {"command": "x", "server_id": "y"}}}},
            "mcp.servers.d.server_id",
            "unknown key",
        ),
        ({"mcp": {"servers": 3}}, "mcp.servers", "must be a table, got a number"),
        ({"mcp": {"servers": {"d": ["x"]}}}, "mcp.servers.d", "must be a table, got a list"),
        ({"serve": {"auth": {"type": "bearer"}}}, "serve.auth", "needs token_env or token_file"),
        ({"workspace": {"roots": ["ok", ""]}}, "workspace.roots[1]", "non-empty string"),
    ],
)  # fmt: skip
def test_every_nested_mistake_names_its_dotted_key(
    data: dict[str, object], key: str, fragment: str
) -> None:
    error = _problem(data)
    assert error.key == key
    assert fragment in error.problem


def test_a_file_that_is_not_utf8_is_reported_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "prism.toml"
    path.write_bytes(b"[agent]\nmodel = '\xff'\n")
    with pytest.raises(CliConfigurationError, match="not UTF-8 text"):
        load_config(path)


def test_the_gateways_limits_are_read_from_serve() -> None:
    serve = parse_config(
        {
            "serve": {
                "question_ttl_s": 120,
                "max_concurrent_calls": 64,
                "max_calls_per_client": 4,
                "path": "/prism/mcp",
                "max_request_bytes": 4 * 1024 * 1024,
                "body_timeout_s": 5.5,
            }
        }
    ).serve
    assert (serve.question_ttl_s, serve.max_concurrent_calls, serve.max_calls_per_client) == (
        120,
        64,
        4,
    )
    assert (serve.path, serve.max_request_bytes, serve.body_timeout_s) == (
        "/prism/mcp",
        4 * 1024 * 1024,
        5.5,
    )


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("question_ttl_s", 0, "must be a finite number >= 1 and <= 604800, got 0"),
        ("question_ttl_s", "10m", "must be a finite number >= 1 and <= 604800, got '10m'"),
        ("question_ttl_s", 8 * 24 * 3600, "must be a finite number >= 1 and <= 604800"),
        ("max_concurrent_calls", 0, "must be an integer >= 1, got 0"),
        ("max_calls_per_client", 2.5, "must be an integer >= 1, got 2.5"),
        ("path", "mcp", "must be a path starting with '/', got 'mcp'"),
        ("max_request_bytes", 10, "must be an integer >= 1024 and <= 67108864, got 10"),
        ("body_timeout_s", 0, "must be a finite number >= 0.1 and <= 3600, got 0"),
    ],
)
def test_a_bad_gateway_limit_names_its_key(key: str, value: object, said: str) -> None:
    error = _problem({"serve": {key: value}})
    assert str(error).startswith(f"prism.toml: serve.{key}: {said}")
