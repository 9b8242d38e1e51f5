"""Attention-operator generators: synthetic families and learned heads (SPEC 8, 9)."""
