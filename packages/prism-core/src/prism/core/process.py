"""prism.core.process: terminating a whole OS process tree.

The one implementation behind both packages that start processes: the
coding tools' shell (``prism.coding.tools``) and the MCP stdio transport
(``prism.mcp``). It lives beside the contracts, in the one package both
already depend on, but outside the ``prism.core`` namespace, which is about
tool calls::

    from prism.core.process import PROCESS_TREE_ENV_VAR, terminate_process_tree

    env = {**os.environ, PROCESS_TREE_ENV_VAR: marker}
    ...  # start the root in a new session with that environment
    await terminate_process_tree(root_pid, marker=marker)
"""

from ._process import DEFAULT_KILL_GRACE_S as DEFAULT_KILL_GRACE_S
from ._process import PROCESS_TREE_ENV_VAR as PROCESS_TREE_ENV_VAR
from ._process import terminate_process_tree as terminate_process_tree

__all__ = ["DEFAULT_KILL_GRACE_S", "PROCESS_TREE_ENV_VAR", "terminate_process_tree"]
