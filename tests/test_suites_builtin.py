"""The suites (softrank.suites.suite) against softrank's own certifiers.

The plugin parametrizes each suite test over softrank's own constructions and lower tests
(``builtin:own``, its default) and the real-size cases; ``make test`` runs them under
``--softrank-profile ci`` (the reference constructions run in tests/test_suites_plugin.py).
"""

from softrank.suites.suite import *  # noqa: F401,F403  (collected here)
