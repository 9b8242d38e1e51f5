"""Old import paths that keep working for one release, with a :class:`DeprecationWarning`.

A module whose names moved sets ``__getattr__ = moved(__name__, {name: new module})``:
reading one of those names from the old module warns once per call site (Python's default
filter) and returns the object from its new home. The names are not in the old module's
``__all__``, so the API reference documents each object once, where it lives now.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved"]


def moved(old: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that moved out of module ``old``.

    Parameters
    ----------
    old : str
        The old module's dotted name (its ``__name__``).
    names : mapping of str to str
        ``{name: new module's dotted name}``.

    Returns
    -------
    callable
        ``__getattr__(name)``: the object from its new module, after a
        :class:`DeprecationWarning` naming both paths.

    Raises
    ------
    AttributeError
        From the returned function, for a name that is not among ``names``.
    """
    names = dict(names)

    def __getattr__(name: str) -> Any:
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} has moved to {new}.{name}; the old path will be removed "
                      "in the next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    return __getattr__
