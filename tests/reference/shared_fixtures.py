"""Fixtures shared by tests/reference and tests/e2e: the model file and the
float64 reference model and tokenizer, each loaded once per test run.
A conftest makes them available with `from shared_fixtures import ...`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def built_tool(name: str) -> Path:
    """A program of the build (bin/NAME under EXACTLY_BUILD_DIR, default <repo>/build)."""
    build = Path(os.environ.get("EXACTLY_BUILD_DIR", REPO_ROOT / "build"))
    path = build / "bin" / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"executable not found: {path} (build target {name} or set EXACTLY_BUILD_DIR)")
    return path


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = Path(os.environ.get("EXACTLY_MODEL", REPO_ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not path.is_file():
        pytest.fail(f"model not found: {path} (run scripts/fetch-model or set EXACTLY_MODEL)")
    return path


@pytest.fixture(scope="session")
def ref_model(model_path):
    import llama_ref  # ~1 GB of float64 weights
    return llama_ref.load(str(model_path))


@pytest.fixture(scope="session")
def ref_tokenizer(model_path):
    import tokenizer_ref
    return tokenizer_ref.load_tokenizer(str(model_path))
