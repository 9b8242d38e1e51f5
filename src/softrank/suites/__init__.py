"""Suites that gate certifiers in CI: soundness, gauge invariance, attack resistance
(docs/suites.md; docs/theory/lower.md, docs/theory/geometry.md, docs/theory/attacks.md).

* :mod:`.protocol` -- what a third-party construction or lower test implements;
* :mod:`.strategies` -- hypothesis strategies (operators, planted instances, gauges, tolerances);
* :mod:`.suite` -- the suite tests; :mod:`.plugin` -- the pytest plugin that runs them;
* :mod:`.builtin` -- softrank's own certifiers behind the protocol.

Nothing is imported here, so that the pytest plugin (``softrank.suites.plugin``) stays light.
"""
