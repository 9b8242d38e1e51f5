"""``softrank diff AUDIT_A AUDIT_B``: better or worse between two audits."""

from __future__ import annotations

import json
import sys

__all__ = ['run']


def run(args) -> int:
    import os

    from ..diff import diff_audits, load_audit, render_markdown, verdict

    a = load_audit(args.a, "AUDIT_A")
    b = load_audit(args.b, "AUDIT_B")
    d = diff_audits(a, b)
    passed, reason = verdict(d, args.allow_worse)
    if args.json:
        d["allow_worse"], d["passed"], d["reason"] = args.allow_worse, passed, reason
        text = json.dumps(d, indent=1) + "\n"
    else:
        text = render_markdown(d, args.allow_worse, args.limit)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head: the status still says pass or fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if passed else 1
