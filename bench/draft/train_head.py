#!/usr/bin/env python3
"""Trains a draft head (`--spec head:PATH`, src/model/draft_head.h) for a GGUF
llama target, on a GPU with PyTorch, on the target's own answers.

    train_head.py --target T.gguf --prompts DIR --out HEAD.npz [--samples 0,0.7,1.0]
                  [--answers ANS.npz] [--answer-seconds 0] [--train-seconds 300] [--ffn 0] [--lr 3e-4]
                  [--max-new 256] [--batch-tokens 16384] [--device cuda|cpu]
    write_head_gguf.py --target T.gguf --trained HEAD.npz --out head.gguf

DIR holds train.ids.jsonl and heldout.ids.jsonl (prompt ids, one JSON array
a line, as for distill.py). The data pipeline is distill.py's: the target,
dequantised from its GGUF file and run in bf16 (float32 with --device cpu,
where the whole pipeline also runs, slowly) by distill.py's PyTorch llama
(GGUF's adjacent-pair rotary embedding), answers each training prompt at
each temperature of --samples, up to --max-new tokens (or the answers are
read from --answers); --answer-seconds bounds that stage, dropping the
prompts it leaves unanswered.

The head computes, at position s of prompt + answer,
    g_s = norm(layer(fc · [embed(x_s); h_{s-1}]))          (h_{-1} = 0)
with h_s the target's final hidden state after its output norm (what its
head multiplies, distill.py's Llama.hidden), and is trained so that
head · g_s imitates the target's next-token distribution head · h_s (KL
divergence at the answer positions) and g_s regresses onto h_s (smooth L1,
weight --feature-weight): drafting feeds g_s back where h_s would be. The
target's hidden states are computed in the same step (no grad), so nothing
large is cached. The layer starts from the target's last layer (its
feed-forward size unless --ffn cuts it to its first rows), fc from
[0 | I] plus noise, the norm from the target's output norm; the target's
embedding and head stay frozen (the engine reuses the target's).

Reported on the held-out prompts' answers: how often the head's greedy
first draft is the target's greedy token, and the mean acceptance
probability sum_x min(p(x), q(x)) at temperature 0.8 of that first draft.

Writes HEAD.npz: fc.weight, blk.0.*.weight, output_norm.weight ([rows, cols]
float32, PyTorch's layout) and n_heads, n_kv_heads; HEAD.json the report
(with each stage's seconds). Both are written before the last evaluation
(HEAD.json again after it), so a run stopped during it still leaves them.
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from distill import MAX_NEW, batches, generate, load_answers, load_target, log, make_target, pack, read_ids, \
    save_answers

LAYER = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]


class Head(torch.nn.Module):
    """The engine's draft head in PyTorch: fc, one llama layer (the target's Llama code), a norm."""

    def __init__(self, target, cfg, w, ffn):
        super().__init__()
        self.t = target  # frozen: embedding, head, rotary angles and the norm's formula
        d, last = cfg["dim"], cfg["n_layers"] - 1
        fc = torch.zeros(d, 2 * d, device=w["token_embd.weight"].device)
        fc[:, d:] = torch.eye(d, device=fc.device)  # starts from "the target's own feature"
        self.fc = torch.nn.Parameter(fc + 0.01 * torch.randn_like(fc))
        layer = {n: w[f"blk.{last}.{n}.weight"].float().clone() for n in LAYER}
        if ffn:
            layer["ffn_gate"], layer["ffn_up"] = layer["ffn_gate"][:ffn], layer["ffn_up"][:ffn]
            layer["ffn_down"] = layer["ffn_down"][:, :ffn]
        self.layer = torch.nn.ParameterDict({n: torch.nn.Parameter(v.contiguous()) for n, v in layer.items()})
        self.norm_w = torch.nn.Parameter(w["output_norm.weight"].float().clone())

    def forward(self, tokens, feats, pos):
        """tokens, pos: [B, T]; feats: [B, T, dim] the hidden state before each token. Returns g: [B, T, dim]."""
        c, t, L = self.t.cfg, self.t, self.layer
        B, T = tokens.shape
        x = torch.cat([t.embed[tokens].float(), feats.float()], -1) @ self.fc.T
        cos, sin = t.angles(pos)
        h = t.norm(x, L["attn_norm"])
        q = t.rope((h @ L["attn_q"].T).view(B, T, c["n_heads"], -1), cos, sin).transpose(1, 2)
        k = t.rope((h @ L["attn_k"].T).view(B, T, c["n_kv"], -1), cos, sin).transpose(1, 2)
        v = (h @ L["attn_v"].T).view(B, T, c["n_kv"], -1).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + a.transpose(1, 2).reshape(B, T, -1) @ L["attn_output"].T
        h = t.norm(x, L["ffn_norm"])
        x = x + (F.silu(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        return t.norm(x, self.norm_w)


def shifted(h):
    """[B, T, dim] -> the hidden state before each position: h_{s-1}, zeros at s = 0."""
    return torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)


def step_inputs(target, seqs, idx, device):
    """A batch: ids, the answer mask, the target's hidden states and logits (no grad)."""
    ids, mask = pack(seqs, idx, device)
    pos = torch.arange(ids.shape[1], device=device)[None].expand_as(ids)
    with torch.no_grad():
        h = target.hidden(ids, pos).float()
    return ids, mask, pos, h


def losses(head, target, ids, mask, pos, h, feature_weight):
    g = head(ids, shifted(h), pos)[mask]
    hm = h[mask]
    with torch.no_grad():
        p_log = torch.log_softmax(target.logits(hm.to(target.head.dtype)), -1)
    q_log = torch.log_softmax((g @ target.head.float().T), -1)
    kl = (p_log.exp() * (p_log - q_log)).sum(-1).mean()
    return kl + feature_weight * F.smooth_l1_loss(g, hm), kl


def train(head, target, seqs, seconds, lr, feature_weight, device, seed, tokens_per_batch=16384):
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    start, steps = time.time(), 0
    if seconds <= 0:
        return 0
    for idx in batches(seqs, tokens_per_batch, rng):
        done = (time.time() - start) / seconds
        if done >= 1:
            break
        for group in opt.param_groups:  # cosine schedule over the time budget
            group["lr"] = lr * 0.5 * (1 + np.cos(np.pi * done))
        ids, mask, pos, h = step_inputs(target, seqs, idx, device)
        loss, kl = losses(head, target, ids, mask, pos, h, feature_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        steps += 1
        if steps % 200 == 0 or steps == 1:
            log(f"step {steps}: loss {loss.item():.4f}, kl {kl.item():.4f}, {time.time() - start:.0f} s")
    if steps:
        log(f"{steps} steps in {time.time() - start:.0f} s: loss {loss.item():.4f}, kl {kl.item():.4f}")
    return steps


@torch.no_grad()
def evaluate(head, target, seqs, device, temperature=0.8):
    """First-draft agreement with the target's greedy token, and sum_x min(p, q) at `temperature`."""
    agree = accept = n = 0
    for idx in [list(range(i, min(i + 64, len(seqs)))) for i in range(0, len(seqs), 64)]:
        ids, mask, pos, h = step_inputs(target, seqs, idx, device)
        g = head(ids, shifted(h), pos)[mask]
        p = target.logits(h[mask].to(target.head.dtype))
        q = g @ target.head.float().T
        agree += int((p.argmax(-1) == q.argmax(-1)).sum())
        pt, qt = torch.softmax(p / temperature, -1), torch.softmax(q / temperature, -1)
        accept += float(torch.minimum(pt, qt).sum(-1).sum())
        n += int(mask.sum())
    return {"positions": n, "greedy_agreement": agree / max(n, 1), "acceptance_t0.8": accept / max(n, 1)}


def answer(target, prompts, temps, seed, device, max_new, seconds):
    """distill.generate's answers to `prompts` at each of `temps`. With `seconds`, in chunks of
    prompts (each at every temperature, one batch of generate's), no chunk started after `seconds`:
    the answers to the prompts left out are not made."""
    if not seconds:
        return generate(target, prompts, temps, seed, device, max_new=max_new)
    chunk, runs, t0 = max(1, 1024 // len(temps)), [], time.time()
    for c0 in range(0, len(prompts), chunk):
        if time.time() - t0 >= seconds:
            log(f"--answer-seconds: answers to the first {c0} of {len(prompts)} prompts")
            break
        part = generate(target, prompts[c0:c0 + chunk], temps, seed + c0, device, max_new=max_new)
        runs += [(c0 + i, t, a) for i, t, a in part]
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True, help="HEAD.npz")
    ap.add_argument("--samples", default="0,0.7,1.0", help="temperatures of the target's answers (0: greedy)")
    ap.add_argument("--answers", help="the target's answers: read from this .npz if it exists, else written there")
    ap.add_argument("--answer-seconds", type=float, default=0,
                    help="start no chunk of answers after this many seconds (0: answer every prompt)")
    ap.add_argument("--train-seconds", type=float, default=300)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--feature-weight", type=float, default=0.1)
    ap.add_argument("--ffn", type=int, default=0, help="the layer's feed-forward size (0: the target's)")
    ap.add_argument("--heldout", type=int, default=256)
    ap.add_argument("--max-train-prompts", type=int, default=0)
    ap.add_argument("--max-new", type=int, default=MAX_NEW, help="the longest answer, in tokens")
    ap.add_argument("--batch-tokens", type=int, default=16384, help="tokens per training step (padding included)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = args.device
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True

    seconds = {}  # each stage's wall time
    clock = time.time()

    def lap(stage):
        nonlocal clock
        seconds[stage] = round(time.time() - clock, 1)
        clock = time.time()

    cfg, w = load_target(args.target, device)
    # bf16 on the GPU, as distill.py runs the target; float32 on a CPU, where bf16 matmuls are slow
    target = make_target(cfg, w, torch.bfloat16 if device.startswith("cuda") else torch.float32)
    lap("load")
    pdir = Path(args.prompts)
    train_p = read_ids(pdir / "train.ids.jsonl")
    if args.max_train_prompts:
        train_p = train_p[:args.max_train_prompts]
    held_p = read_ids(pdir / "heldout.ids.jsonl")[:args.heldout]
    temps = [float(t) for t in args.samples.split(",")]
    if args.answers and Path(args.answers).exists():
        runs = load_answers(args.answers, len(train_p))
        log(f"{len(runs)} answers from {args.answers}")
    else:
        runs = answer(target, train_p, temps, args.seed, device, args.max_new, args.answer_seconds)
        if args.answers:
            save_answers(args.answers, runs)
    seqs = [(train_p[i], a) for i, _, a in runs if a]
    lap("answers")
    held = [(held_p[i], a) for i, _, a in generate(target, held_p, [0.8], args.seed + 1, device, max_new=args.max_new)
            if a]
    lap("heldout_answers")
    log(f"{len(seqs)} training answers, {sum(len(a) for _, a in seqs)} tokens; {len(held)} held out, "
        f"{sum(len(a) for _, a in held)} tokens")

    head = Head(target, cfg, w, args.ffn).to(device)
    report = {"args": vars(args), "train_answers": len(seqs), "train_tokens": sum(len(a) for _, a in seqs),
              "before": evaluate(head, target, held, device)}
    log("before training", report["before"])
    lap("evaluate_before")
    report["steps"] = train(head, target, seqs, args.train_seconds, args.lr, args.feature_weight, device, args.seed,
                            args.batch_tokens)
    lap("train")
    report["train_seconds"] = seconds["train"]
    # The weights first: a run stopped during the evaluation still leaves them.
    arrays = {"fc.weight": head.fc, "output_norm.weight": head.norm_w}
    arrays.update({f"blk.0.{n}.weight": p for n, p in head.layer.items()})
    arrays = {k: v.detach().float().cpu().numpy() for k, v in arrays.items()}
    np.savez(args.out, n_heads=cfg["n_heads"], n_kv_heads=cfg["n_kv"], **arrays)
    report["bytes"] = int(sum(a.nbytes for a in arrays.values()))
    report_path = Path(args.out).with_suffix(".json")
    report_path.write_text(json.dumps(report, indent=1))  # again, complete, after the evaluation
    log(f"wrote {args.out}")
    report["after"] = evaluate(head, target, held, device)
    log("after training", report["after"])
    lap("evaluate_after")
    report["seconds"] = seconds
    log("seconds", seconds)
    report_path.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
