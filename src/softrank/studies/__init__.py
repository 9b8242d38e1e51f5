"""Studies built on brackets and geometry (SPEC 7, 8, 11): scaling laws so far."""
