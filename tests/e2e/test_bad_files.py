"""Every subcommand that opens a model rejects a corrupt one cleanly.

Contract: exit code 2, stderr names the file and says what is wrong, and
nothing crashes (no signal, no abort, no internal check, no sanitizer report).
The corrupt files are made from the real model: truncated prefixes where the
defect is in the header or tensor infos, full-size copies where it must be
seen in context (the data section).
"""
import os
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("EXACTLY_BUILD_DIR", ROOT / "build"))
EXACTLY = BUILD_DIR / "bin" / "exactly"
MODEL = Path(os.environ.get("EXACTLY_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))

GGUF_ALIGNMENT = 32  # the default model does not override general.alignment

# Each subcommand that opens a model, as argument lists; F stands for the model
# file, TEXT for a small text file and OUT for an output file.
COMMANDS = {
    "info": ["info", "-m", "F"],
    "run": ["run", "-m", "F", "-p", "hi", "-n", "1"],
    "tokenize": ["tokenize", "-m", "F", "hi"],
    "perplexity": ["perplexity", "-m", "F", "-f", "TEXT"],
    "bench": ["bench", "model", "-m", "F", "-r", "1"],
    "logits": ["logits", "-m", "F", "--tokens", "1,2", "--out", "OUT"],
}

CRASH_MARKERS = ["Traceback", "Aborted", "core dumped", "internal check failed", "terminate called",
                 "Segmentation fault", "AddressSanitizer", "runtime error:", "std::bad_alloc"]


def read_layout(data):
    """Byte offsets in a GGUF v3 image found with a minimal independent walk:
    where the tensor infos start, where tensor 0's type and offset fields are,
    and where the data section starts."""
    pos = 24
    _, _, n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(pos, vtype):
        if vtype in fixed:
            return pos + fixed[vtype]
        if vtype == 8:
            (n,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + n
        assert vtype == 9
        etype, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        for _ in range(count):
            pos = skip_value(pos, etype)
        return pos

    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(pos + 4, vtype)
    infos_start = pos
    first_type = first_offset = None
    for i in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + nlen
        (ndims,) = struct.unpack_from("<I", data, pos)
        pos += 4 + 8 * ndims
        if i == 0:
            first_type, first_offset = pos, pos + 4
        pos += 12
    data_start = (pos + GGUF_ALIGNMENT - 1) // GGUF_ALIGNMENT * GGUF_ALIGNMENT
    return infos_start, first_type, first_offset, data_start


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """{case name: (path, words any of which the error message must contain)}."""
    if not EXACTLY.exists():
        pytest.skip(f"{EXACTLY} not built")
    if not MODEL.exists():
        pytest.skip(f"model not found at {MODEL}")
    out = tmp_path_factory.mktemp("bad_models")
    size = MODEL.stat().st_size
    with open(MODEL, "rb") as f:
        header = f.read(4 << 20)  # all metadata and tensor infos of the default model
    infos_start, type_at, offset_at, data_start = read_layout(header)
    assert infos_start < data_start < len(header)

    truncated = ["truncated", "past end", "cannot fit", "empty"]
    files = {}

    def write(name, data, reason):
        path = out / f"{name}.gguf"
        path.write_bytes(data)
        files[name] = (path, reason)

    for cut in [0, 3, 7, 100, 5000, (infos_start + data_start) // 2]:
        write(f"truncated_at_{cut}", header[:cut], truncated)
    write("bad_magic", b"GGML" + header[4:5000], ["magic"])
    write("huge_tensor_count", header[:8] + struct.pack("<Q", 1 << 60) + header[16:5000], ["tensor count"])

    def patched_full_copy(name, at, value, reason):
        path = out / f"{name}.gguf"
        with open(MODEL, "rb") as src, open(path, "wb") as dst:
            while chunk := src.read(16 << 20):
                dst.write(chunk)
            dst.seek(at)
            dst.write(value)
        files[name] = (path, reason)

    patched_full_copy("tensor_type_99", type_at, struct.pack("<I", 99), ["99"])
    patched_full_copy("misaligned_offset", offset_at, struct.pack("<Q", 16), ["align"])
    middle = out / "truncated_in_data.gguf"
    with open(MODEL, "rb") as src, open(middle, "wb") as dst:
        dst.write(src.read(size // 2))
    files["truncated_in_data"] = (middle, truncated)

    text = out / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog.\n" * 4)
    return files, text


CASES = ["truncated_at_0", "truncated_at_3", "truncated_at_7", "truncated_at_100", "truncated_at_5000",
         "truncated_in_tensor_infos", "truncated_in_data", "bad_magic", "huge_tensor_count",
         "tensor_type_99", "misaligned_offset"]


def resolve_case(files, case):
    if case == "truncated_in_tensor_infos":
        [name] = [n for n in files if n.startswith("truncated_at_") and int(n.rsplit("_", 1)[1]) > 5000]
        return files[name]
    return files[case]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", CASES)
def test_corrupt_model_exits_2_with_clear_message(bad_files, case, command):
    files, text = bad_files
    path, reasons = resolve_case(files, case)
    placeholders = {"F": str(path), "TEXT": str(text), "OUT": str(text.parent / f"{case}.{command}.out")}
    args = [placeholders.get(a, a) for a in COMMANDS[command]]
    proc = subprocess.run([str(EXACTLY), *args], capture_output=True, text=True, errors="replace",
                          timeout=60, stdin=subprocess.DEVNULL)
    stderr = proc.stderr
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}; stderr:\n{stderr}"
    for marker in CRASH_MARKERS:
        assert marker not in stderr, f"crash marker {marker!r} in stderr:\n{stderr}"
    assert proc.returncode == 2, f"exit code {proc.returncode}, expected 2; stderr:\n{stderr}"
    assert path.name in stderr, f"stderr does not name the file {path.name}:\n{stderr}"
    assert any(r in stderr for r in reasons), f"stderr gives none of the reasons {reasons}:\n{stderr}"
