"""`exactly run --chat` (what `scripts/run "PROMPT"` calls): the prompt is
one user message rendered by the model's chat template as Hugging Face
renders it and tokenized as the reference tokenizer does, and an instruct
model answers and ends its turn; plain `exactly run` keeps the raw text."""

from __future__ import annotations

import json

from gguf import GGUFReader

import tokenizer_ref
from test_chat_template import hf_environment

PROMPT = "Name three fruits."


def test_run_chat_answers_through_the_template(run_exactly, model_path, ref_tokenizer, bos_id, tmp_path):
    template = GGUFReader(str(model_path)).fields["tokenizer.chat_template"].contents()
    rendered = hf_environment().from_string(template).render(
        messages=[{"role": "user", "content": PROMPT}], add_generation_prompt=True, bos_token="", eos_token="")
    ids_file = tmp_path / "ids.json"
    proc = run_exactly(["run", "--chat", "-m", model_path, "-p", PROMPT, "-n", "64", "--temp", "0", "-t", "2",
                        "--ids-out", ids_file])
    ids = json.loads(ids_file.read_text())
    assert ids["prompt_ids"] == tokenizer_ref.encode(ref_tokenizer, rendered, bos_id=bos_id)
    assert "finish: stop" in proc.stderr, proc.stderr[-500:]  # the answer ended its turn
    assert proc.stdout.strip()

    raw_file = tmp_path / "raw.json"
    run_exactly(["run", "-m", model_path, "-p", PROMPT, "-n", "1", "--temp", "0", "-t", "2", "--ids-out", raw_file])
    assert json.loads(raw_file.read_text())["prompt_ids"] == tokenizer_ref.encode(ref_tokenizer, PROMPT, bos_id=bos_id)


def test_run_chat_refuses_flags_that_contradict_it(run_exactly, model_path):
    for flags in (["-p", PROMPT, "--no-bos"], ["-p", PROMPT, "--no-parse-special"], ["--prompt-ids", "1,2"]):
        proc = run_exactly(["run", "--chat", "-m", model_path, *flags], check=False)
        assert proc.returncode == 64, (flags, proc.stderr)  # the usage error code
        assert "--chat" in proc.stderr
