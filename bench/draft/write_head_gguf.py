#!/usr/bin/env python3
"""Writes a draft head (`exactly ... --spec head:H.gguf`) as GGUF, from the
weights bench/draft/train_head.py saved, or random ones for tests.

    write_head_gguf.py --target T.gguf --trained HEAD.npz --out H.gguf [--type F16]
    write_head_gguf.py --target T.gguf --random SEED --out H.gguf [--ffn 256]

The file's layout is model/draft_head.h's: architecture exactly-draft-head,
the target's hidden size, vocabulary and layer count as metadata (the engine
refuses a head made for another model), fc.weight, one llama layer blk.0.*
and output_norm.weight. HEAD.npz holds those tensors under the same names,
each [rows, cols] as PyTorch stores a Linear's weight, the layer's head
counts (n_heads, n_kv_heads; its rotary base and norm epsilon are the
target's) and optionally vocab_ids, the tokens of a partial head. Needs numpy and the gguf package only.
"""
import argparse

import gguf
import numpy as np

ARCH = "exactly-draft-head"
OUTPUT_TOKEN_IDS = "exactly.output_token_ids"
LAYER = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]
NAMES = ["fc.weight"] + [f"blk.0.{n}.weight" for n in LAYER] + ["output_norm.weight"]


def target_shape(target_path):
    """(dim, vocab, n_layers, n_heads, n_kv_heads, rope_freq_base, rms_eps) of a llama GGUF."""
    r = gguf.GGUFReader(target_path)
    arch = r.fields["general.architecture"].contents()

    def get(key, default=None):
        f = r.fields.get(f"{arch}.{key}")
        return f.contents() if f is not None else default

    embd = next(t for t in r.tensors if t.name == "token_embd.weight")
    n_heads = get("attention.head_count")
    return dict(dim=get("embedding_length"), vocab=int(embd.shape[1]), n_layers=get("block_count"),
                n_heads=n_heads, n_kv_heads=get("attention.head_count_kv", n_heads),
                rope_freq_base=get("rope.freq_base", 10000.0), rms_eps=get("attention.layer_norm_rms_epsilon", 1e-5))


def random_head(shape, seed, ffn, scale=0.05):
    """A head with random weights of the target's shape: drafts that are wrong mostly, for tests."""
    rng = np.random.default_rng(seed)
    d, hd = shape["dim"], shape["dim"] // shape["n_heads"]
    kv = shape["n_kv_heads"] * hd

    def m(rows, cols):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    t = {"fc.weight": m(d, 2 * d), "blk.0.attn_norm.weight": np.ones(d, np.float32),
         "blk.0.attn_q.weight": m(d, d), "blk.0.attn_k.weight": m(kv, d), "blk.0.attn_v.weight": m(kv, d),
         "blk.0.attn_output.weight": m(d, d), "blk.0.ffn_norm.weight": np.ones(d, np.float32),
         "blk.0.ffn_gate.weight": m(ffn, d), "blk.0.ffn_up.weight": m(ffn, d), "blk.0.ffn_down.weight": m(d, ffn),
         "output_norm.weight": (1 + rng.standard_normal(d) * 0.1).astype(np.float32)}
    return t


def write_head(out_path, shape, tensors, vocab_ids=None, matrix_type="F32", meta_override=None, skip_checks=False):
    """Writes `tensors` (name -> float array, [rows, cols]) with `shape`'s metadata, matrices as
    `matrix_type`, everything else as F32 (a float16 array stays F16: tests of bad files).
    meta_override (key suffix -> value or None to leave out) and skip_checks serve those tests too."""
    if not skip_checks:
        missing = [n for n in NAMES if n not in tensors]
        if missing:
            raise SystemExit(f"no tensor {missing[0]}")
    qtype = gguf.GGMLQuantizationType[matrix_type]
    w = gguf.GGUFWriter(out_path, ARCH)
    ffn = tensors["blk.0.ffn_gate.weight"].shape[0] if "blk.0.ffn_gate.weight" in tensors else 1
    meta = {"embedding_length": shape["dim"], "vocab_size": shape["vocab"], "target_layer": shape["n_layers"],
            "feed_forward_length": ffn, "attention.head_count": shape["n_heads"],
            "attention.head_count_kv": shape["n_kv_heads"]}
    meta.update(meta_override or {})
    w.add_name("draft head")
    for key, value in meta.items():
        if value is not None:
            w.add_uint32(f"{ARCH}.{key}", int(value))
    w.add_float32(f"{ARCH}.rope.freq_base", float(shape["rope_freq_base"]))
    w.add_float32(f"{ARCH}.attention.layer_norm_rms_epsilon", float(shape["rms_eps"]))
    if vocab_ids is not None:
        w.add_key_value(OUTPUT_TOKEN_IDS, [int(i) for i in vocab_ids], gguf.GGUFValueType.ARRAY,
                        sub_type=gguf.GGUFValueType.INT32)
    for name, array in tensors.items():
        a = np.ascontiguousarray(array)
        if a.dtype != np.float16:
            a = a.astype(np.float32)
        if a.ndim == 2 and qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True, help="the target model's GGUF")
    ap.add_argument("--out", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--trained", help="HEAD.npz from train_head.py")
    src.add_argument("--random", type=int, metavar="SEED", help="random weights (tests)")
    ap.add_argument("--ffn", type=int, default=256, help="--random: the layer's feed-forward size")
    ap.add_argument("--type", default="F16", choices=["F32", "F16"], help="the matrices' type")
    args = ap.parse_args()
    shape = target_shape(args.target)
    vocab_ids = None
    if args.random is not None:
        tensors = random_head(shape, args.random, args.ffn)
    else:
        z = np.load(args.trained)
        tensors = {n: z[n] for n in NAMES if n in z}
        vocab_ids = z["vocab_ids"] if "vocab_ids" in z else None
        for key in ("n_heads", "n_kv_heads"):
            if key in z and int(z[key]) != shape[key]:
                shape[key] = int(z[key])
    write_head(args.out, shape, tensors, vocab_ids, args.type)
    print(f"wrote {args.out}: a head for {args.target} (hidden {shape['dim']}, vocabulary {shape['vocab']})")


if __name__ == "__main__":
    main()
