import inspect

import prism.coding.security

DOCUMENTED = {
    "DEFAULT_DENY_PATTERNS",
    "PROTECTED_PATHS",
    "SAFE_PROGRAMS",
    "ApprovalCallback",
    "ApprovalDecision",
    "BubblewrapSandbox",
    "CommandCheck",
    "CommandExplanation",
    "CommandRule",
    "CommandRules",
    "LandlockSandbox",
    "PathEscapeError",
    "SandboxBackend",
    "SandboxUnavailableError",
    "SecureCodingTools",
    "create_coding_approval_policy",
    "create_contained_file_operations",
    "create_sandbox_shell_operations",
    "explain_command",
    "open_secure_coding_tools",
}


def test_all_matches_documented_names() -> None:
    assert set(prism.coding.security.__all__) == DOCUMENTED
    assert prism.coding.security.__all__ == sorted(
        prism.coding.security.__all__, key=lambda n: (not n.isupper(), n)
    )


def test_every_export_exists() -> None:
    for name in prism.coding.security.__all__:
        assert hasattr(prism.coding.security, name), name


def test_every_class_and_function_export_has_a_docstring() -> None:
    for name in prism.coding.security.__all__:
        obj = getattr(prism.coding.security, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_errors_derive_from_prism_error() -> None:
    from prism.core import PrismError

    assert issubclass(prism.coding.security.PathEscapeError, PrismError)
    assert issubclass(prism.coding.security.SandboxUnavailableError, PrismError)
    assert not issubclass(prism.coding.security.PathEscapeError, PermissionError)


def test_namespace_packages_have_no_init() -> None:
    import prism
    import prism.coding

    assert getattr(prism, "__file__", None) is None
    assert getattr(prism.coding, "__file__", None) is None


def test_the_shell_parser_is_imported_at_the_first_command_judged() -> None:
    # Its parser tables cost 0.15-0.2 s of CPU: not paid by `prism serve` before it serves.
    import subprocess
    import sys

    code = (
        "import sys, prism.coding.security as s\n"
        "before = 'bashlex' in sys.modules\n"
        "s.explain_command('ls | wc -l', roots=['/'])\n"
        "print(before, 'bashlex' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
