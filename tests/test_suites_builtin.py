"""The suites (softrank.suites.suite) against softrank's own certifiers.

The plugin parametrizes each suite test over the built-in constructions and lower tests
(``builtin:all``); ``make test`` runs them under ``--softrank-profile ci``.
"""

from softrank.suites.suite import *  # noqa: F401,F403  (collected here)
