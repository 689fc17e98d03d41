"""Positional constructors for the frozen values every dispatched call builds.

An attrs frozen class's ``__init__`` sets each field through
``object.__setattr__`` (a frozen class refuses plain assignment): about 2.5x
the cost of setting the slots directly. A dispatched call builds a few such
values (its events, its result), so the dispatcher builds them through
:func:`frozen_builder`, which makes the same object: the class's own slots,
set in field order, nothing skipped. It refuses, when it is made, any class
for which that would not be the same object as ``cls(**fields)``: a class
that is not slotted, or has a validator, an ``__attrs_post_init__`` or (unless
the caller names the field as given already converted) a converter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["frozen_builder"]

T = TypeVar("T")


def frozen_builder(cls: type[T], *, converted: frozenset[str] = frozenset()) -> Callable[..., T]:
    """A constructor taking every field of ``cls`` positionally, in order, that sets its slots.

    Args:
        cls: an attrs frozen, slotted class.
        converted: fields with a converter whose callers pass values the
            converter would return unchanged.

    Raises:
        TypeError: ``cls`` is not such a class, or has a validator, an
            ``__attrs_post_init__`` or a converter not named in ``converted``.
    """
    if not attrs.has(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not an attrs slotted class")
    if hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        raise TypeError(f"{cls.__name__} runs code when it is made")
    fields = attrs.fields(cls)
    names = []
    for field in fields:
        if field.validator is not None or not field.init:
            raise TypeError(f"{cls.__name__}.{field.name} is checked or not set by __init__")
        if field.converter is not None and field.name not in converted:
            raise TypeError(f"{cls.__name__}.{field.name} has a converter")
        names.append(field.name)
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = [f"def build({', '.join(f'v{i}' for i in range(len(names)))}):", "    obj = _new(_cls)"]
    for index, name in enumerate(names):
        slot = cls.__dict__.get(name)
        if slot is None or not hasattr(slot, "__set__"):
            raise TypeError(f"{cls.__name__}.{name} is not a slot of the class itself")
        scope[f"_set{index}"] = slot.__set__
        lines.append(f"    _set{index}(obj, v{index})")
    lines.append("    return obj")
    exec("\n".join(lines), scope)  # our own text: field positions only
    build: Callable[..., T] = scope["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build
