"""Structured output: OpenAI's response_format (json_object, json_schema) and
vLLM's structured_outputs / guided_* fields, checked against independent
references: every stopped sample of a 22-schema corpus validates with the
`jsonschema` package, regexes are checked with Python's `re`, choices by
membership; a constrained greedy request returns the unconstrained one's
tokens bit for bit wherever the model's own choice was allowed, and each
token it chose is the model's best allowed one; a request's output is the
same alone and inside a batch; the official client's parse() helper gets a
Pydantic model back. EXACTLY_SLOW_TESTS=1 draws 200 samples per schema."""

from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pydantic
import pytest

from structured_schemas import PROMPT, SCHEMAS
from test_server import ServerProcess, assert_error, post

SLOW = os.environ.get("EXACTLY_SLOW_TESTS") == "1"
SAMPLES = 200 if SLOW else 2
MAX_TOKENS = 256


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--max-num-seqs", 64)
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


def complete(server, path="/v1/completions", **body):
    r = post(server, path, body, key=None)
    assert r.status_code == 200, r.text
    return r.json()


def chat_body(content, **kw):
    return dict(messages=[{"role": "user", "content": content}], **kw)


def schema_format(name):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}}


# --- every sample validates -------------------------------------------------

@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_seeded_samples_validate_against_the_schema(server, name):
    def one(seed):
        return complete(server, "/v1/chat/completions",
                        **chat_body(PROMPT.format(name=name.replace("_", " ")), max_tokens=MAX_TOKENS,
                                    temperature=1.0, seed=seed, response_format=schema_format(name)))
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(SAMPLES)))
    stopped = 0
    for a in answers:
        choice = a["choices"][0]
        if choice["finish_reason"] == "length":
            assert a["usage"]["completion_tokens"] == MAX_TOKENS
            continue
        assert choice["finish_reason"] == "stop"
        stopped += 1
        jsonschema.validate(json.loads(choice["message"]["content"]), SCHEMAS[name])
    # Liveness, not correctness: a schema with an unbounded string (email_format)
    # lets a 135M model at temperature 1 run on inside it, 111 of 200 samples
    # to 256 tokens; what stops must validate, and enough of it must stop.
    assert stopped >= SAMPLES * 0.25, f"{SAMPLES - stopped} of {SAMPLES} samples ran to max_tokens"


def test_json_object_is_an_object(server):
    for seed in range(3):
        a = complete(server, **{"prompt": "A JSON object describing a cat:", "max_tokens": MAX_TOKENS,
                                "temperature": 1.0, "seed": seed, "response_format": {"type": "json_object"}})
        c = a["choices"][0]
        if c["finish_reason"] == "stop":
            assert isinstance(json.loads(c["text"]), dict)


@pytest.mark.parametrize("field", ["guided_json", "structured_outputs"])
def test_vllm_names_take_a_schema(server, field):
    schema = SCHEMAS["person"]
    value = {"json": schema} if field == "structured_outputs" else json.dumps(schema)
    a = complete(server, **{"prompt": "A person as JSON:", "max_tokens": 64, "temperature": 0, field: value})
    jsonschema.validate(json.loads(a["choices"][0]["text"]), schema)


# --- regex, choice, grammar ------------------------------------------------

REGEX = r"(yes|no), because [a-z ]{3,20}\."


@pytest.mark.parametrize("field", ["guided_regex", "structured_outputs"])
def test_regex_output_matches(server, field):
    value = {"regex": REGEX} if field == "structured_outputs" else REGEX
    for seed in range(4):
        a = complete(server, **{"prompt": "Is the sky blue?", "max_tokens": 40, "temperature": 1.0, "seed": seed,
                                field: value})
        assert re.fullmatch(REGEX, a["choices"][0]["text"]), a["choices"][0]["text"]


CHOICES = ["Paris", "Berlin", "Madrid", "a city I do not know"]


def test_choice_is_one_of_them_and_the_best_allowed_at_every_token(server):
    a = complete(server, prompt="The capital of Germany is", max_tokens=16, temperature=0, logprobs=20,
                 guided_choice=CHOICES)
    c = a["choices"][0]
    assert c["text"] in CHOICES
    # At each position, every alternative the model preferred must have been
    # disallowed: the text with it is a prefix of no choice.
    prefix = ""
    for token, chosen_lp, top in zip(c["logprobs"]["tokens"], c["logprobs"]["token_logprobs"],
                                     c["logprobs"]["top_logprobs"]):
        for alt, lp in top.items():
            if lp > chosen_lp:
                assert not any(ch.startswith(prefix + alt) for ch in CHOICES), (prefix, alt)
        prefix += token


def test_structured_outputs_choice_and_grammar(server):
    a = complete(server, prompt="Pick one:", max_tokens=8, temperature=1.0, seed=5,
                 structured_outputs={"choice": CHOICES})
    assert a["choices"][0]["text"] in CHOICES
    grammar = 'root ::= num (" + " num)? " = " num\nnum ::= [1-9] [0-9]?'
    reference = r"[1-9][0-9]?( \+ [1-9][0-9]?)? = [1-9][0-9]?"
    for seed in range(3):
        a = complete(server, prompt="An addition:", max_tokens=40, temperature=1.0, seed=seed,
                     structured_outputs={"grammar": grammar})
        c = a["choices"][0]
        assert c["finish_reason"] == "stop" and re.fullmatch(reference, c["text"]), c
    a = complete(server, prompt="An addition:", max_tokens=40, temperature=0, guided_grammar=grammar)
    assert re.fullmatch(reference, a["choices"][0]["text"])


# --- exactness --------------------------------------------------------------

def test_greedy_equals_unconstrained_where_the_model_was_allowed(server):
    """A regex that admits the unconstrained greedy text (and more) must give it back, token for token."""
    for prompt in ["The capital of France is", "Once upon a time", "def fib(n):", "1, 2, 3, 4,"]:
        # Without ignore_eos: where the model ends its text, the grammar lets it end too.
        plain = complete(server, prompt=prompt, max_tokens=32, temperature=0, logprobs=5,
                         return_token_ids=True)["choices"][0]
        text = plain["text"]
        regex = re.escape(text) + "[a-z]*"
        constrained = complete(server, prompt=prompt, max_tokens=32, temperature=0, logprobs=5,
                               return_token_ids=True, guided_regex=regex)["choices"][0]
        assert constrained["token_ids"] == plain["token_ids"]
        assert constrained["logprobs"] == plain["logprobs"]


def test_sampling_draws_from_the_distribution_renormalised_over_the_allowed_tokens(server):
    """Under the regex [AB] the only allowed tokens are "A" and "B": seeded draws must pick "A" with
    probability p(A) / (p(A) + p(B)) of the model's raw distribution (reported as each token's logprob)."""
    n = 400

    def one(seed):
        return complete(server, prompt="Question: which option, A or B? Answer:", max_tokens=1, temperature=1.0,
                        seed=seed, logprobs=0, guided_regex="[AB]")["choices"][0]["logprobs"]
    with ThreadPoolExecutor(32) as pool:
        draws = list(pool.map(one, range(n)))
    logprob = {d["tokens"][0]: d["token_logprobs"][0] for d in draws}
    assert set(logprob) <= {"A", "B"}
    if len(logprob) < 2:
        pytest.skip(f"every draw was {set(logprob)}; the other token is too unlikely to test the ratio")
    p_a = math.exp(logprob["A"]) / (math.exp(logprob["A"]) + math.exp(logprob["B"]))
    k = sum(d["tokens"][0] == "A" for d in draws)
    assert abs(k - n * p_a) <= 4 * math.sqrt(n * p_a * (1 - p_a)) + 1, (k, n * p_a)


def test_batch_invariance_with_grammars(server):
    """The same constrained request gives the same bits alone and among other constrained and free requests."""
    target = dict(chat_body("Describe a recipe.", max_tokens=96, temperature=1.0, seed=3, logprobs=True,
                            top_logprobs=2, response_format=schema_format("recipe")))
    alone = complete(server, "/v1/chat/completions", **target)
    others = [dict(chat_body(f"Describe {n}.", max_tokens=64, temperature=1.0, seed=i,
                             response_format=schema_format(n))) for i, n in enumerate(sorted(SCHEMAS)[:6])]
    others += [dict(chat_body("Tell me a story.", max_tokens=64, temperature=1.0, seed=9))]
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(complete, server, "/v1/chat/completions", **b) for b in others[:4]]
        mine = pool.submit(complete, server, "/v1/chat/completions", **target)
        futures += [pool.submit(complete, server, "/v1/chat/completions", **b) for b in others[4:]]
        batched = mine.result()
        for f in futures:
            f.result()
    assert batched["choices"][0]["message"] == alone["choices"][0]["message"]
    assert batched["choices"][0]["logprobs"] == alone["choices"][0]["logprobs"]


def test_n_samples_each_follow_the_grammar(server):
    a = complete(server, prompt="Pick one:", max_tokens=16, temperature=1.0, seed=2, n=4, guided_choice=CHOICES)
    assert len(a["choices"]) == 4
    assert all(c["text"] in CHOICES for c in a["choices"])


# --- the official client ----------------------------------------------------

class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=24)
    age: int = pydantic.Field(ge=0, le=120)


def test_openai_client_parse_returns_the_pydantic_model(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
    done = client.chat.completions.parse(
        model="SmolLM2-135M-Instruct.Q4_1", messages=[{"role": "user", "content": "Describe a person."}],
        response_format=Person, temperature=0, max_tokens=64)
    person = done.choices[0].message.parsed
    assert isinstance(person, Person)
    assert Person.model_validate_json(done.choices[0].message.content) == person


# --- refusals ---------------------------------------------------------------

DEEP = {"type": "object"}
for _ in range(40):
    DEEP = {"type": "object", "properties": {"a": DEEP}}


@pytest.mark.parametrize("extra, needle, param", [
    ({"response_format": "json"}, "object", "response_format"),
    ({"response_format": {"type": "xml"}}, "xml", "response_format"),
    ({"response_format": {"type": "json_schema"}}, "json_schema", "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "name", "response_format"),
    ({"response_format": {"type": "json_object", "schema": {}}}, "schema", "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 5}}}, "schema",
     "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": DEEP}}}, "deeper",
     "response_format"),
    ({"guided_json": {"type": "object", "description": "x" * 70000}}, "bytes", "guided_json"),
    ({"guided_json": "{not json"}, "not JSON", "guided_json"),
    ({"guided_json": {"type": "integer", "minimum": 5, "maximum": 1}}, "compile", "guided_json"),
    ({"guided_regex": "a" * 5000}, "bytes", "guided_regex"),
    ({"guided_regex": "(" * 40 + ")" * 40}, "brackets", "guided_regex"),
    ({"guided_regex": "a{1,100000}"}, "repeats", "guided_regex"),
    ({"guided_regex": "(a"}, "compile", "guided_regex"),
    ({"guided_regex": 5}, "string", "guided_regex"),
    ({"guided_grammar": "root ::= undefined_rule"}, "compile", "guided_grammar"),
    ({"guided_choice": []}, "non-empty", "guided_choice"),
    ({"guided_choice": ["a"] * 300}, "choices", "guided_choice"),
    ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "exactly one", "structured_outputs"),
    ({"structured_outputs": {"whitespace_pattern": " "}}, "whitespace_pattern", "structured_outputs"),
    ({"structured_outputs": {}}, "one of", "structured_outputs"),
    ({"guided_regex": "a", "guided_choice": ["b"]}, "only one", "guided_choice"),
    ({"response_format": {"type": "json_object"}, "guided_regex": "a"}, "only one", "guided_regex"),
    ({"guided_regex": "a", "ignore_eos": True}, "ignore_eos", "ignore_eos"),
    # What the grammar engine would leave out is refused, not dropped.
    ({"guided_json": {"type": "string", "format": "email", "maxLength": 9}}, "not supported", "guided_json"),
    ({"guided_json": {"type": "string", "pattern": "^a+$", "minLength": 3}}, "not supported", "guided_json"),
    ({"guided_json": {"allOf": [{"type": "integer"}, {"minimum": 3}]}}, "not supported", "guided_json"),
    ({"guided_regex": "a^b"}, "not supported", "guided_regex"),
])
def test_bad_structured_output_is_400(server, extra, needle, param):
    body = dict({"prompt": "x", "max_tokens": 4}, **extra)
    err = assert_error(post(server, "/v1/completions", body, key=None), 400, needle, param)
    assert ".cc:" not in err["message"] and len(err["message"]) < 1000


def test_a_compiled_schema_is_cached(server):
    schema = {"type": "object", "properties": {"k": {"type": "string", "maxLength": 5}}, "required": ["k"]}
    for _ in range(2):
        complete(server, prompt="x", max_tokens=8, temperature=0, guided_json=schema)
    m = server.metrics()
    assert m["exactly_grammar_cache_hits_total"] >= 1


def test_the_engine_accounts_for_every_mask_and_its_time(server):
    """Each sampled constrained token costs one mask: /metrics counts them,
    the threads' seconds they took and the wait the forward pass did not
    hide, beside the iterations' time split into forward pass and host."""
    before = server.metrics()
    out = complete(server, prompt="x", max_tokens=12, temperature=0, guided_regex="[a-z]{12}", return_token_ids=True)
    after = server.metrics()
    d = {k: after[k] - before[k] for k in after if k.startswith("exactly_") and k in before}
    tokens = len(out["choices"][0]["token_ids"])
    assert tokens >= 3
    # one mask a sampled token, and one more when the regex completes (the stop token's)
    assert tokens <= d["exactly_grammar_masks_total"] <= tokens + 1
    assert 0 < d["exactly_grammar_mask_seconds_total"] < d["exactly_engine_step_seconds_total"] * 8
    assert 0 <= d["exactly_grammar_mask_wait_seconds_total"] <= d["exactly_engine_forward_seconds_total"]
    assert 0 < d["exactly_engine_forward_seconds_total"] <= d["exactly_engine_step_seconds_total"]


def test_exactly_batch_constrains_as_the_server_does(run_exactly, model_path, tmp_path, server):
    body = {"prompt": "The answer is", "max_tokens": 8, "temperature": 0, "guided_regex": "[0-9]{1,3}"}
    requests_file = tmp_path / "requests.jsonl"
    requests_file.write_text(json.dumps(body) + "\n")
    run_exactly(["batch", "-m", model_path, "-i", requests_file, "-o", tmp_path / "out.jsonl"])
    batch = json.loads((tmp_path / "out.jsonl").read_text())["choices"][0]
    assert re.fullmatch("[0-9]{1,3}", batch["text"]), batch["text"]
    assert batch["text"] == complete(server, **body)["choices"][0]["text"]


def test_exactly_batch_refuses_tools(run_exactly, model_path, tmp_path):
    requests_file = tmp_path / "requests.jsonl"
    requests_file.write_text(json.dumps({"prompt": "x", "max_tokens": 2, "tools": []}) + "\n")
    p = run_exactly(["batch", "-m", model_path, "-i", requests_file, "-o", tmp_path / "out.jsonl"], check=False)
    assert p.returncode == 2 and "tools" in p.stderr, p.stderr


def test_a_grammar_the_vocabulary_cannot_finish_ends_as_abort(server):
    """A control byte no token holds (SmolLM2 has none for a few) cannot be generated: the grammar has no
    way on, its stop tokens are allowed instead, and the answer says it is unfinished."""
    missing = [b for b in range(32)
               if not post(server, "/tokenize", {"prompt": chr(b), "add_special_tokens": False},
                           key=None).json()["tokens"]]
    if not missing:
        pytest.skip("this vocabulary holds every control byte")
    for temperature in (0, 1.0):
        a = complete(server, prompt="x", max_tokens=5, temperature=temperature, seed=1,
                     guided_choice=["a" + chr(missing[0])])
        assert a["choices"][0]["finish_reason"] == "abort"
        assert a["choices"][0]["text"] == "a"
    assert complete(server, prompt="x", max_tokens=2)["choices"][0]["finish_reason"] == "length"
