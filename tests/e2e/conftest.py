"""Shared fixtures for the end-to-end tests of the `exactly` executable.

Run from the repository root:   .venv/bin/python -m pytest tests/e2e -s
(-s shows the measured error figures the tests print.)

Environment:
  EXACTLY_BUILD_DIR  build directory holding bin/exactly (default <repo>/build)
  EXACTLY_MODEL      model file (default <repo>/models/SmolLM2-135M-Instruct.Q4_1.gguf)

Fixtures:
  repo_root     Path of the repository
  exactly_bin   Path of the executable (the test fails if it is missing)
  model_path    Path of the model (the test fails if it is missing)
  run_exactly   run_exactly(args, timeout=300, input=None, check=True)
                -> subprocess.CompletedProcess with text stdout/stderr;
                with check=True a non-zero exit fails the test and shows stderr
  prompts_dir   Path of tests/data/prompts
  ref_model     float64 reference model (tests/reference/llama_ref.py), loaded once
  ref_tokenizer reference tokenizer (tests/reference/tokenizer_ref.py), loaded once
  prompt_ids    prompt_ids(name, max_tokens=None) -> list[int]: the text of
                tests/data/prompts/<name> (used verbatim) encoded by the
                reference tokenizer with BOS prepended when the model asks, optionally cut
                to its first max_tokens ids
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# The reference implementations are plain modules, not an installed package.
sys.path.insert(0, str(REPO_ROOT / "tests" / "reference"))

from shared_fixtures import built_tool, model_path, ref_model, ref_tokenizer  # noqa: E402,F401  (fixtures)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def exactly_bin() -> Path:
    return built_tool("exactly")


@pytest.fixture(scope="session")
def run_exactly(exactly_bin):
    def run(args, timeout: float = 300, input: str | None = None, check: bool = True):
        cmd = [str(exactly_bin), *map(str, args)]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} exited with {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}")
        return proc
    return run


@pytest.fixture(scope="session")
def prompts_dir() -> Path:
    return REPO_ROOT / "tests" / "data" / "prompts"


@pytest.fixture(scope="session")
def bos_id(model_path):
    """The BOS id to prepend, as the model's metadata asks (None when it does not)."""
    from gguf import GGUFReader
    fields = GGUFReader(str(model_path)).fields
    add = fields.get("tokenizer.ggml.add_bos_token")
    if add is None or not bool(add.contents()):
        return None
    return int(fields["tokenizer.ggml.bos_token_id"].contents())


@pytest.fixture(scope="session")
def prompt_ids(prompts_dir, ref_tokenizer, bos_id):
    import tokenizer_ref

    def ids(name: str, max_tokens: int | None = None) -> list[int]:
        text = (prompts_dir / name).read_text(encoding="utf-8")
        out = tokenizer_ref.encode(ref_tokenizer, text, bos_id=bos_id)
        if max_tokens is not None:
            if len(out) < max_tokens:
                pytest.fail(f"prompt {name} has {len(out)} tokens, fewer than the {max_tokens} asked for")
            out = out[:max_tokens]
        return out
    return ids
