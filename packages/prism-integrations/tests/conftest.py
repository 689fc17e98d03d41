"""The adapters' tests import their shared gates from integrations_kit.py beside them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
