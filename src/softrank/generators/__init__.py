"""Attention-operator generators: synthetic families and learned heads (docs/theory/families.md, docs/theory/heads.md)."""
