"""The language-model side of the method, below the LLM proposer.

One module per concern: `prompts` (the editable texts under prompts/), `context` (what the
model is shown), `client` (model configuration, retries, token accounting), `extract` (code
out of free text, never executed), `scripted` (an OpenAI-compatible test double).
"""
