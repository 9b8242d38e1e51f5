"""The site's own MathJax: formulas typeset with nothing fetched at view time.

A thin wrapper of the PyPI package sphinx-mathjax-offline (pinned in the lock; its module is
named ``sphinx-mathjax-offline``). The package's setup points ``mathjax_path`` at
``_static/mathjax/tex-chtml.js`` and, after a successful build, copies MathJax 3.2.2 there
(the components, the TeX extensions that ``autoload`` fetches, the CHTML woff fonts). This
wrapper adds what the package leaves out: it declares parallel reading and writing safe (the
package keeps no state between documents; without the declaration ``sphinx-build -j N``
warns, and the build's ``-W`` makes that an error), and it writes MathJax's licence notice
beside the copied files. The reasons for the choice are in docs/conf.py.
"""

from __future__ import annotations

import importlib
from pathlib import Path

#: Written to ``_static/mathjax/NOTICE.txt`` of the built site.
NOTICE = """\
The files in this folder are MathJax 3.2.2 (https://www.mathjax.org/), copyright the MathJax
Consortium, distributed under the Apache License, Version 2.0
(https://www.apache.org/licenses/LICENSE-2.0). They were copied unchanged from the Python
package sphinx-mathjax-offline 0.0.2 when this site was built.
"""


def _write_notice(app, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    folder = Path(app.outdir) / "_static" / "mathjax"
    if folder.is_dir():
        (folder / "NOTICE.txt").write_text(NOTICE, encoding="utf-8")


def setup(app):
    offline = importlib.import_module("sphinx-mathjax-offline")
    offline.setup(app)  # mathjax_path, and the copy after the build (connected first)
    app.connect("build-finished", _write_notice)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
