import inspect

import prism.coding.tools

DOCUMENTED = {
    "AccessGrant",
    "DEFAULT_MAX_EDIT_BYTES",
    "DEFAULT_MAX_IMAGE_BYTES",
    "DEFAULT_MAX_SPILL_BYTES",
    "DEFAULT_SHELL_TIMEOUT_S",
    "CodingToolsError",
    "EditToolOptions",
    "FileKind",
    "FileMutationQueue",
    "FileOperations",
    "FileStat",
    "InPlaceEdits",
    "CodingToolsConfigurationError",
    "LocalFileOperations",
    "LocalShellOperations",
    "OutputSink",
    "ReadToolOptions",
    "RedirectedWrites",
    "ShellExit",
    "ShellOperations",
    "ShellSpawnRequest",
    "ShellToolOptions",
    "SpawnHook",
    "TransformImage",
    "TransformImageInput",
    "create_coding_tools",
    "create_edit_tool",
    "create_read_tool",
    "create_shell_tool",
    "create_write_tool",
    "default_mutation_queue",
    "default_shell_path",
    "detect_image_mime_type",
    "read_file_range",
    "replace_file_in_directory",
    "run_process_tree",
}


def test_all_matches_documented_names() -> None:
    assert set(prism.coding.tools.__all__) == DOCUMENTED
    assert prism.coding.tools.__all__ == sorted(
        prism.coding.tools.__all__, key=lambda n: (not n.isupper(), n)
    )


def test_every_export_exists() -> None:
    for name in prism.coding.tools.__all__:
        assert hasattr(prism.coding.tools, name), name


def test_every_class_and_function_export_has_a_docstring() -> None:
    for name in prism.coding.tools.__all__:
        obj = getattr(prism.coding.tools, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_default_image_limit_is_ten_megabytes() -> None:
    assert prism.coding.tools.DEFAULT_MAX_IMAGE_BYTES == 10_000_000


def test_namespace_packages_have_no_init() -> None:
    import prism
    import prism.coding

    assert getattr(prism, "__file__", None) is None
    assert getattr(prism.coding, "__file__", None) is None


def test_package_docstring_example_runs(tmp_path: object) -> None:
    doc = prism.coding.tools.__doc__
    assert doc is not None
    example = doc.split("Example::", 1)[1].split("\n\n", 2)[1]
    code = "\n".join(line[4:] for line in example.splitlines())
    exec(compile(code, "<docstring>", "exec"), {})


def test_testing_module_exports_documented_doubles_and_checks() -> None:
    import prism.coding.tools.testing as kit

    assert kit.__all__ == [
        "RecordingFileOperations",
        "ScriptedShellOperations",
        "assert_file_operations_conform",
        "assert_shell_operations_conform",
    ]
    for name in kit.__all__:
        assert inspect.getdoc(getattr(kit, name)), f"{name} has no docstring"


def test_the_configuration_error_follows_the_package_pattern() -> None:
    # Renamed from InvalidToolOptionError (nothing was published): <Package>ConfigurationError.
    from prism.core import ConfigurationError

    assert not hasattr(prism.coding.tools, "InvalidToolOptionError")
    error = prism.coding.tools.CodingToolsConfigurationError
    assert issubclass(error, prism.coding.tools.CodingToolsError)
    assert issubclass(error, ConfigurationError)
