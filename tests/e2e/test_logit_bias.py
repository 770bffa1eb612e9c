"""logit_bias as OpenAI documents it: token-id keys, biases in [-100, 100]
added to the logits before sampling. Checked against the model's own raw
logprobs: a -100 bias on the greedy choice leaves the runner-up, a +100 bias
makes a token win, and malformed maps are 400 naming the field."""

from __future__ import annotations

import pytest

from test_server import ServerProcess, assert_error, post


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path)
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


def completion(server, **kw):
    body = {"prompt": "The capital of France is", "max_tokens": 1, "temperature": 0, "return_token_ids": True}
    r = post(server, "/v1/completions", dict(body, **kw), key=None)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def test_a_minus_100_bias_leaves_the_runner_up(server):
    plain = completion(server, logprobs=2)
    top = plain["logprobs"]["top_logprobs"][0]
    first, second = sorted(top, key=top.get, reverse=True)
    assert plain["logprobs"]["tokens"][0] == first
    first_id = plain["token_ids"][0]
    biased = completion(server, logprobs=2, logit_bias={str(first_id): -100})
    assert biased["logprobs"]["tokens"][0] == second
    # The reported logprobs stay the model's raw ones.
    assert biased["logprobs"]["top_logprobs"][0] == top


def test_a_plus_100_bias_makes_a_token_win_every_step(server):
    token = 1234
    choice = completion(server, max_tokens=5, logit_bias={str(token): 100})
    assert choice["token_ids"] == [token] * 5


def test_a_sampled_request_with_bias_is_reproducible(server):
    kw = dict(max_tokens=8, temperature=1.0, seed=7, logit_bias={"1234": 5, "42": -3.5})
    assert completion(server, **kw)["token_ids"] == completion(server, **kw)["token_ids"]


def test_chat_takes_logit_bias(server):
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0,
            "logit_bias": {"1234": 100}, "return_token_ids": True}
    r = post(server, "/v1/chat/completions", body, key=None)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["token_ids"] == [1234] * 3


@pytest.mark.parametrize("bias, needle", [
    ([1, 2], "object"),
    ({"abc": 1}, "abc"),
    ({"-1": 1}, "-1"),
    ({"007": 1}, "007"),
    ({"99999999": 1}, "99999999"),
    ({"5": 101}, "between -100 and 100"),
    ({"5": -100.5}, "between -100 and 100"),
    ({"5": "1"}, "between -100 and 100"),
    ({"5": None}, "between -100 and 100"),
])
def test_bad_logit_bias_is_400(server, bias, needle):
    body = {"prompt": "Hi", "max_tokens": 1, "logit_bias": bias}
    assert_error(post(server, "/v1/completions", body, key=None), 400, needle, "logit_bias")
