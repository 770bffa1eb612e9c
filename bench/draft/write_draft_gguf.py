#!/usr/bin/env python3
"""Writes a draft model as GGUF: the target's metadata, tokenizer and embedding,
and the distilled layers and head that bench/draft/distill.py wrote.

    write_draft_gguf.py --target T.gguf --trained DIR --layers L --out D.gguf
                        [--layer-type Q4_1] [--head-type Q8_0]

DIR holds draft-L{L}-layers*.npz and draft-L{L}-head.npz. The head covers the
draft's vocabulary only: its rows are listed in the metadata key
exactly.output_token_ids, and the engine gives every other token logit -inf.
The embedding is the target's, copied byte for byte.
"""
import argparse
from pathlib import Path

import gguf
import numpy as np

OUTPUT_TOKEN_IDS = "exactly.output_token_ids"
LAYER_TENSORS = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]


def write_gguf(target_path, out_path, n_layers, replaced=None, vocab_ids=None, name_suffix=" (draft)"):
    """The target's first n_layers layers, with `replaced` (tensor name -> (array, GGMLQuantizationType))
    taking the place of target tensors or adding output.weight; `vocab_ids` sets exactly.output_token_ids.
    Float arrays are quantised to the type given; uint8 arrays are taken as stored bytes of that type."""
    replaced = dict(replaced or {})
    r = gguf.GGUFReader(target_path)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(out_path, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key == OUTPUT_TOKEN_IDS:
            continue
        value = f.contents()
        if key == f"{arch}.block_count":
            value = n_layers
        elif key == "general.name":
            value = value + name_suffix
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, value, f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(key, value, f.types[0])
    if vocab_ids is not None:
        w.add_key_value(OUTPUT_TOKEN_IDS, [int(i) for i in vocab_ids], gguf.GGUFValueType.ARRAY,
                        sub_type=gguf.GGUFValueType.INT32)

    def put(name, array, qtype):
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
        elif array.dtype == np.uint8:
            w.add_tensor(name, np.ascontiguousarray(array), raw_dtype=qtype)
        else:
            w.add_tensor(name, gguf.quants.quantize(np.asarray(array, dtype=np.float32), qtype), raw_dtype=qtype)

    for t in r.tensors:
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= n_layers:
            continue
        if t.name in replaced:
            put(t.name, *replaced.pop(t.name))
        else:
            put(t.name, t.data, t.tensor_type)
    if "output.weight" in replaced:
        put("output.weight", *replaced.pop("output.weight"))
    if replaced:
        raise SystemExit(f"{out_path}: no place for {sorted(replaced)}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--trained", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layer-type", default="Q4_1")
    ap.add_argument("--head-type", default="Q8_0")
    args = ap.parse_args()
    Q = gguf.GGMLQuantizationType
    layer_type, head_type = Q[args.layer_type], Q[args.head_type]
    d = Path(args.trained)
    replaced = {}
    for part in sorted(d.glob(f"draft-L{args.layers}-layers*.npz")):
        for key, array in np.load(part).items():
            kind = key.split(".")[2]
            replaced[key + ".weight"] = (array.astype(np.float32), Q.F32 if kind.endswith("norm") else layer_type)
    head = np.load(d / f"draft-L{args.layers}-head.npz")
    replaced["output_norm.weight"] = (head["output_norm"].astype(np.float32), Q.F32)
    replaced["output.weight"] = (head["output"].astype(np.float32), head_type)
    missing = [f"blk.{l}.{n}.weight" for l in range(args.layers) for n in LAYER_TENSORS
               if f"blk.{l}.{n}.weight" not in replaced]
    if missing:
        raise SystemExit(f"{d}: no trained {missing[0]} (and {len(missing) - 1} more)")
    write_gguf(args.target, args.out, args.layers, replaced, head["vocab_ids"])
    print(f"wrote {args.out}: {args.layers} layers, a head of {len(head['vocab_ids'])} tokens")


if __name__ == "__main__":
    main()
