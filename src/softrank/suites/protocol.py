"""The protocol a third-party certifier follows to be gated by the suites (docs/theory/witnesses.md, docs/theory/lower.md, docs/theory/attacks.md).

It is softrank's one certifier interface, :mod:`softrank.certifiers.interface`, re-exported
here for the plugin's users: a **construction** has ``witness(operator, eps) -> (U, W) |
None``, a **lower test** ``certify(operator, eps) -> certificate | None``; either may take
an optional ``context`` argument. The same objects run in :func:`softrank.bracket`
(``constructions=``, ``lower_tests=``) and in ``softrank audit --certifier MODULE:OBJECT``.
"""

from __future__ import annotations

from ..certifiers.interface import Certifier, CertifierError, Construction, LowerTest, as_certifier
from ..certifiers.registry import load_certifier

__all__ = ["Construction", "LowerTest", "Certifier", "CertifierError", "load_certifier",
           "as_certifier"]
