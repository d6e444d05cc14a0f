"""Commands built from the loop: bench, sweep, adopt, apply."""
