"""The fixture server, started only when the test says so (a slow or failing start).

argv: FIFO. The server opens FIFO and reads one line before it does anything:
``start`` serves the fixture server's tools, anything else exits with status 3
after printing the line to stderr. So a test decides when (and whether) a
downstream server comes up, with no timing guesses.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_fixture_server import build

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fifo:
        word = fifo.readline().strip()
    if word != "start":
        sys.stderr.write(f"told not to start: {word}\n")
        sys.exit(3)
    build().run()
