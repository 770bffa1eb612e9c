"""dequantize_row equals the reference Python decoder of the format, bit for bit.

The reference is the `gguf` package's `gguf.quants.dequantize`, written
independently of this project. Files are written with the package's
GGUFWriter, read back by our loader and dequantised by the test-only tool
`gguf_dump_tensor` (tests/loader), whose float32 output is compared bitwise.
"""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("EXACTLY_BUILD_DIR", ROOT / "build"))
TOOL = BUILD_DIR / "bin" / "gguf_dump_tensor"
MODEL = Path(os.environ.get("EXACTLY_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))

# Byte offsets of the fp16 scale fields inside one block of each type; raw
# random blocks get finite values there so that every output is finite.
FP16_FIELDS = {
    QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q8_0: [0],
    QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208],
}
QUANTISABLE = [QT.Q4_0, QT.Q4_1, QT.Q8_0, QT.MXFP4]  # the package can quantise these from floats


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():
        pytest.skip(f"{TOOL} not built (target gguf_dump_tensor)")
    return TOOL


def dump(tool, path, names):
    """Dequantised values of `names`, as float32 arrays, via our loader."""
    out = subprocess.run([str(tool), str(path), *names], capture_output=True, check=False)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return np.frombuffer(out.stdout, dtype=np.float32)


def finite_fp16_bits(rng, n):
    """Random fp16 bit patterns (normals, subnormals, signed zeros), never inf or NaN."""
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    h[(h & 0x7C00) == 0x7C00] ^= 0x4000  # an all-ones exponent becomes a finite one
    return h


def random_raw(rng, qtype, rows, cols):
    """Random stored bytes of a [rows, cols] tensor of `qtype`, with finite scales."""
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block_elems
    if qtype == QT.F32:
        bits = rng.integers(0, 1 << 32, size=rows * cols, dtype=np.uint64).astype(np.uint32)
        bits[(bits & 0x7F800000) == 0x7F800000] ^= 0x40000000
        return bits.view(np.uint8).reshape(rows, -1)
    if qtype == QT.F16:
        return finite_fp16_bits(rng, rows * cols).view(np.uint8).reshape(rows, -1)
    if qtype == QT.BF16:
        bits = rng.integers(0, 1 << 16, size=rows * cols, dtype=np.uint32).astype(np.uint16)
        bits[(bits & 0x7F80) == 0x7F80] ^= 0x4000
        return bits.view(np.uint8).reshape(rows, -1)
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint16).astype(np.uint8)
    for off in FP16_FIELDS.get(qtype, []):  # MXFP4's E8M0 scale: any byte is a finite power of two
        blocks[:, off:off + 2] = finite_fp16_bits(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(rows, -1)


def quantised(rng, qtype, rows, cols):
    """Stored bytes produced by the package's own quantiser from random floats."""
    x = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 10)).astype(np.float32)
    return gguf.quants.quantize(x, qtype)


SUPPORTED = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.MXFP4]


@pytest.fixture(scope="module")
def synthetic_file(tmp_path_factory):
    """A GGUF with random tensors of every supported type; returns (path, {name: (qtype, raw)})."""
    rng = np.random.default_rng(20240611)
    path = tmp_path_factory.mktemp("dequant") / "all_types.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    tensors = {}
    for qtype in SUPPORTED:
        block_elems = GGML_QUANT_SIZES[qtype][0]
        cols = 4 * max(block_elems, 32)
        variants = {"raw": random_raw(rng, qtype, 3, cols)}
        if qtype in QUANTISABLE:
            variants["quantised"] = quantised(rng, qtype, 5, cols)
        for kind, raw in variants.items():
            name = f"{qtype.name}.{kind}"
            writer.add_tensor(name, raw, raw_dtype=qtype)
            tensors[name] = (qtype, raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, tensors


def assert_bitwise_equal(ours, ref, what):
    assert ours.dtype == np.float32 and ref.dtype == np.float32
    assert ours.shape == ref.shape, f"{what}: {ours.shape} values, reference has {ref.shape}"
    assert not np.isnan(ref).any(), f"{what}: the reference itself produced NaN"
    diff = np.flatnonzero(ours.view(np.uint32) != ref.view(np.uint32))
    if diff.size:
        i = diff[0]
        pytest.fail(f"{what}: {diff.size} of {ref.size} values differ; first at element {i}: "
                    f"ours {ours[i]!r} ({ours.view(np.uint32)[i]:#010x}) vs reference "
                    f"{ref[i]!r} ({ref.view(np.uint32)[i]:#010x})")


@pytest.mark.parametrize("qtype", SUPPORTED, ids=lambda t: t.name)
def test_every_supported_type_matches_reference(tool, synthetic_file, qtype):
    path, tensors = synthetic_file
    names = [n for n, (t, _) in tensors.items() if t == qtype]
    assert names
    ours = dump(tool, path, names)
    offset = 0
    for name in names:
        raw = tensors[name][1]
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32, copy=False).ravel()
        assert_bitwise_equal(ours[offset:offset + ref.size], ref, name)
        offset += ref.size
    assert offset == ours.size


def test_listing_reports_shapes_written(tool, synthetic_file):
    path, tensors = synthetic_file
    out = subprocess.run([str(tool), str(path), "--list"], capture_output=True, text=True, check=True)
    listed = {name: (tname, int(n)) for name, tname, n in (line.split() for line in out.stdout.splitlines())}
    for name, (qtype, raw) in tensors.items():
        block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
        assert listed[name] == (qtype.name, raw.size // block_bytes * block_elems), name


def test_real_model_every_tensor_matches_reference(tool):
    if not MODEL.exists():
        pytest.skip(f"model not found at {MODEL}")
    reader = gguf.GGUFReader(str(MODEL))
    types = {t.tensor_type for t in reader.tensors}
    assert types == {QT.Q8_0, QT.Q4_1, QT.F32}
    # Batches of about 32M values keep memory modest and process starts few.
    batch, size = [], 0
    batches = []
    for t in reader.tensors:
        batch.append(t)
        size += int(t.n_elements)
        if size > 1 << 25:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    checked = 0
    for batch in batches:
        ours = dump(tool, MODEL, [t.name for t in batch])
        offset = 0
        for t in batch:
            ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).ravel()
            assert_bitwise_equal(ours[offset:offset + ref.size], ref, t.name)
            offset += ref.size
            checked += 1
        assert offset == ours.size
    assert checked == 272


@pytest.mark.parametrize("qtype", [QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K], ids=lambda t: t.name)
def test_unsupported_types_are_rejected_by_name(tool, tmp_path, qtype):
    """A valid file holding a type the engine cannot compute with is refused, naming tensor and type."""
    rng = np.random.default_rng(7)
    path = tmp_path / f"{qtype.name}.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(2, 2 * block_bytes), dtype=np.uint16).astype(np.uint8)
    writer.add_tensor("blk.0.ffn_up.weight", raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    out = subprocess.run([str(tool), str(path), "--list"], capture_output=True, text=True, check=False)
    assert out.returncode == 2, out.stderr
    assert "blk.0.ffn_up.weight" in out.stderr and qtype.name in out.stderr and "not supported" in out.stderr
