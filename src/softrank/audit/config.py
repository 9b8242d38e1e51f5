"""The settings of an audit's cells: one frozen :class:`AuditConfig`, validated once.

The CLI (``softrank audit``) builds it from its options, :func:`softrank.harness.runner.run_audit`
keys the run's ledger by :meth:`AuditConfig.identity`, and every worker receives the same
object and runs one operator's cells with :func:`softrank.audit.worker.run_operator`. How
the cells are scheduled (workers, executor, resume) is not part of it: results do not
depend on it.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..attacks import EFFORTS as ATTACK_EFFORTS
from ..certifiers.registry import load_certifiers
from ..errors import InvalidArgumentError
from ..refstore import ReferenceStore
from ..validation import check_choice, check_effort, check_positive, parse_rank, validate_eps
from .pipeline import default_stages, stage_columns

__all__ = ["AuditConfig", "ATTACKS"]

#: The attack efforts an audit accepts: ``"none"`` and :data:`softrank.attacks.EFFORTS`.
ATTACKS = ("none", *sorted(ATTACK_EFFORTS))


@dataclass(frozen=True)
class AuditConfig:
    """What every cell of an audit is computed with (frozen; validated when made).

    Parameters
    ----------
    eps : sequence of float
        Tolerances in ``(0, 1)``, one cell each per operator
        (:func:`softrank.certifiers.bracket.validate_eps`).
    validated : bool
        Bracket the exact softmax of each operator's factors when it has them
        (docs/theory/checker.md#validated-input); ``validated_rho`` is then the enclosure
        radius.
    attacks : {"none", "quick", "standard", "hard"}
        Effort of the targeted attack on every lower certificate of rank ``>= 2``
        (docs/theory/attacks.md).
    cell_timeout : float, optional
        Seconds per cell (:func:`softrank.bracket`'s ``time_limit``).
    effort : {"full", "fast"}
        :func:`softrank.bracket`'s ``effort``.
    certifiers : sequence of str
        Third-party ``MODULE:OBJECT`` specs run beside the built-ins in every cell (loaded
        here, so a bad spec fails before any work; workers load them by name).
    stages : sequence of Stage or str
        Extra stages run after the default ones (objects, or ``MODULE:OBJECT`` specs; see
        :mod:`softrank.audit.pipeline`).
    rank : str
        ``plain`` (default): the brackets of ``r_eps`` only. ``causal`` or ``window:W``: every
        cell of a causal head also gets its bracket of that rank (the ``causal`` stage,
        :class:`softrank.audit.causal_stage.CausalStage`; docs/theory/causal.md).
    frontier : bool
        Also bracket each operator's rank-error frontier at the ranks of
        :data:`softrank.audit.frontier_stage.AUDIT_RANKS` and draw the constructions on it
        (the ``frontier`` stage; docs/theory/frontier.md). Default False: it costs about as
        much again as the brackets.
    reference_store : str, optional
        Directory of the reference store (:class:`softrank.refstore.ReferenceStore`):
        softrank's own bracket of a cell stored there is read back and checked instead of
        computed, and a computed one is stored, with its attack's outcome. Not part of
        :meth:`identity`: a cell's ends do not depend on where its reference came from.

    Raises
    ------
    InvalidArgumentError
        Naming the first setting that is not valid, or a stage or certifier that cannot be
        loaded or clashes with another.
    """

    eps: tuple[float, ...]
    validated: bool = False
    attacks: str = "quick"
    cell_timeout: float | None = None
    effort: str = "full"
    certifiers: tuple[str, ...] = ()
    stages: tuple[Any, ...] = ()
    rank: str = "plain"
    frontier: bool = False
    reference_store: str | None = field(default=None, compare=False)
    _stage_names: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())
    _columns: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self):
        put = object.__setattr__.__get__(self)
        put("eps", tuple(validate_eps(self.eps)))
        if not isinstance(self.validated, bool):
            raise InvalidArgumentError(f"validated: expected True or False, got {self.validated!r}")
        put("attacks", check_choice(self.attacks, "attacks", ATTACKS))
        if self.cell_timeout is not None:
            put("cell_timeout", float(check_positive(self.cell_timeout, "cell_timeout (seconds)")))
        put("effort", check_effort(self.effort))
        for name in ("certifiers", "stages"):
            v = getattr(self, name)
            if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
                raise InvalidArgumentError(f"{name}: expected a list, got {v!r:.80}")
            put(name, tuple(v))
        if not all(isinstance(c, str) for c in self.certifiers):
            raise InvalidArgumentError("certifiers: expected MODULE:OBJECT strings, got "
                                       f"{list(self.certifiers)!r:.120}")
        load_certifiers(self.certifiers)
        parse_rank(self.rank, "rank")
        if not isinstance(self.frontier, bool):
            raise InvalidArgumentError(f"frontier: expected True or False, got {self.frontier!r}")
        if self.reference_store is not None:
            if not isinstance(self.reference_store, str):
                raise InvalidArgumentError("reference_store: expected a directory path, got "
                                           f"{self.reference_store!r:.80}")
            self.setting("reference_store")  # creatable, writable (opened once per process)
        pipeline = self.pipeline()
        put("_stage_names", tuple(st.name for st in pipeline))
        put("_columns", tuple(stage_columns(pipeline)))

    def pipeline(self) -> list:
        """The stages of every cell, in order (:func:`softrank.audit.pipeline.default_stages`),
        built once per process for equal settings: a worker builds them for its first
        operator and reuses them for the rest."""
        try:
            key = (os.getpid(), type(self), self._key())
            hash(key)
        except TypeError:  # an extra stage given as an unhashable object
            return default_stages(self)
        with _LOCK:  # the threads of one worker process share the caches
            stages = _PIPELINES.get(key)
        if stages is None:
            stages = default_stages(self)
            with _LOCK:
                while len(_PIPELINES) >= 4:
                    _PIPELINES.pop(next(iter(_PIPELINES)))
                _PIPELINES[key] = stages
        return list(stages)

    def setting(self, name: str, who: str = "stages"):
        """The value of the setting ``name`` as a stage that declares it among its
        ``parameters`` receives it (:func:`softrank.audit.pipeline.build_stage`): the field,
        validated when the config was made; ``certifiers`` arrives loaded, as
        ``(constructions, lower_tests)`` (:func:`~softrank.certifiers.registry.load_certifiers`),
        and ``reference_store`` opened, as a :class:`~softrank.refstore.ReferenceStore` or
        None, each once per process.

        Raises
        ------
        InvalidArgumentError
            Naming ``who``, when ``name`` is not one of the settings.
        """
        names = [f.name for f in dataclasses.fields(self) if not f.name.startswith("_")]
        if name not in names:
            raise InvalidArgumentError(f"{who}: declares the parameter {name!r}, which is not a "
                                       f"setting of the audit (one of {', '.join(names)})")
        value = getattr(self, name)
        if name == "certifiers":
            return _opened(("certifiers", value), lambda: load_certifiers(value))
        if name == "reference_store" and value is not None:
            return _opened(("reference_store", value),
                           lambda: ReferenceStore(value, "reference_store"))
        return value

    def relocated(self, reference_store: str | None) -> "AuditConfig":
        """This config with its reference store at ``reference_store`` (a directory, or None
        for none): what a worker that cannot see the client's store runs a cell with (a
        private store holding the entries the client sent, :mod:`softrank.refstore.transfer`).
        Release it with :meth:`release` when the cell is done."""
        return dataclasses.replace(self, reference_store=reference_store)

    def release(self) -> None:
        """Forget what this process built and opened for this config (its pipeline and its
        store), e.g. when its private store is deleted; the next use builds them again."""
        with _LOCK:
            for cache in (_PIPELINES, _OPENED):
                for key in [k for k, v in cache.items() if k[0] == os.getpid()
                            and (k[1:] == (("reference_store", self.reference_store),)
                                 or (k[1] is type(self) and k[2] == self._key()))]:
                    del cache[key]

    def _key(self) -> tuple:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self)
                     if not f.name.startswith("_"))

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns of every row (``brackets.csv``), in order."""
        return self._columns

    def identity(self) -> dict:
        """The settings as the run's ledger records them (JSON-ready): a resumed run must
        match them, and ``softrank diff`` lists those that differ."""
        return {"eps": list(self.eps), "validated": self.validated, "attacks": self.attacks,
                "cell_timeout": self.cell_timeout, "effort": self.effort,
                "certifiers": list(self.certifiers), "stages": list(self._stage_names),
                **({"rank": self.rank} if self.rank != "plain" else {})}


# built and opened once per process (workers run many operators with one config)
_PIPELINES: dict = {}
_OPENED: dict = {}


_LOCK = threading.RLock()


def _opened(key, make: Callable[[], Any]):
    key = (os.getpid(), key)
    with _LOCK:
        if key not in _OPENED:
            _OPENED[key] = make()
        return _OPENED[key]
