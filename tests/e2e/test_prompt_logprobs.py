"""Prompt logprobs: the logprob a request reported for each token it generated
equals, bit for bit, the logprob of that token when the same text comes back
as a prompt (the sampler and the scorer agree: what training on rollouts
needs). Checked through `exactly batch` (prompt_logprobs, scored in chunks of
another size than the generation's) and `exactly serve` (vLLM's
prompt_logprobs, OpenAI's echo with logprobs, return_token_ids)."""

from __future__ import annotations

import json
import math

import openai
import pytest
import requests

from test_server import ServerProcess

PROMPTS = ["The capital of France is", "def add(a, b):\n    return",
           "<|im_start|>user\nName a color.<|im_end|>\n<|im_start|>assistant\n"]


def tokenize(run_exactly, model_path, text):
    return json.loads(run_exactly(["tokenize", "-m", str(model_path), "--json", text]).stdout)


def batch(run_exactly, model_path, tmp_path, name, reqs, *flags):
    inp, out = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.out"
    inp.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    run_exactly(["batch", "-m", str(model_path), "-i", str(inp), "-o", str(out), *flags])
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_generated_logprobs_equal_the_scored_prompt(run_exactly, model_path, tmp_path):
    prompts = [tokenize(run_exactly, model_path, p) for p in PROMPTS]
    gen_reqs = []
    for i, p in enumerate(prompts):
        gen_reqs.append({"prompt": p, "max_tokens": 24, "logprobs": 3, "ignore_eos": True, "temperature": 0})
        gen_reqs.append({"prompt": p, "max_tokens": 24, "logprobs": 3, "ignore_eos": True, "temperature": 0.9,
                         "seed": 10 + i, "n": 2})
    generated = batch(run_exactly, model_path, tmp_path, "gen", gen_reqs)
    texts, expected = [], []
    for req, res in zip(gen_reqs, generated):
        for choice in res["choices"]:
            texts.append(req["prompt"] + choice["token_ids"])
            expected.append((len(req["prompt"]), choice["token_ids"], choice["logprobs"]))
    score_reqs = [{"prompt": t, "max_tokens": 1, "prompt_logprobs": 3, "temperature": 0} for t in texts]
    # Scored with another step budget than the generation used: chunks of 7.
    scored = batch(run_exactly, model_path, tmp_path, "score", score_reqs, "--max-num-batched-tokens", "7")
    compared = 0
    for (n_prompt, ids, lps), res in zip(expected, scored):
        pl = res["prompt_logprobs"]
        assert len(pl) == n_prompt + len(ids) and pl[0] is None
        for k, t in enumerate(ids):
            entry = pl[n_prompt + k][str(t)]
            assert entry["logprob"] == lps["token_logprobs"][k], (k, entry, lps["token_logprobs"][k])
            # The top alternatives agree too, as the same row's.
            top = {tid: v["logprob"] for tid, v in pl[n_prompt + k].items() if v["rank"] <= 3}
            assert sorted(top.values(), reverse=True) == sorted(lps["top_logprobs"][k].values(), reverse=True)
            compared += 1
    assert compared == sum(len(e[1]) for e in expected) > 200


def test_prompt_logprobs_are_a_distribution_and_ranked(run_exactly, model_path, tmp_path):
    ids = tokenize(run_exactly, model_path, PROMPTS[0])
    res = batch(run_exactly, model_path, tmp_path, "rank", [{"prompt": ids, "max_tokens": 1, "prompt_logprobs": 5}])[0]
    pl = res["prompt_logprobs"]
    assert len(pl) == len(ids) and pl[0] is None
    for i, entry in enumerate(pl[1:], start=1):
        mine = entry[str(ids[i])]
        assert mine["logprob"] <= 0 and mine["rank"] >= 1
        ranked = sorted((v["rank"], v["logprob"]) for v in entry.values())
        # Rank 1 is the most likely token; ranks and logprobs fall together.
        assert ranked[0][0] == 1
        assert all(a[1] >= b[1] for a, b in zip(ranked, ranked[1:]))
        assert sum(math.exp(v["logprob"]) for v in entry.values()) <= 1 + 1e-9


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--served-model-name", "smol")
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


def test_echo_with_logprobs_scores_the_prompt(client, run_exactly, model_path, tmp_path):
    ids = tokenize(run_exactly, model_path, PROMPTS[0])
    r = client.completions.create(model="smol", prompt=ids, max_tokens=5, temperature=0, echo=True, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(ids) + r.usage.completion_tokens
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(x <= 0 for x in lp.token_logprobs[1:])
    # The same numbers as prompt_logprobs through the batch path.
    res = batch(run_exactly, model_path, tmp_path, "echo", [{"prompt": ids, "max_tokens": 1, "prompt_logprobs": 2}])[0]
    for i in range(1, len(ids)):
        assert lp.token_logprobs[i] == res["prompt_logprobs"][i][str(ids[i])]["logprob"]


def test_prompt_logprobs_and_token_ids_on_both_endpoints(server, run_exactly, model_path):
    ids = tokenize(run_exactly, model_path, PROMPTS[1])
    r = requests.post(server.url + "/v1/completions", json={
        "prompt": ids, "max_tokens": 4, "temperature": 0, "prompt_logprobs": 1, "return_token_ids": True}, timeout=60)
    choice = r.json()["choices"][0]
    assert choice["prompt_token_ids"] == ids
    assert len(choice["token_ids"]) == r.json()["usage"]["completion_tokens"]
    assert len(choice["prompt_logprobs"]) == len(ids) and choice["prompt_logprobs"][0] is None
    r = requests.post(server.url + "/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0, "prompt_logprobs": 0,
        "return_token_ids": True}, timeout=60)
    choice = r.json()["choices"][0]
    assert len(choice["prompt_logprobs"]) == len(choice["prompt_token_ids"]) == r.json()["usage"]["prompt_tokens"]
    assert len(choice["token_ids"]) == r.json()["usage"]["completion_tokens"]


def test_streamed_echo_logprobs_equal_the_whole(client, run_exactly, model_path):
    ids = tokenize(run_exactly, model_path, PROMPTS[2])
    whole = client.completions.create(model="smol", prompt=ids, max_tokens=6, temperature=0, echo=True, logprobs=1)
    chunks = list(client.completions.create(model="smol", prompt=ids, max_tokens=6, temperature=0, echo=True,
                                            logprobs=1, stream=True))
    streamed = [x for c in chunks for x in (c.choices[0].logprobs.token_logprobs if c.choices[0].logprobs else [])]
    assert streamed == whole.choices[0].logprobs.token_logprobs
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text


@pytest.mark.parametrize("value", [21, -1, "3", 2.5, True])
def test_bad_prompt_logprobs_are_400(server, value):
    r = requests.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1, "prompt_logprobs": value},
                      timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "prompt_logprobs"
