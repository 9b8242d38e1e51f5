"""softrank's own brackets computed once: the reference store and its bundles (docs/store.md).

:class:`ReferenceStore` keeps softrank's own bracket of an operator at a tolerance (its two
certificate files and its diagnostics), keyed by the operator's content hash, ``eps``, the
effort and the engine, and checks both certificates again in both arithmetics on every
read; :func:`softrank.bracket` (``store=``), ``softrank audit``, ``softrank bracket`` and the
suites read and fill it. :func:`export_bundle` and :func:`import_bundle` carry a panel's
references between machines.
"""

from .bundle import BundleReport, export_bundle, import_bundle, read_manifest
from .store import (STORE_ENV, ReferenceStore, Refused, default_store_dir, engine_key,
                    engine_versions, turned_off)

__all__ = ["ReferenceStore", "Refused", "default_store_dir", "engine_key", "engine_versions",
           "turned_off", "STORE_ENV", "export_bundle", "import_bundle", "read_manifest",
           "BundleReport"]
