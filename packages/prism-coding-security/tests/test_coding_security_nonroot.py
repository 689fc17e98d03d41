"""The sandboxes as an unprivileged user: smoke runs under ``setpriv``.

Prism usually runs as an ordinary user, where bubblewrap and the overlay of
each root need unprivileged user namespaces; the rest of the suite may run as
root. Run as root, this test drops to uid/gid 65534 (``setpriv``) and runs a
small script there: a confined write lands, a protected one is left out, an
approved one (an ``AccessGrant``) lands, and the command keeps the caller's ids.
Under Landlock (its helper runs as that user): a write inside the root lands, one
outside is refused, and a ``setsid`` daemon ends with the call.
It skips, saying why, when not run as root or when that user cannot reach a
Python interpreter or this checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

import pytest
import trio

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = [pytest.mark.slow]

_UID = 65534
# where this checkout's dependencies (and its editable installs' .pth files) live
_SITE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(trio.__file__)))
_SMOKE = """
import json, os, site, sys
site.addsitedir(sys.argv[1])
import trio
from prism.coding.security import BubblewrapSandbox, create_sandbox_shell_operations
from prism.coding.tools import AccessGrant, ShellSpawnRequest

print("imported", flush=True)
root = sys.argv[2]
ops = create_sandbox_shell_operations(BubblewrapSandbox([root]))
out = []

async def sink(chunk):
    out.append(chunk.decode())

async def main():
    env = {"PATH": "/usr/bin:/bin"}
    first = ShellSpawnRequest(command="id -u; echo hi > made.txt; echo x > .bashrc; mkdir sub",
                              shell_path="/bin/sh", cwd=root, env=env)
    await ops.run(first, sink)
    grant = AccessGrant(protected_writes=(os.path.join(root, ".envrc"),))
    second = ShellSpawnRequest(command="echo export X=1 > .envrc; echo y > .profile",
                               shell_path="/bin/sh", cwd=root, env=env, grant=grant)
    await ops.run(second, sink)
    # proved to write nothing (no namespace of Prism's own), and narrowed to sub/
    third = ShellSpawnRequest(command="id -u; echo z > ro.txt", shell_path="/bin/sh",
                              cwd=root, env=env, read_only=True)
    await ops.run(third, sink)
    fourth = ShellSpawnRequest(command="id -u; echo w > sub/w; echo v > v.txt",
                               shell_path="/bin/sh", cwd=root, env=env,
                               write_dirs=[os.path.join(root, "sub")])
    await ops.run(fourth, sink)

trio.run(main)
print(json.dumps({"uid": os.getuid(), "files": sorted(os.listdir(root)), "output": "".join(out)}))
"""


def _as_user(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    # through sh: setpriv itself may exec what the user's own processes cannot (seen here:
    # an interpreter under a directory only root may search)
    command = [setpriv, f"--reuid={_UID}", f"--regid={_UID}", "--clear-groups", "--",
               "/bin/sh", "-c", 'exec "$@"', "sh", *argv]  # fmt: skip
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        command, capture_output=True, text=True, check=False, timeout=60, **kwargs
    )


def _smoke(root: str, script: str = _SMOKE, *more: str) -> subprocess.CompletedProcess[str]:
    """A smoke run, on the first Python the user can run that imports this checkout; or skip."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/", "TMPDIR": "/tmp"}
    why = []
    for candidate in (sys.executable, "/usr/bin/python3"):
        if not os.path.exists(candidate):
            continue
        done = _as_user([candidate, "-c", script, _SITE_DIR, root, *more], env=env)
        if done.stdout.startswith("imported"):
            return done
        why.append(f"{candidate}: {done.stderr.strip().splitlines()[-1:]}")
    pytest.skip(f"uid {_UID} cannot run a Python that imports this checkout: {'; '.join(why)}")


@pytest.fixture
def user_root() -> Iterator[str]:
    # not under pytest's tmp_path: that is private to the user running pytest
    base = tempfile.mkdtemp(prefix="prism-nonroot-")
    try:
        os.chmod(base, 0o755)
        root = os.path.join(base, "project")
        os.mkdir(root)
        os.chown(root, _UID, _UID)
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.bwrap
@pytest.mark.skipif(os.getuid() != 0, reason="needs root to drop to another user")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
async def test_the_sandbox_works_for_an_unprivileged_user(user_root: str) -> None:
    done = await trio.to_thread.run_sync(_smoke, user_root)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["uid"] == _UID
    # the command kept the caller's ids; its write landed; .bashrc and .profile were left
    # out; the approved .envrc came back
    assert report["output"].splitlines()[0] == str(_UID)
    assert ".bashrc" in report["output"]
    assert ".profile" in report["output"]
    # read-only and narrowed: the same ids; ro.txt and v.txt fail, sub/w lands
    assert report["output"].splitlines().count(str(_UID)) == 3
    assert report["output"].count("Read-only file system") == 2
    assert report["files"] == [".envrc", "made.txt", "sub"]
    assert os.listdir(os.path.join(user_root, "sub")) == ["w"]
    assert os.stat(os.path.join(user_root, "made.txt")).st_uid == _UID
    assert os.stat(os.path.join(user_root, "sub", "w")).st_uid == _UID


_LANDLOCK_SMOKE = """
import json, os, site, sys
site.addsitedir(sys.argv[1])
import trio
from prism.coding.security import LandlockSandbox, create_sandbox_shell_operations
from prism.coding.tools import ShellSpawnRequest

print("imported", flush=True)
root, outside = sys.argv[2], sys.argv[3]
ops = create_sandbox_shell_operations(LandlockSandbox([root]))
out = []

async def sink(chunk):
    out.append(chunk.decode())

async def main():
    command = (f"id -u; echo hi > made.txt; echo x > {outside}/x; "
               "setsid -f env -i /bin/sh -c 'echo $$ > daemon.pid; exec sleep 300'; "
               "until [ -s daemon.pid ]; do :; done")
    await ops.run(ShellSpawnRequest(command=command, shell_path="/bin/sh", cwd=root,
                                    env={"PATH": "/usr/bin:/bin"}), sink)

trio.run(main)
with open(os.path.join(root, "daemon.pid")) as handle:
    daemon = int(handle.read())
print(json.dumps({"uid": os.getuid(), "files": sorted(os.listdir(root)),
                  "output": "".join(out), "daemon_alive": os.path.exists(f"/proc/{daemon}")}))
"""


@pytest.mark.landlock
@pytest.mark.skipif(os.getuid() != 0, reason="needs root to drop to another user")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
async def test_landlock_works_for_an_unprivileged_user(user_root: str) -> None:
    # its helper (started once, forking per command) runs as that user: the write inside
    # the root lands, the one outside is refused, the daemon ends with the call
    outside = os.path.join(os.path.dirname(user_root), "outside")
    os.mkdir(outside)
    os.chown(outside, _UID, _UID)
    done = await trio.to_thread.run_sync(_smoke, user_root, _LANDLOCK_SMOKE, outside)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["uid"] == _UID
    assert report["output"].splitlines()[0] == str(_UID)
    assert "Permission denied" in report["output"]
    assert report["files"] == ["daemon.pid", "made.txt"]
    assert os.listdir(outside) == []
    assert report["daemon_alive"] is False
