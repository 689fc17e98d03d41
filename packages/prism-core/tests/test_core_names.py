"""Provider-safe tool names: always valid, stable, reversible, collisions refused."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism.core import ConfigurationError, create_tool_name_map, provider_safe_name

SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

names = st.text(min_size=1, max_size=200)
mcp_like = st.builds(
    lambda server, tool: f"mcp:{server}:{tool}",
    st.text(st.characters(codec="ascii"), min_size=1, max_size=40),
    st.text(min_size=1, max_size=80),
)


@given(name=st.one_of(names, mcp_like))
def test_every_alias_matches_the_provider_pattern(name: str) -> None:
    assert SAFE.match(provider_safe_name(name))


@given(name=st.from_regex(SAFE, fullmatch=True))
def test_names_that_are_already_safe_are_unchanged(name: str) -> None:
    assert provider_safe_name(name) == name


@given(name=st.one_of(names, mcp_like))
def test_aliases_are_stable_and_already_safe(name: str) -> None:
    alias = provider_safe_name(name)
    assert provider_safe_name(name) == alias
    assert provider_safe_name(alias) == alias


def test_colons_become_double_underscores() -> None:
    assert provider_safe_name("mcp:docs:search") == "mcp__docs__search"


def test_long_names_get_a_stable_hash_suffix() -> None:
    long_name = "mcp:" + "a" * 100
    alias = provider_safe_name(long_name)
    assert len(alias) == 64
    assert alias.startswith("mcp__aaaa")
    assert re.fullmatch(r".*_[0-9a-f]{16}", alias)
    other = provider_safe_name("mcp:" + "a" * 99 + "b")
    assert other != alias
    assert other[:47] == alias[:47]


def test_a_searched_birthday_pair_of_32_bit_suffixes_does_not_collide() -> None:
    # Two names a hostile server found in about 100,000 tries whose aliases shared
    # a 32-bit suffix: with 64 bits a search is out of reach.
    stem = "mcp:evil:a." + "b" * 60
    first, second = provider_safe_name(stem + "21690"), provider_safe_name(stem + "98851")
    assert first != second
    assert len(create_tool_name_map([stem + "21690", stem + "98851"])) == 2


def test_lossy_replacements_are_disambiguated_by_hash() -> None:
    assert provider_safe_name("a.b") != provider_safe_name("a b")
    assert provider_safe_name("a.b") != "a_b"
    assert provider_safe_name("résumé").startswith("r_sum__")


@given(batch=st.lists(st.one_of(names, mcp_like), min_size=1, max_size=30, unique=True))
def test_maps_are_reversible_or_refuse_the_colliding_pair(batch: list[str]) -> None:
    try:
        mapping = create_tool_name_map(batch)
    except ConfigurationError as exc:
        aliases = [provider_safe_name(n) for n in batch]
        assert len(set(aliases)) < len(aliases)
        colliding = [n for n in batch if repr(n) in str(exc)]
        assert len({provider_safe_name(n) for n in colliding}) == 1
        assert len(colliding) >= 2
        return
    assert len(mapping) == len(batch)
    for name in batch:
        assert mapping.registry_name(mapping.alias(name)) == name


def test_collision_names_both_tools() -> None:
    with pytest.raises(ConfigurationError, match=r"'a:b' and 'a__b'|'a__b' and 'a:b'"):
        create_tool_name_map(["a:b", "a__b"])


def test_unknown_alias_maps_to_nothing() -> None:
    mapping = create_tool_name_map(["mcp:docs:search"])
    assert mapping.registry_name("mcp__docs__other") is None
    assert mapping.registry_name("mcp:docs:search") is None


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_names_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"provider_safe_name\.name"):
        provider_safe_name(bad)  # type: ignore[arg-type]
