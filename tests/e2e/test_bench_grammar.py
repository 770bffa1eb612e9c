"""`exactly bench grammar`: a JSON schema's host cost per token (mask and
advance) over an answer the schema accepts, warm and after reading memory
between tokens. The timings are not asserted (the machine may be busy):
one row per size asked, positive microseconds; an answer the schema refuses
exits 2 naming the token, as does a schema that does not compile; the
answer's last newline is not part of it."""

from __future__ import annotations

import json

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "count": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["name", "count"], "additionalProperties": False}


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_one_row_per_size_and_positive_times(run_exactly, model_path, tmp_path):
    schema = write(tmp_path, "schema.json", json.dumps(SCHEMA))
    answer = write(tmp_path, "answer.json", json.dumps({"name": "soup", "count": 3}) + "\n")
    out = run_exactly(["bench", "grammar", "-m", model_path, "--schema", schema, "--text", answer,
                       "--evict-mb", "0", "1", "--repeats", "2"]).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows[1:]] == ["0", "1"], out
    assert all(float(r[1]) > 0 for r in rows[1:]), out


def test_an_answer_the_schema_refuses_names_the_token(run_exactly, model_path, tmp_path):
    schema = write(tmp_path, "schema.json", json.dumps(SCHEMA))
    answer = write(tmp_path, "answer.json", json.dumps({"name": 5, "count": 3}))
    proc = run_exactly(["bench", "grammar", "-m", model_path, "--schema", schema, "--text", answer], check=False)
    assert proc.returncode == 2
    assert "--text: token" in proc.stderr and "not allowed" in proc.stderr


def test_a_schema_that_does_not_compile_exits_2(run_exactly, model_path, tmp_path):
    schema = write(tmp_path, "schema.json", '{"type": "objectx"}')
    answer = write(tmp_path, "answer.json", "{}")
    proc = run_exactly(["bench", "grammar", "-m", model_path, "--schema", schema, "--text", answer], check=False)
    assert proc.returncode == 2 and "--schema" in proc.stderr
