"""Proposers behind one protocol (see base.py): offline search and the LLM."""
