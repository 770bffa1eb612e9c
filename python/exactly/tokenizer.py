"""The model's tokenizer, with the calls of a Hugging Face tokenizer."""

from __future__ import annotations

import json
from typing import Any

from . import _exactly


class Tokenizer:
    def __init__(self, engine) -> None:
        self._engine = engine
        self._token_text: dict[int, str] = {}

    @property
    def vocab_size(self) -> int:
        return self._engine.vocab_size

    def __len__(self) -> int:
        return self._engine.vocab_size

    @property
    def bos_token_id(self) -> int | None:
        return None if self._engine.bos_token_id < 0 else self._engine.bos_token_id

    @property
    def eos_token_id(self) -> int | None:
        return None if self._engine.eos_token_id < 0 else self._engine.eos_token_id

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`, special-token text recognised; with
        add_special_tokens, BOS first when the model asks for it."""
        if not isinstance(text, str):
            raise ValueError(f"encode(): argument 'text' must be a str, got {type(text).__name__}")
        return self._engine.encode(text, bool(add_special_tokens))

    def decode(self, token_ids: list[int], skip_special_tokens: bool = True) -> str:
        """The text of the ids; control tokens' text only without skip_special_tokens."""
        ids = token_ids_arg("decode", "token_ids", token_ids, self.vocab_size)
        return self._engine.decode(ids, not skip_special_tokens).decode("utf-8", "replace")

    def apply_chat_template(self, messages: list[dict[str, Any]], tokenize: bool = False,
                            add_generation_prompt: bool = True, tools: list[dict[str, Any]] | None = None,
                            **template_kwargs: Any) -> str | list[int]:
        """`messages` rendered by the model's chat template (ChatML when it has
        none), as the server and chat() render them; token ids with tokenize.
        `tools` as chat(tools=...) passes them. Further keyword arguments are
        template variables, as in transformers (enable_thinking=False for
        Qwen3, say); transformers' other options are refused by name."""
        unsupported = sorted(TRANSFORMERS_OPTIONS & set(template_kwargs))
        if unsupported:
            raise ValueError(f"apply_chat_template(): argument '{unsupported[0]}' is not supported")
        text = messages_json("apply_chat_template", messages)
        kwargs = template_kwargs_json("apply_chat_template", template_kwargs)
        tools_json = tools_json_arg("apply_chat_template", tools)
        if tokenize and add_generation_prompt:
            return self._engine.chat_tokens(text, tools_json, kwargs)
        rendered = self._engine.chat_text(text, bool(add_generation_prompt), kwargs, tools_json)
        if not tokenize:
            return rendered
        # BOS first when the model asks for it, unless the template wrote it.
        ids = self._engine.encode(rendered, False)
        model_adds_bos = bool(self._engine.encode("", True))
        if model_adds_bos and (not ids or ids[0] != self.bos_token_id):
            ids.insert(0, self.bos_token_id)
        return ids

    def token_text(self, token_id: int) -> str:
        """One token's text (raw bytes decoded, invalid UTF-8 replaced)."""
        text = self._token_text.get(token_id)
        if text is None:
            text = self._engine.token_text(token_id).decode("utf-8", "replace")
            self._token_text[token_id] = text
        return text


def messages_json(caller: str, messages: Any) -> str:
    """One conversation as JSON; the engine checks its shape and names what is wrong."""
    if not isinstance(messages, (list, tuple)):
        raise ValueError(f"{caller}(): argument 'messages' must be a list of messages, got {type(messages).__name__}")
    try:
        return json.dumps(list(messages), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{caller}(): argument 'messages' cannot be read as JSON: {e}") from None


# transformers' apply_chat_template options that this one does not implement:
# refused, not passed to the template as variables.
TRANSFORMERS_OPTIONS = {"documents", "chat_template", "continue_final_message", "padding", "truncation", "max_length",
                        "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs"}


def tools_json_arg(caller: str, tools: Any) -> str:
    """A list of OpenAI tools as JSON ("" for none), checked as chat() checks them."""
    if tools is None:
        return ""
    try:
        _exactly.tool_request(json.dumps({"tools": tools}))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{caller}(): {e}") from None
    return json.dumps(tools)


def template_kwargs_json(caller: str, kwargs: Any) -> str:
    """Template variables as a JSON object ("" for none); the engine refuses
    the ones it sets itself, naming them."""
    if kwargs is None or kwargs == {}:
        return ""
    if not isinstance(kwargs, dict):
        raise ValueError(f"{caller}(): chat_template_kwargs must be a dict of template variables")
    try:
        return json.dumps(kwargs, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{caller}(): chat_template_kwargs cannot be read as JSON: {e}") from None


def token_ids_arg(caller: str, name: str, ids: Any, vocab_size: int) -> list[int]:
    """`ids` as a list of token ids of the vocabulary, or ValueError naming the argument."""
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ValueError(f"{caller}(): argument '{name}' must be a list of token ids")
    for i in ids:
        if not 0 <= i < vocab_size:
            raise ValueError(f"{caller}(): argument '{name}' has token id {i} outside the vocabulary ({vocab_size})")
    return list(ids)
