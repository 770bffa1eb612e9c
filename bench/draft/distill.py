#!/usr/bin/env python3
"""Distils small draft models from a GGUF llama target, on a GPU with PyTorch.

    distill.py --target T.gguf --prompts DIR --out DIR [--layers 2,4] [--vocab 8192]
               [--samples 0,0.8,1.0] [--train-seconds 150] [--check-ids 788,260,...]

DIR holds train.ids.jsonl, heldout.ids.jsonl and bench.ids.jsonl: one JSON
array of prompt token ids per line, as `exactly tokenize --jsonl F --json`
writes them (bench/draft/make_prompts.py makes the prompts).

1. The target, dequantised from its GGUF file, answers every training prompt
   once per temperature in --samples (0: greedy), up to 256 tokens or its
   end of turn.
2. The draft's vocabulary: the --vocab tokens its answers use most (the end
   of turn always among them). The draft's output head has one row per such
   token; every other token gets probability 0 from it, which the rejection
   sampler handles like any other draft distribution.
3. Each draft keeps the target's embedding (frozen), starts from the target's
   first L layers, final norm and the head rows of its vocabulary, and learns
   the target's next-token distribution over its vocabulary (KL divergence on
   the answers' positions) for --train-seconds. The target's distributions
   are computed once and kept as their --teacher-top largest probabilities
   plus the rest's total, so training runs the draft alone.
4. Measured on held-out prompts and on the chat benchmark's prompts: how often
   the draft's greedy token equals the target's (what greedy speculation
   accepts), the mean tokens per verify at k = 1..6 that this gives, and the
   mean acceptance probability sum_x min(p(x), q(x)) at temperature 0.8. The
   untrained truncation (first L layers, full head) is measured the same way.

Quantisation-aware training (--qat Q4_1, --qat-head Q4_1): the draft's
matrices as the engine will hold them, rounded as GGUF's Q4_1 rounds (groups
of 32 along a row: 16 levels between the group's minimum and maximum, scale
and minimum stored in fp16) in every forward pass, with the gradient passed
straight through to the unrounded weights. Stored as Q4_1 without it, the
draft's layers lose a fifth of their agreement. --init DIR starts from an
earlier run's weights and vocabulary instead of the target's first layers.
With QAT, the evaluation measures the rounded draft from the fp16 weights
the files hold.

Writes OUT/draft-L{L}-{part}.npz (float16 layers, two per file; `head`: the
head rows, the final norm and the vocabulary's ids) and OUT/report.json;
bench/draft/write_draft_gguf.py turns them into a GGUF draft.

The rotary embedding is GGUF's: adjacent pairs, on the weights as the file
stores them. The target runs in bf16 (the draft only has to imitate it).
"""
import argparse
import json
import math
import time
from pathlib import Path

import gguf
import numpy as np
import torch
import torch.nn.functional as F

EOS_IDS = (0, 2)  # <|endoftext|>, <|im_end|>
MAX_NEW = 256


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


# --------------------------------------------------------------------------------------------- the model

def field(reader, name):
    f = reader.fields[name]
    return f.parts[f.data[0]][0].item()


def load_target(path, device):
    r = gguf.GGUFReader(path)
    cfg = {
        "n_layers": field(r, "llama.block_count"),
        "dim": field(r, "llama.embedding_length"),
        "ffn": field(r, "llama.feed_forward_length"),
        "n_heads": field(r, "llama.attention.head_count"),
        "n_kv": field(r, "llama.attention.head_count_kv"),
        "eps": field(r, "llama.attention.layer_norm_rms_epsilon"),
        "base": field(r, "llama.rope.freq_base"),
    }
    cfg["head_dim"] = cfg["dim"] // cfg["n_heads"]
    w = {}
    for t in r.tensors:
        a = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        w[t.name] = torch.from_numpy(a.reshape(tuple(int(s) for s in reversed(t.shape)))).to(device)
    if "output.weight" not in w:
        w["output.weight"] = w["token_embd.weight"]
    return cfg, w


MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def round_q4_1(w):
    """w as GGUF's Q4_1 stores and the engine decodes it (gguf.quants.Q4_1, groups along the last axis)."""
    g = w.float().reshape(*w.shape[:-1], -1, 32)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    d = (hi - lo) / 15
    inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
    q = torch.floor((g - lo) * inv + 0.5).clamp(0, 15)
    return (q * d.half().float() + lo.half().float()).reshape(w.shape)


def rounder(kind):
    """The straight-through rounding for a --qat kind: rounded forward, identity backward."""
    if not kind:
        return None
    if kind != "Q4_1":
        raise SystemExit(f"--qat: {kind} is not supported (Q4_1 is)")
    return lambda t: t + (round_q4_1(t) - t).detach()


def layer_params(w, l, dtype):
    p = f"blk.{l}."
    names = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]
    return {n: w[p + n + ".weight"].to(dtype).clone() for n in names}


class Llama(torch.nn.Module):
    """Llama with GGUF's adjacent-pair rotary embedding; `head` may cover part of the vocabulary."""

    def __init__(self, cfg, embed, layers, out_norm, head, trainable, qat=None, qat_head=None):
        super().__init__()
        self.cfg = cfg
        self.qat, self.qat_head = qat, qat_head  # rounding of the layers' matrices / the head, or None
        self.embed = embed  # frozen
        wrap = (lambda t: torch.nn.Parameter(t)) if trainable else (lambda t: t)
        self.layers = [{k: wrap(v) for k, v in L.items()} for L in layers]
        self.out_norm = wrap(out_norm)
        self.head = wrap(head)
        if trainable:
            self.params = torch.nn.ParameterList(
                [p for L in self.layers for p in L.values()] + [self.out_norm, self.head])

    def norm(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg["eps"]) * w.float()).to(x.dtype)

    def rope(self, x, cos, sin):
        x0, x1 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2).to(x.dtype)

    def angles(self, pos):
        hd = self.cfg["head_dim"]
        inv = self.cfg["base"] ** (-torch.arange(0, hd, 2, device=pos.device, dtype=torch.float64) / hd)
        a = pos.double()[..., None] * inv
        return a.cos().float()[:, :, None, :], a.sin().float()[:, :, None, :]

    def hidden(self, tokens, pos, mask=None, cache=None, start=0):
        """tokens, pos: [B, T]. mask: [B, 1, T, S] bool or None (causal). cache: per layer (K, V) [B, KH, Smax, hd]."""
        c = self.cfg
        B, T = tokens.shape
        x = self.embed[tokens].to(self.head.dtype)
        cos, sin = self.angles(pos)
        for l, L in enumerate(self.layers):
            if self.qat:
                L = {k: self.qat(v) if k in MATRICES else v for k, v in L.items()}
            h = self.norm(x, L["attn_norm"])
            q = self.rope((h @ L["attn_q"].T).view(B, T, c["n_heads"], -1), cos, sin).transpose(1, 2)
            k = self.rope((h @ L["attn_k"].T).view(B, T, c["n_kv"], -1), cos, sin).transpose(1, 2)
            v = (h @ L["attn_v"].T).view(B, T, c["n_kv"], -1).transpose(1, 2)
            if cache is not None:
                K, V = cache[l]
                K[:, :, start:start + T] = k
                V[:, :, start:start + T] = v
                k, v = K[:, :, :start + T], V[:, :, :start + T]
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(B, T, -1) @ L["attn_output"].T
            h = self.norm(x, L["ffn_norm"])
            x = x + (F.silu(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        return self.norm(x, self.out_norm)

    def logits(self, hidden, rows=None):
        head = self.head if rows is None else self.head[rows]
        if self.qat_head:
            head = self.qat_head(head)
        return (hidden @ head.T).float()


def make_target(cfg, w, dtype=torch.bfloat16):
    layers = [layer_params(w, l, dtype) for l in range(cfg["n_layers"])]
    return Llama(cfg, w["token_embd.weight"], layers, w["output_norm.weight"].to(dtype),
                 w["output.weight"].to(dtype), trainable=False)


# ----------------------------------------------------------------------------------------- generation

@torch.no_grad()
def generate(model, prompts, temps, seed, device, batch=1024, max_new=MAX_NEW):
    """Answers each prompt at each temperature; returns lists of answer ids (end of turn included)."""
    c = model.cfg
    jobs = [(i, t) for t in temps for i in range(len(prompts))]
    out = {}
    g = torch.Generator(device=device).manual_seed(seed)
    for j0 in range(0, len(jobs), batch):
        part = jobs[j0:j0 + batch]
        B = len(part)
        P = max(len(prompts[i]) for i, _ in part)
        S = P + max_new
        tok = torch.zeros(B, P, dtype=torch.long, device=device)
        valid = torch.zeros(B, S, dtype=torch.bool, device=device)
        pad = torch.zeros(B, dtype=torch.long, device=device)
        for b, (i, _) in enumerate(part):
            n = len(prompts[i])
            tok[b, P - n:] = torch.tensor(prompts[i], device=device)
            valid[b, P - n:] = True
            pad[b] = P - n
        temp = torch.tensor([t for _, t in part], device=device, dtype=torch.float32)
        dt = model.head.dtype  # the model's own (bf16 for the target)
        cache = [(torch.zeros(B, c["n_kv"], S, c["head_dim"], dtype=dt, device=device),
                  torch.zeros(B, c["n_kv"], S, c["head_dim"], dtype=dt, device=device))
                 for _ in range(c["n_layers"])]
        ar = torch.arange(S, device=device)
        pos = (torch.arange(P, device=device)[None, :] - pad[:, None]).clamp(min=0)
        # A query sees earlier keys that hold prompt tokens, and always itself (pads included).
        causal = ar[None, :P, None] >= ar[None, None, :P]
        mask = (causal & valid[:, None, :P]) | torch.eye(P, dtype=torch.bool, device=device)[None]
        h = model.hidden(tok, pos, mask[:, None], cache, 0)
        logits = model.logits(h[:, -1])
        done = torch.zeros(B, dtype=torch.bool, device=device)
        answers = torch.zeros(B, max_new, dtype=torch.long, device=device)
        lengths = torch.full((B,), max_new, dtype=torch.long, device=device)
        for s in range(max_new):
            greedy = logits.argmax(-1)
            probs = torch.softmax(logits / temp.clamp(min=1e-6)[:, None], -1)
            drawn = torch.multinomial(probs, 1, generator=g)[:, 0]
            nxt = torch.where(temp > 0, drawn, greedy)
            answers[:, s] = nxt
            ended = (~done) & ((nxt == EOS_IDS[0]) | (nxt == EOS_IDS[1]))
            lengths = torch.where(ended, torch.full_like(lengths, s + 1), lengths)
            done |= ended
            if bool(done.all()) or s == max_new - 1:
                break
            valid[:, P + s] = True
            step_pos = (P + s - pad)[:, None]
            m = valid[:, None, None, :P + s + 1]
            h = model.hidden(nxt[:, None], step_pos, m, cache, P + s)
            logits = model.logits(h[:, -1])
        answers, lengths = answers.tolist(), lengths.tolist()
        for b, (i, t) in enumerate(part):
            out[(i, t)] = answers[b][:lengths[b]]
        log(f"generated {min(j0 + batch, len(jobs))}/{len(jobs)} answers")
    return [(i, t, out[(i, t)]) for i, t in jobs]


# ------------------------------------------------------------------------------------------- training

def length_groups(seqs, tokens_per_batch):
    """Indices into `seqs` in groups of similar length (less padding), each within tokens_per_batch."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i][0]) + len(seqs[i][1]))
    groups, cur, cur_max = [], [], 0
    for i in order:
        n = len(seqs[i][0]) + len(seqs[i][1])
        if cur and max(cur_max, n) * (len(cur) + 1) > tokens_per_batch:
            groups.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, n)
    if cur:
        groups.append(cur)
    return groups


def batches(seqs, tokens_per_batch, rng):
    """Endless shuffled groups of indices into `seqs`, sequences of similar length together."""
    groups = length_groups(seqs, tokens_per_batch)
    while True:
        rng.shuffle(groups)
        for gidx in groups:
            yield gidx


def pack(seqs, idx, device):
    T = max(len(seqs[i][0]) + len(seqs[i][1]) for i in idx)
    ids = torch.zeros(len(idx), T, dtype=torch.long)
    mask = torch.zeros(len(idx), T, dtype=torch.bool)
    for b, i in enumerate(idx):
        p, a = seqs[i]
        s = p + a
        ids[b, :len(s)] = torch.tensor(s)
        mask[b, len(p) - 1:len(s) - 1] = True  # positions that predict an answer token
    return ids.to(device), mask.to(device)


@torch.no_grad()
def teacher_top(target, vocab, seqs, device, top):
    """The target's `top` largest log-probabilities over `vocab` (and their columns) at every answer
    position of every sequence, computed once. The target's pass was ~70% of a training step when
    it ran at every step; with its distributions cached, the draft trains ~3x as many steps."""
    cache = [None] * len(seqs)
    for group in length_groups(seqs, 65536):
        ids, mask = pack(seqs, group, device)
        pos = torch.arange(ids.shape[1], device=device)[None].expand_as(ids)
        logp = torch.log_softmax(target.logits(target.hidden(ids, pos)[mask], vocab), -1)
        val, col = logp.topk(top, -1)
        sizes = [len(seqs[i][1]) for i in group]
        for i, v, c in zip(group, val.split(sizes), col.split(sizes)):
            cache[i] = (v.clone(), c.to(torch.int16))
    return cache


def top_kl(t_val, t_col, d_logp):
    """KL(p || q) with p known on its top columns: those columns exactly, the rest as one bucket."""
    d_top = d_logp.gather(-1, t_col.long())
    p = t_val.exp()
    p_rest = (1 - p.sum(-1)).clamp(min=0)
    q_rest = (-torch.expm1(torch.logsumexp(d_top, -1))).clamp(min=1e-6)
    rest = p_rest * (torch.log(p_rest.clamp(min=1e-12)) - torch.log(q_rest))
    return ((p * (t_val - d_top)).sum(-1) + rest).mean()


def load_init(init_dir, L, device):
    """An earlier run's layers, final norm, head and vocabulary (the files this script writes)."""
    d = Path(init_dir)
    layers = [{} for _ in range(L)]
    for part in range(0, L, 2):
        with np.load(d / f"draft-L{L}-layers{part}.npz") as z:
            for key in z.files:
                l, name = key[len("blk."):].split(".", 1)
                layers[int(l)][name] = torch.from_numpy(z[key].astype(np.float32)).to(device)
    with np.load(d / f"draft-L{L}-head.npz") as z:
        head = torch.from_numpy(z["output"].astype(np.float32)).to(device)
        norm = torch.from_numpy(z["output_norm"].astype(np.float32)).to(device)
        vocab_ids = z["vocab_ids"].astype(np.int64)
    return layers, norm, head, vocab_ids


def as_stored(draft):
    """The draft as the files hold it: every weight rounded to fp16 (what the QAT evaluation rounds)."""
    for Ld in draft.layers:
        for v in Ld.values():
            v.data = v.data.half().float()
    draft.head.data = draft.head.data.half().float()
    return draft


def distill(target, cfg, w, L, vocab, seqs, seconds, device, seed, args_lr, top=0, init=None, qat=None,
            qat_head=None):
    """Trains an L-layer draft for `seconds`. top > 0: against the target's cached top-`top`
    distributions (teacher_top); 0: against its whole distribution over `vocab`, computed each step.
    init: (layers, final norm, head) to start from, else the target's first L layers."""
    embed = w["token_embd.weight"]
    if init is None:
        init = ([layer_params(w, l, torch.float32) for l in range(L)], w["output_norm.weight"].clone(),
                w["output.weight"][vocab].clone())
    draft = Llama(cfg, embed, init[0], init[1], init[2], trainable=True, qat=qat, qat_head=qat_head)
    opt = torch.optim.AdamW(draft.params, lr=args_lr, betas=(0.9, 0.98), weight_decay=0.0)
    rng = np.random.default_rng(seed)
    cache = None
    if top:
        t = time.time()
        cache = teacher_top(target, vocab, seqs, device, top)
        log(f"the target's top-{top} distributions at {sum(len(a) for _, a in seqs)} positions "
            f"in {time.time() - t:.0f} s")
    gen = batches(seqs, 24576, rng)
    t0, step, warm = time.time(), 0, 50
    while True:
        idx = next(gen)
        ids, mask = pack(seqs, idx, device)
        pos = torch.arange(ids.shape[1], device=device)[None].expand_as(ids)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            d_h = draft.hidden(ids, pos)[mask]
        d_logp = torch.log_softmax(draft.logits(d_h.float()), -1)
        if cache is None:
            with torch.no_grad():
                t_logp = torch.log_softmax(target.logits(target.hidden(ids, pos)[mask], vocab), -1)
            loss = (t_logp.exp() * (t_logp - d_logp)).sum(-1).mean()
        else:
            loss = top_kl(torch.cat([cache[i][0] for i in idx]), torch.cat([cache[i][1] for i in idx]), d_logp)
        frac = min(1.0, (time.time() - t0) / seconds)  # the schedule follows the clock: a fixed time budget
        lr = args_lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for gr in opt.param_groups:
            gr["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.params, 1.0)
        opt.step()
        if step % 400 == 0:
            log(f"L={L} step {step} kl {loss.item():.4f} lr {lr:.2e}")
        step += 1
        if frac >= 1.0:
            break
    log(f"L={L}: {step} steps in {time.time() - t0:.0f} s")
    return draft


# ----------------------------------------------------------------------------------------- evaluation

def tokens_per_verify(flags, k):
    """Greedy speculation with k drafts over a teacher-forced answer: tokens per target pass."""
    i, steps, n = 0, 0, len(flags)
    while i < n:
        r = 0
        while r < k and i + r < n and flags[i + r]:
            r += 1
        i += r + 1
        steps += 1
    return n / steps if steps else 0.0


@torch.no_grad()
def evaluate(target, drafts, prompts, device, seed):
    greedy = generate(target, prompts, [0.0], seed, device, max_new=128)
    sampled = generate(target, prompts, [0.8], seed + 1, device, max_new=128)
    res = {}
    for name, (d, rows) in drafts.items():
        flags, accept, covered, total = [], [], 0, 0
        for runs, greedy_mode in ((greedy, True), (sampled, False)):
            for i, _, ans in runs:
                if not ans:
                    continue
                ids = torch.tensor(prompts[i] + ans, device=device)[None]
                pos = torch.arange(ids.shape[1], device=device)[None]
                sel = slice(len(prompts[i]) - 1, ids.shape[1] - 1)
                t_logits = target.logits(target.hidden(ids, pos)[0, sel])
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    d_h = d.hidden(ids, pos)[0, sel]
                d_sub = d.logits(d_h.float())
                if rows is None:
                    d_full = d_sub
                else:
                    d_full = torch.full_like(t_logits, -math.inf)
                    d_full[:, rows] = d_sub
                if greedy_mode:
                    f = (d_full.argmax(-1) == t_logits.argmax(-1)).tolist()
                    flags.append(f)
                    if rows is not None:
                        inside = torch.zeros(t_logits.shape[1], dtype=torch.bool, device=device)
                        inside[rows] = True
                        covered += int(inside[torch.tensor(ans, device=device)].sum())
                    total += len(ans)
                else:
                    p = torch.softmax(t_logits / 0.8, -1)
                    q = torch.softmax(d_full / 0.8, -1)
                    accept.extend(torch.minimum(p, q).sum(-1).tolist())
        allf = [x for f in flags for x in f]
        r = {"greedy_agreement": float(np.mean(allf)), "accept_prob_t0.8": float(np.mean(accept)),
             "answer_tokens": total}
        if rows is not None:
            r["vocab_coverage"] = covered / max(total, 1)
        for k in range(1, 7):
            per = [tokens_per_verify(f, k) * len(f) for f in flags]
            r[f"tokens_per_verify_k{k}"] = float(sum(per) / max(1, sum(len(f) for f in flags)))
            b = r["accept_prob_t0.8"]
            r[f"t0.8_tokens_per_verify_k{k}_indep"] = float((1 - b ** (k + 1)) / (1 - b))
        res[name] = r
    return res


# ----------------------------------------------------------------------------------------------- main

def save_answers(path, runs):
    """The target's answers (prompt index, temperature, ids), so that a later run trains on them."""
    np.savez(path, prompt=np.array([i for i, _, _ in runs], dtype=np.int32),
             temp=np.array([t for _, t, _ in runs], dtype=np.float32),
             length=np.array([len(a) for _, _, a in runs], dtype=np.int32),
             ids=np.array([x for _, _, a in runs for x in a], dtype=np.int32))


def load_answers(path, num_prompts):
    with np.load(path) as z:
        if int(z["prompt"].max()) >= num_prompts:
            raise SystemExit(f"{path}: answers to prompts beyond the {num_prompts} given")
        ends = np.cumsum(z["length"])
        ids = z["ids"].tolist()
        return [(int(i), float(t), ids[e - n:e]) for i, t, n, e in zip(z["prompt"], z["temp"], z["length"], ends)]


def read_ids(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", default="2,4")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--samples", default="0,0.8,1.0")
    ap.add_argument("--train-seconds", type=float, default=150)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--teacher-top", type=int, default=64,
                    help="train against the target's cached top-N distributions (0: its whole one, each step)")
    ap.add_argument("--heldout", type=int, default=256, help="held-out prompts measured")
    ap.add_argument("--no-truncated", action="store_true", help="skip measuring the untrained truncations")
    ap.add_argument("--max-train-prompts", type=int, default=0)
    ap.add_argument("--check-ids", default="", help="the target's greedy answer to the first bench prompt, "
                                                      "as the engine gives it (a check of this implementation)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--answers", help="the target's answers: read from this .npz if it exists, else written there")
    ap.add_argument("--init", help="start from this earlier run's draft (its vocabulary too)")
    ap.add_argument("--qat", help="train the layers' matrices as this type rounds them (Q4_1)")
    ap.add_argument("--qat-head", help="train the head as this type rounds it (Q4_1)")
    args = ap.parse_args()
    device = "cuda"
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"args": vars(args)}

    cfg, w = load_target(args.target, device)
    target = make_target(cfg, w)
    log("target", cfg)
    pdir = Path(args.prompts)
    train_p = read_ids(pdir / "train.ids.jsonl")
    if args.max_train_prompts:
        train_p = train_p[:args.max_train_prompts]
    held_p = read_ids(pdir / "heldout.ids.jsonl")[:args.heldout]
    bench_p = read_ids(pdir / "bench.ids.jsonl")

    if args.check_ids:
        want = [int(x) for x in args.check_ids.split(",")]
        got = generate(target, bench_p[:1], [0.0], 0, device, max_new=len(want))[0][2]
        same = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(want))
        log(f"check: the first {same} of {len(want)} greedy tokens equal the engine's")
        report["check_equal_prefix"] = [same, len(want)]

    if args.qat or args.qat_head:  # the rounding trained against must be the one the GGUF file gets
        x = torch.randn(512, 576, device=device) * 0.05  # off the grid (the target's weights are on it)
        t = gguf.GGMLQuantizationType.Q4_1
        ref = gguf.quants.dequantize(gguf.quants.quantize(x.cpu().numpy(), t), t)
        off = int((round_q4_1(x).cpu().numpy() != ref.reshape(x.shape)).sum())
        log(f"Q4_1 rounding: {off} of {x.numel()} weights differ from gguf's")
        # A few weights at a level's edge may round the other way (on the GPU, (g - lo) * inv + 0.5
        # is one fused multiply-add); 0.04% of them were seen to.
        if off > x.numel() // 1000:
            raise SystemExit("round_q4_1 does not match gguf.quants")

    temps = [float(t) for t in args.samples.split(",")]
    if args.answers and Path(args.answers).exists():
        runs = load_answers(args.answers, len(train_p))
        log(f"{len(runs)} answers from {args.answers}")
    else:
        runs = generate(target, train_p, temps, args.seed, device)
        if args.answers:
            save_answers(args.answers, runs)
    seqs = [(train_p[i], ans) for i, _, ans in runs if ans]
    counts = np.bincount(np.concatenate([np.array(a) for _, a in seqs]), minlength=w["token_embd.weight"].shape[0])
    top = [int(t) for t in np.argsort(-counts, kind="stable") if int(t) not in EOS_IDS]
    vocab_ids = np.unique(np.array(top[:args.vocab - len(EOS_IDS)] + list(EOS_IDS)))
    layer_counts = [int(x) for x in args.layers.split(",")]
    inits = {}
    if args.init:
        inits = {L: load_init(args.init, L, device) for L in layer_counts}
        vocab_ids = inits[layer_counts[0]][3]
        if any(not np.array_equal(i[3], vocab_ids) for i in inits.values()):
            raise SystemExit("--init: the drafts' vocabularies differ")
    report["train_answers"] = len(seqs)
    report["train_answer_tokens"] = int(counts.sum())
    report["vocab_train_coverage"] = float(counts[vocab_ids].sum() / counts.sum())
    log(f"{len(seqs)} answers, {counts.sum()} tokens; the {len(vocab_ids)}-token vocabulary covers "
        f"{report['vocab_train_coverage']:.4f} of them")
    vocab = torch.tensor(vocab_ids, device=device)

    drafts = {}
    for L in layer_counts:
        d = distill(target, cfg, w, L, vocab, seqs, args.train_seconds, device, args.seed + L, args.lr,
                    args.teacher_top, inits[L][:3] if L in inits else None, rounder(args.qat),
                    rounder(args.qat_head))
        if args.qat or args.qat_head:
            as_stored(d)
        drafts[f"distilled-L{L}"] = (d, vocab)
        if not args.no_truncated:
            plain = Llama(cfg, w["token_embd.weight"], [layer_params(w, l, torch.float32) for l in range(L)],
                          w["output_norm.weight"], w["output.weight"], trainable=False)
            drafts[f"truncated-L{L}"] = (plain, None)
        layers = [{k: v.detach().half().cpu().numpy() for k, v in Ld.items()} for Ld in d.layers]
        for part in range(0, L, 2):
            arrays = {f"blk.{l}.{k}": v for l in range(part, min(L, part + 2)) for k, v in layers[l].items()}
            np.savez(out / f"draft-L{L}-layers{part}.npz", **arrays)
        np.savez(out / f"draft-L{L}-head.npz", output=d.head.detach().half().cpu().numpy(),
                 output_norm=d.out_norm.detach().float().cpu().numpy(), vocab_ids=vocab_ids.astype(np.int32))

    report["heldout"] = evaluate(target, drafts, held_p, device, 100)
    report["bench"] = evaluate(target, drafts, bench_p, device, 200)
    for where in ("heldout", "bench"):
        for name, r in report[where].items():
            log(where, name, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}))
    (out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
