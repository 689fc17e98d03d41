"""Environment variables whose value names what a later program loads or runs.

One table for every reader of shell text that sets variables (an ``.envrc``,
whose exports direnv puts in the user's shell; a hook's own assignments): a
file or directory of the tree such a variable names is protected, and so is
what a command it holds runs.
"""

from __future__ import annotations

import re

__all__ = ["COMMAND_VARIABLES", "LOADED_VARIABLES", "variable_named"]

LOADED_VARIABLES = (
    # git's configuration (its command keys, includes), programs, templates, repository
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG", "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR", "GIT_DIR", "GIT_COMMON_DIR",
    # whole configuration trees: git's, every XDG tool's, a shell's, the home itself
    "XDG_CONFIG_HOME", "ZDOTDIR", "HOME",
    # tools' configurations that name programs they run (kubectl's exec plugins, the AWS
    # tools' credential_process, docker's plugins, npm's script-shell, cargo's wrappers)
    "KUBECONFIG", "AWS_CONFIG_FILE", "DOCKER_CONFIG", "NPM_CONFIG_USERCONFIG",
    "npm_config_userconfig", "CARGO_HOME",
    # Python's user site (its .pth files run at every start), readline's key bindings
    "PYTHONUSERBASE", "INPUTRC",
)  # fmt: skip
"""Variables naming files or directories programs read as their configuration or code
(each ``:``-separated entry protected whole)."""

COMMAND_VARIABLES = (
    "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER",
    "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "GIT_PROXY_COMMAND",
    "EDITOR", "VISUAL", "FCEDIT", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE",
    "PROMPT_COMMAND", "SHELL", "BROWSER",
)  # fmt: skip
"""Variables holding a command a program or the user's shell runs (``PROMPT_COMMAND``
at every prompt, ``EDITOR`` at ``git commit``): read as shell text."""

_LESS_PIPE = re.compile(r"^[|]+-?|%s")


def variable_named(name: str, value: str) -> tuple[list[str], str | None]:
    """What assigning ``value`` to ``name`` makes a later program load or run.

    The files and directories it names (:data:`LOADED_VARIABLES`), and the
    command it holds (:data:`COMMAND_VARIABLES`), to be read as shell text;
    ``([], None)`` for any other variable::

        >>> variable_named("GIT_CONFIG_GLOBAL", "/p/d/gitconfig")
        (['/p/d/gitconfig'], None)
        >>> variable_named("LESSOPEN", "|/p/d/lo.sh %s")
        ([], '/p/d/lo.sh ')
    """
    if name in LOADED_VARIABLES:
        return [entry for entry in value.split(":") if entry], None
    if name in COMMAND_VARIABLES:
        return [], _LESS_PIPE.sub("", value) if name.startswith("LESS") else value
    return [], None
