"""Client tests: ``client_helpers`` is imported by name, as the broker tests do with theirs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
