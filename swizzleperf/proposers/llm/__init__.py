"""The LLM proposer and what it needs: one module per concern.

`proposer` (the Proposer: memory analysis, then one codegen call per turn), `signatures` (the DSPy
signatures of the two calls), `templates` (the editable texts under `prompts/`, package data),
`context` (what the model is shown), `client` (model configuration, retries, token accounting),
`extract` (code out of free text, never executed), `scripted` (an OpenAI-compatible test double).
"""
