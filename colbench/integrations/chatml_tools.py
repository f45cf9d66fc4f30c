"""A ChatML chat template that can render tool calls, for local models whose own template cannot (the embedded
SmolLM2 among them): TRL's ``GRPOTrainer(environment_factory=...)`` and ``tools=...`` refuse a template that drops
tool calls, and parse the model's calls with a response template it knows.

The format is Qwen2.5's (``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` inside the assistant turn, tool
results as ``<tool_response>`` blocks of a user turn), which TRL parses with its Qwen3 response template; unlike
Qwen's template it adds no default system prompt beyond the tool list. It is prefix-preserving, as TRL needs for
multi-turn training (TRL 1.16 checks it and keeps the template as is).

    from colbench.integrations.chatml_tools import with_tool_calling
    tokenizer = with_tool_calling(AutoTokenizer.from_pretrained(model_path))
"""

from __future__ import annotations

from typing import Any

from trl.chat_template_utils import qwen3_template

CHATML_TOOLS_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions.\\n\\nYou are provided with function signatures within "
    "<tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": '
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'user' or message.role == 'system' or "
    "(message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + tool_call.name + \'", "arguments": \' }}'
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML with Qwen2.5's tool-call format and no default system prompt."""


def with_tool_calling(tokenizer: Any) -> Any:
    """``tokenizer`` (a ChatML one: ``<|im_start|>`` / ``<|im_end|>``) with ``CHATML_TOOLS_TEMPLATE`` as its chat
    template and TRL's parser of that format as its ``response_template``; returned for chaining."""
    tokenizer.chat_template = CHATML_TOOLS_TEMPLATE
    tokenizer.response_template = qwen3_template
    return tokenizer
