"""exactly: the inference engine in-process, in the shape of vLLM's offline API.

    from exactly import LLM, SamplingParams
    llm = LLM(model="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    outputs = llm.generate(["The sea is"], SamplingParams(temperature=0.8, seed=1, max_tokens=32))
    print(outputs[0].outputs[0].text)

`python -m exactly ARGS` runs the `exactly` command line.
"""

from .llm import LLM
from .outputs import CompletionOutput, Logprob, RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

__version__ = "0.1.0"
__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "Tokenizer"]
