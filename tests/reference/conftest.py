"""Fixtures for the reference's own tests (python -m pytest tests/reference).

EXACTLY_MODEL overrides the model, as in tests/e2e.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = Path(os.environ.get("EXACTLY_MODEL", REPO_ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not path.is_file():
        pytest.fail(f"model not found: {path} (run scripts/fetch-model or set EXACTLY_MODEL)")
    return path


@pytest.fixture(scope="session")
def ref_model(model_path):
    import llama_ref
    return llama_ref.load(str(model_path))


@pytest.fixture(scope="session")
def ref_tokenizer(model_path):
    import tokenizer_ref
    return tokenizer_ref.load_tokenizer(str(model_path))
