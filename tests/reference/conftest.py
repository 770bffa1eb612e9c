"""Fixtures for the reference's own tests (python -m pytest tests/reference).

EXACTLY_MODEL overrides the model, as in tests/e2e.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shared_fixtures import model_path, ref_model, ref_tokenizer  # noqa: E402,F401  (fixtures)
