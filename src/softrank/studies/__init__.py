"""Studies built on brackets and geometry (docs/theory/studies.md, docs/theory/families.md).

Scaling laws of the synthetic families (:mod:`.laws`), the block-width study
(:mod:`.blockwidth`), the held-out add-on test of native geometry (:mod:`.addon`, with the
feature blocks of :mod:`.features`), the intrinsic descriptor's rank correlations
(:mod:`.descriptor`) and the report's studies section (:mod:`.report`).
"""
