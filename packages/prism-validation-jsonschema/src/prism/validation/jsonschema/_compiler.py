# fastjsonschema's code generators are untyped; these overrides call their helpers.
# mypy: disable-error-code="no-untyped-call,index,union-attr"
"""Hardened code generation on top of fastjsonschema.

fastjsonschema turns a schema into Python source and ``exec``s it. This module
subclasses its generators so that:

* every ``pattern``, ``patternProperties`` and format check runs on RE2
  (linear time), including the compile-time check behind ``required`` with
  ``additionalProperties: false``;
* generated function names are injective (fastjsonschema maps
  ``#/definitions/a-b`` and ``#/definitions/a_b`` to one name, so one
  definition would be validated against the other);
* error sites do not embed the whole sub-schema into the source (that makes the
  generated code grow with the square of the nesting);
* no remote reference is ever resolved: every URL scheme, ``file:`` and
  ``data:`` included, is denied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastjsonschema.draft04 import CodeGeneratorDraft04
from fastjsonschema.draft06 import CodeGeneratorDraft06
from fastjsonschema.draft07 import CodeGeneratorDraft07
from fastjsonschema.exceptions import JsonSchemaDefinitionException
from fastjsonschema.ref_resolver import RefResolver

from ._regex import PatternError, compile_linear, format_checker

__all__ = ["CODE_CHARS_PER_SCHEMA_BYTE", "Draft", "compile_schema"]

Draft = str  # "draft4" | "draft6" | "draft7" (2019-09 and 2020-12 run on jsonschema-rs)

# Generated source may be this many times max_schema_bytes (1 MiB at the default
# 256 KiB); past that the schema is refused, as soon as generation gets there.
# Python's compiler holds the GIL for the whole of ``compile()``: about 0.2 s
# for 1 MiB of generated code here, so this bounds how long a cache miss can
# hold the event loop. Dense schemas generate about 20 characters per byte.
CODE_CHARS_PER_SCHEMA_BYTE = 4


def _deny(uri: str) -> Any:
    raise JsonSchemaDefinitionException(
        f"remote reference {uri[:200]!r} is never fetched; only '#...' references are allowed"
    )


class _DenyAllHandlers(dict[str, Callable[[str], Any]]):
    """A handler table that claims every URL scheme and refuses each one."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Callable[[str], Any]:
        return _deny

    def get(self, key: str, default: Any = None) -> Callable[[str], Any]:
        return _deny


_DENY_ALL = _DenyAllHandlers()


class _Resolver(RefResolver):
    def get_scope_name(self) -> str:
        # Hex of the full URI: a valid identifier, and two URIs never share one.
        return "validate_" + self.get_uri().encode("utf-8", "surrogatepass").hex()


class _Hardened(CodeGeneratorDraft04):
    """Overrides shared by every draft (mixed in ahead of the fastjsonschema class)."""

    def __init__(self, *args: Any, max_code_chars: int, **kwargs: Any) -> None:
        # Predicates the generated code calls as PRISM_PATTERNS[i](value).
        self._prism_patterns: list[Callable[[str], bool]] = []
        self._prism_pattern_index: dict[str, int] = {}
        self._prism_max_code = max_code_chars
        self._prism_code_left = max_code_chars
        super().__init__(*args, **kwargs)

    def l(self, line: str, *args: Any, **kwds: Any) -> Any:  # noqa: E743 - fastjsonschema's name
        emitted = super().l(line, *args, **kwds)
        # Stop as soon as the code outgrows its budget, not after generating it all.
        self._prism_code_left -= len(self._code[-1]) + 1
        if self._prism_code_left < 0:
            raise JsonSchemaDefinitionException(
                f"the schema generates more than {self._prism_max_code} characters of code"
            )
        return emitted

    def _prism_pattern(self, pattern: object) -> int:
        if not isinstance(pattern, str):
            raise JsonSchemaDefinitionException(f"pattern must be a string, got {pattern!r}"[:200])
        index = self._prism_pattern_index.get(pattern)
        if index is None:
            try:
                search = compile_linear(pattern)
            except PatternError as exc:
                raise JsonSchemaDefinitionException(
                    f"pattern {pattern[:100]!r} is not supported by the linear-time engine "
                    f"(no backreferences or lookaround): {exc}"
                ) from exc
            index = len(self._prism_patterns)
            self._prism_patterns.append(search)
            self._prism_pattern_index[pattern] = index
        return index

    @property
    def global_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().global_state
        state["PRISM_PATTERNS"] = self._prism_patterns
        # The stock tables are Python ``re`` objects; nothing generated here uses them.
        state["REGEX_PATTERNS"] = {}
        state.pop("re", None)
        return state

    def exc(
        self, msg: str, *args: Any, append_to_msg: str | None = None, rule: str | None = None
    ) -> None:
        text = '"' + msg + '"'
        if append_to_msg:
            text += " + (" + append_to_msg + ")"
        if self._detailed_exceptions:
            made = (
                "JsonSchemaValueException(" + text + ', value={variable}, name="{name}", '
                "definition=None, rule={rule})"
            )
        else:
            made = "JsonSchemaValueException(" + text + ")"
        line = "raise " + made if self._fast_fail else "errors.append(" + made + ")"
        definition = self._definition
        rule_value = definition.get(rule) if isinstance(definition, dict) and rule else None
        self.l(line, *args, rule=repr(rule), definition_rule=self.e(rule_value))

    def generate_pattern(self) -> None:
        pattern = self._definition["pattern"]
        index = self._prism_pattern(pattern)
        with self.l("if isinstance({variable}, str):"):  # noqa: SIM117 - code generation
            with self.l("if not PRISM_PATTERNS[{}]({variable}):", index):
                self.exc("{name} must match pattern {}", self.e(pattern), rule="pattern")

    def generate_pattern_properties(self) -> None:
        patterns = self._definition["patternProperties"]
        if not isinstance(patterns, dict):
            raise JsonSchemaDefinitionException("patternProperties must be an object")
        self.create_variable_is_dict()
        with self.l("if {variable}_is_dict:"):
            self.create_variable_keys()
            if not patterns:
                return
            compiled = [(self._prism_pattern(p), d) for p, d in patterns.items()]
            with self.l("for {variable}_key, {variable}_val in {variable}.items():"):
                for index, definition in compiled:
                    with self.l("if PRISM_PATTERNS[{}]({variable}_key):", index):
                        with self.l("if {variable}_key in {variable}_keys:"):
                            self.l("{variable}_keys.remove({variable}_key)")
                        self.generate_func_code_block(
                            definition,
                            f"{self._variable}_val",
                            f"{self._variable_name}.{{{self._variable}_key}}",
                            clear_variables=True,
                        )

    def generate_required(self) -> None:
        required = self._definition["required"]
        if not isinstance(required, list | tuple):
            raise JsonSchemaDefinitionException("required must be an array")
        if len(required) != len(set(required)):
            raise JsonSchemaDefinitionException("required must contain unique elements")
        if not self._definition.get("additionalProperties", True):
            # The same refusal fastjsonschema makes, with the pattern test on RE2.
            properties = self._definition.get("properties", {})
            patterns = [
                self._prism_patterns[self._prism_pattern(p)]
                for p in self._definition.get("patternProperties", {})
            ]
            impossible = [
                name
                for name in required
                if name not in properties
                and not (isinstance(name, str) and any(search(name) for search in patterns))
            ]
            if impossible:
                raise JsonSchemaDefinitionException(
                    f"{self._variable}: items {impossible!r} are required but not allowed"[:300]
                )
        self.create_variable_is_dict()
        with self.l("if {variable}_is_dict:"):
            self.l("{variable}__missing_keys = set({required}) - {variable}.keys()")
            with self.l("if {variable}__missing_keys:"):
                dynamic = 'str(sorted({variable}__missing_keys)) + " properties"'
                self.exc(
                    "{name} must contain ", self.e(required), rule="required", append_to_msg=dynamic
                )

    def generate_format(self) -> None:
        if not self._use_formats:
            return
        name = self._definition["format"]
        if not isinstance(name, str):
            return
        checker = format_checker(name, self.FORMAT_REGEXS)
        if checker is None:
            return  # unknown formats are annotations
        index = len(self._prism_patterns)
        self._prism_patterns.append(checker)
        with self.l("if isinstance({variable}, str):"):  # noqa: SIM117 - code generation
            with self.l("if not PRISM_PATTERNS[{}]({variable}):", index):
                self.exc("{name} must be {}", name, rule="format")


class _Draft04(_Hardened, CodeGeneratorDraft04):
    pass


class _Draft06(_Hardened, CodeGeneratorDraft06):
    pass


class _Draft07(_Hardened, CodeGeneratorDraft07):
    pass


_GENERATORS: dict[str, type[_Hardened]] = {
    "draft4": _Draft04,
    "draft6": _Draft06,
    "draft7": _Draft07,
}


def compile_schema(
    schema: dict[str, Any] | bool, draft: Draft, *, max_code_chars: int = 1024 * 1024
) -> Callable[[Any], Any]:
    """Compile a private copy of a screened schema into a validation function.

    The copy may be rewritten by fastjsonschema; the caller's schema never reaches here.

    Raises:
        Exception: whatever fastjsonschema or Python's compiler raise for a bad
            schema; the caller translates it.
    """
    resolver = _Resolver.from_schema(schema, handlers=_DENY_ALL, store={})
    generator = _GENERATORS[draft](
        schema,
        resolver=resolver,
        formats={},
        use_default=False,
        use_formats=True,
        detailed_exceptions=True,
        fast_fail=True,
        max_code_chars=max_code_chars,
    )
    code = generator.func_code
    state = generator.global_state
    exec(compile(code, "<prism.validation.jsonschema>", "exec"), state)
    function: Callable[[Any], Any] = state[resolver.get_scope_name()]
    return function
