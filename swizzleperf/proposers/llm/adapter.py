"""How a call's messages are laid out: DSPy's chat adapter, with its system message moved into the
user message for a server whose chat template drops system messages.

DSPy's ChatAdapter puts the field descriptions, the answer format and the task in a system message.
Some chat templates have no system role and drop it without a word (llama-cpp-python's
`--chat_format gemma` does); the model then never sees the format it is asked to answer in.
`server_info.drops_system_message` finds that out before the first call, and the same text then
goes at the top of the user message instead. The budget measures prompts through the same adapter.
"""

from __future__ import annotations

from typing import Any

import dspy


class SystemInUserAdapter(dspy.ChatAdapter):
    """The chat adapter's messages with the system message's text prepended to the first user message."""

    def format(self, signature: type[dspy.Signature], demos: list[dict[str, Any]],
               inputs: dict[str, Any]) -> list[dict[str, Any]]:
        messages = super().format(signature, demos, inputs)
        system = [m for m in messages if m.get("role") == "system" and isinstance(m.get("content"), str)]
        rest = [m for m in messages if m not in system]
        if not system or not rest or rest[0].get("role") != "user" or not isinstance(rest[0].get("content"), str):
            return messages
        rest[0] = {**rest[0], "content": "\n\n".join([*(m["content"] for m in system), rest[0]["content"]])}
        return rest


def chat_adapter(system_in_user: bool = False) -> dspy.ChatAdapter:
    """The adapter for a call (no JSON fallback: it would be a second paid call; split_fields reads a loose answer)."""
    kind = SystemInUserAdapter if system_in_user else dspy.ChatAdapter
    return kind(use_json_adapter_fallback=False)
