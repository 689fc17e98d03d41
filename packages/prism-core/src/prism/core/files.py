"""prism.core.files: open the files Prism writes so that no planted link redirects them.

Every file a Prism package writes (ledgers, their locks and rotated files,
SQLite databases, pins files, spill files) is opened with
:func:`open_private_file`: the final name is never followed if it is a
symlink, what is opened must be a regular file with one link, and below any
of ``roots`` (folders an agent may write in) no directory on the way may be
a link::

    import os
    from prism.core.files import UnsafeFileError, open_private_file

    os.symlink("/etc/hostname", "planted.log")
    try:
        open_private_file("planted.log")
    except UnsafeFileError as exc:
        print(exc)  # planted.log is a symbolic link; Prism does not write through it

    opened = open_private_file("safe.log", roots=["."])
    os.write(opened.fd, b"one line")
    os.close(opened.fd)
    os.close(opened.directory_fd)
"""

from ._files import FileIdentity as FileIdentity
from ._files import OpenedFile as OpenedFile
from ._files import UnsafeFileError as UnsafeFileError
from ._files import inside_any as inside_any
from ._files import open_private_file as open_private_file

__all__ = ["FileIdentity", "OpenedFile", "UnsafeFileError", "inside_any", "open_private_file"]
