"""Example certifiers for the softrank suites (see README, "Gate your own certifier in CI").

* :mod:`.my_construction` -- ``MyConstruction``: a construction (returns factors ``U, W``);
* :mod:`.my_lower_test` -- ``MyLowerTest``: a lower test (returns a key-group certificate);
* :mod:`.broken_construction` -- ``BrokenConstruction``: measures its error wrongly, so it
  claims witnesses that are not within ``eps`` (the suites must catch it);
* :mod:`.broken_lower_test` -- ``OffByOneLowerTest``: a Frobenius tail test with an
  off-by-one index, so it claims one more than it proves (the suites must catch it).

Run from the repository root, e.g.
``pytest --softrank-certifier examples.my_construction:MyConstruction``.
"""
