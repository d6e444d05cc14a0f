"""The LLM proposer and what it needs: one module per concern.

`proposer` (the Proposer: memory analysis, then one codegen call per turn), `signatures` (the DSPy
signatures of the two calls), `templates` (the editable texts under `prompts/`, package data),
`context` (what the model is shown), `budget` (fitting each prompt and its answer into the context
window), `server_info` (what a self-hosted server says about its window, tokenizer and chat template),
`adapter` (how a call's messages are laid out), `client` (model configuration, retries, token
accounting), `extract` (code out of free text, never executed), `scripted_server` (an
OpenAI-compatible test double).
"""

import os

# LiteLLM downloads a model price list from GitHub when it is imported unless told to use its bundled
# copy; without network that costs seconds of retries on every run. Set here, before any module of this
# package imports DSPy (which imports LiteLLM).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
