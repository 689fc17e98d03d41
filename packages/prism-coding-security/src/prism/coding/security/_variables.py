"""Environment variables whose value names what a later program loads or runs.

One table for every reader of shell text that sets variables (an ``.envrc``,
whose exports direnv puts in the user's shell; a hook's own assignments): a
file or directory of the tree such a variable names is protected, and so is
what a command it holds runs.
"""

from __future__ import annotations

import re

__all__ = [
    "COMMAND_VARIABLES",
    "LOADED_VARIABLES",
    "SEARCH_DIRECTORIES",
    "SEARCH_FILES",
    "variable_named",
]

SEARCH_DIRECTORIES = ("LD_LIBRARY_PATH", "PYTHONPATH", "NODE_PATH", "PERL5LIB", "PERLLIB",
                      "RUBYLIB", "GEM_PATH", "GEM_HOME", "CLASSPATH")  # fmt: skip
"""Variables naming directories the user's later programs load code from, before their own.

``PYTHONPATH`` precedes the standard library (a ``re.py`` there runs in every
python that imports ``re``), ``PERL5LIB`` and ``RUBYLIB`` theirs, the dynamic
loader searches ``LD_LIBRARY_PATH`` before the system's libraries.
"""

SEARCH_FILES = ("LD_PRELOAD", "LD_AUDIT", "PYTHONSTARTUP", "BASH_ENV", "ENV")
"""Variables naming files that later programs load or run as they start."""

# node's options that load a module before the program (NODE_OPTIONS)
_NODE_PRELOADS = re.compile(
    r"(?:--require|-r|--import|--loader|--experimental-loader)(?:=|[ \t]+)[\"']?([^\s\"']+)"
)

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

    The files and directories it names (:data:`SEARCH_DIRECTORIES` but
    ``PYTHONPATH``, :data:`SEARCH_FILES`, :data:`LOADED_VARIABLES`, the modules
    ``NODE_OPTIONS`` preloads), and the command it holds
    (:data:`COMMAND_VARIABLES`), to be read as shell text; ``([], None)`` for
    any other variable::

        >>> variable_named("GIT_CONFIG_GLOBAL", "/p/d/gitconfig")
        (['/p/d/gitconfig'], None)
        >>> variable_named("LESSOPEN", "|/p/d/lo.sh %s")
        ([], '/p/d/lo.sh ')
    """
    if name == "PYTHONPATH":
        return [], None  # (its directories: what shadows a module there, see _implied)
    if name in SEARCH_DIRECTORIES or name in SEARCH_FILES or name in LOADED_VARIABLES:
        # (ld.so splits LD_PRELOAD at spaces too)
        return [e for e in re.split("[: ]" if name == "LD_PRELOAD" else ":", value) if e], None
    if name == "NODE_OPTIONS":
        return _NODE_PRELOADS.findall(value), None
    if name in COMMAND_VARIABLES:
        return [], _LESS_PIPE.sub("", value) if name.startswith("LESS") else value
    return [], None
