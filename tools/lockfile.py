"""The lock file requirements/lock.txt: write it (`make lock`) and check it (`make lock-check`).

The lock pins every package that softrank needs with all of pyproject.toml's extras, and the
build requirements, each at one version with its sha256 hashes, for CPython 3.11 on Linux
x86_64 (manylinux_2_28), the platform of `make install`, CI and the developers' machines.
pyproject.toml keeps its ranges for the users of the library; `make install` (so `make test`
and `make audit`) installs exactly the lock:

    pip install --require-hashes -r requirements/lock.txt
    pip install --no-deps --no-build-isolation -e .

Commands (run from the repository root):

    python3 tools/lockfile.py compile --uv UV [--find-links DIR] [UV ARGS...]
        re-resolve the lock with `uv pip compile` (pins already in the lock are kept where
        they still fit; `--upgrade` or `--upgrade-package NAME` move them); torch must come
        from the CPU wheel in DIR (default /opt/wheels), never from PyPI (a CUDA build).
    python3 tools/lockfile.py check
        exit 1, naming each problem, when the lock does not match pyproject.toml.
    python3 tools/lockfile.py installed
        in a venv: exit 1 when an installed package is not at its pinned version.

`check` uses the standard library, and `packaging` (or pip's copy of it) where it can be
imported to test versions and markers. It fails when the sha256 of pyproject.toml's
dependency tables (project.dependencies, project.optional-dependencies,
build-system.requires) differs from the one the lock records, when an extra is not covered,
when a requirement has no pin that satisfies it, when a pin has no hash, or when torch is not
the CPU build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = Path("requirements") / "lock.txt"
PROJECT = "softrank"
FIX = "run `make lock` and commit requirements/lock.txt"

#: The platform the lock is resolved for (uv's --python-version and --python-platform).
PYTHON_VERSION = "3.11"
PYTHON_PLATFORM = "x86_64-manylinux_2_28"
PLATFORM_TEXT = "CPython 3.11 on Linux x86_64 (manylinux_2_28, glibc >= 2.28)"
#: Environment markers are evaluated for that platform.
MARKER_ENV = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.0",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_system": "Linux",
    "platform_version": "",
    "python_full_version": "3.11.0",
    "python_version": "3.11",
    "sys_platform": "linux",
}
#: torch is the CPU wheel (local version +cpu) that lies on the machines' disk; PyPI's torch
#: is a CUDA build of several GB that pulls these in.
TORCH_LOCAL_VERSION = "cpu"
CUDA_PREFIXES = ("nvidia-", "cuda-", "triton")
DEFAULT_WHEELS = "/opt/wheels"
UV_SOURCES = ("UV_INDEX", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL",
              "UV_FIND_LINKS", "UV_INDEX_STRATEGY", "UV_PRERELEASE", "UV_CONSTRAINT",
              "UV_OVERRIDE")

_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_DIGEST = re.compile(r"^# pyproject-sha256: ([0-9a-f]{64})\s*$", re.M)
_EXTRAS = re.compile(r"^# extras: (.*)$", re.M)


def normalize(name: str) -> str:
    """PEP 503 name: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


# -- pyproject.toml ---------------------------------------------------------------------------

def dependency_tables(pyproject: dict) -> dict:
    """The tables the lock is made from, each list sorted (order does not matter)."""
    project = pyproject.get("project", {})
    return {
        "dependencies": sorted(s.strip() for s in project.get("dependencies", [])),
        "optional-dependencies": {
            extra: sorted(s.strip() for s in reqs)
            for extra, reqs in sorted(project.get("optional-dependencies", {}).items())
        },
        "build-system.requires": sorted(
            s.strip() for s in pyproject.get("build-system", {}).get("requires", [])
        ),
    }


def digest(pyproject: dict) -> str:
    """sha256 of :func:`dependency_tables` as canonical JSON: what the lock records."""
    text = json.dumps(dependency_tables(pyproject), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def read_pyproject(root: Path) -> dict:
    with open(root / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


# -- the lock ---------------------------------------------------------------------------------

class Lock:
    """A parsed lock: pins {normalized name: (name, version, [sha256...])}, its header fields."""

    def __init__(self, text: str):
        self.text = text
        m = _DIGEST.search(text)
        self.digest = m.group(1) if m else None
        m = _EXTRAS.search(text)
        self.extras = sorted(e.strip() for e in m.group(1).split(",") if e.strip()) if m else None
        self.pins: dict = {}
        self.bad_lines: list = []
        # join backslash continuations, drop comments
        logical, cur = [], ""
        for raw in text.splitlines():
            line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cur += line
            if cur.strip():
                logical.append(cur.strip())
            cur = ""
        if cur.strip():
            logical.append(cur.strip())
        for line in logical:
            if line.startswith("--find-links") or line.startswith("-f "):
                continue
            head = line.split()[0]
            m = _PIN.match(head)
            if not m:
                self.bad_lines.append(line)
                continue
            hashes = _HASH.findall(line)
            self.pins[normalize(m.group(1))] = (m.group(1), m.group(2), hashes)


def read_lock(root: Path) -> Lock | None:
    path = root / LOCK
    return Lock(path.read_text()) if path.exists() else None


# -- versions and markers ---------------------------------------------------------------------

def _packaging():
    """(Requirement, Version) from packaging, or from pip's vendored copy, or None."""
    try:
        from packaging.requirements import Requirement
        from packaging.version import Version
    except ImportError:
        try:
            from pip._vendor.packaging.requirements import Requirement
            from pip._vendor.packaging.version import Version
        except ImportError:
            return None
    return Requirement, Version


def _requirement_problem(spec: str, where: str, lock: Lock, tools) -> str | None:
    """None if a pin of the lock satisfies ``spec`` (on the lock's platform), else why not."""
    if tools is None:  # names only
        m = _NAME.match(spec.strip())
        name = normalize(m.group(1)) if m else spec
        if name == PROJECT or name in lock.pins:
            return None
        return f"{where}: '{spec}' has no pin in {LOCK}"
    Requirement, Version = tools
    req = Requirement(spec)
    name = normalize(req.name)
    if name == PROJECT:  # softrank[other-extra]: those extras are checked themselves
        return None
    if req.marker is not None and not req.marker.evaluate(dict(MARKER_ENV, extra="")):
        return None
    if name not in lock.pins:
        return f"{where}: '{spec}' has no pin in {LOCK}"
    _, version, _ = lock.pins[name]
    if req.url:
        return None
    if not req.specifier.contains(Version(version), prereleases=True):
        return f"{where}: '{spec}' is not satisfied by the pin {req.name}=={version}"
    return None


def problems(root: Path = ROOT) -> list:
    """Every way the lock disagrees with pyproject.toml (empty: they agree)."""
    pyproject = read_pyproject(root)
    lock = read_lock(root)
    if lock is None:
        return [f"{LOCK} is missing: {FIX}"]
    out = []
    want = digest(pyproject)
    if lock.digest is None:
        out.append(f"{LOCK} records no '# pyproject-sha256:' line")
    elif lock.digest != want:
        out.append(
            f"pyproject.toml's dependency tables changed since {LOCK} was made "
            f"(sha256 {want[:12]}..., the lock was made from {lock.digest[:12]}...)"
        )
    extras = sorted(pyproject.get("project", {}).get("optional-dependencies", {}))
    if lock.extras is None:
        out.append(f"{LOCK} records no '# extras:' line")
    elif lock.extras != extras:
        missing = sorted(set(extras) - set(lock.extras))
        gone = sorted(set(lock.extras) - set(extras))
        out.append(
            f"{LOCK} covers the extras {', '.join(lock.extras) or '(none)'}, pyproject.toml has "
            f"{', '.join(extras) or '(none)'}"
            + (f" (not locked: {', '.join(missing)})" if missing else "")
            + (f" (no longer in pyproject.toml: {', '.join(gone)})" if gone else "")
        )
    for line in lock.bad_lines:
        out.append(f"{LOCK}: not a pinned requirement (name==version): {line[:80]}")
    for name, (shown, version, hashes) in sorted(lock.pins.items()):
        if not hashes:
            out.append(f"{LOCK}: {shown}=={version} has no --hash")
    tables = dependency_tables(pyproject)
    tools = _packaging()
    sources = [("project.dependencies", s) for s in tables["dependencies"]]
    for extra, reqs in tables["optional-dependencies"].items():
        sources += [(f"project.optional-dependencies.{extra}", s) for s in reqs]
    sources += [("build-system.requires", s) for s in tables["build-system.requires"]]
    for where, spec in sources:
        problem = _requirement_problem(spec, where, lock, tools)
        if problem:
            out.append(problem)
    out += torch_problems(lock)
    if out:
        out.append(f"to fix: {FIX}")
    return out


def torch_problems(lock: Lock) -> list:
    """torch must be the CPU wheel, and nothing of CUDA may be pinned."""
    out = []
    torch = lock.pins.get("torch")
    if torch is not None and not torch[1].endswith("+" + TORCH_LOCAL_VERSION):
        out.append(
            f"{LOCK} pins torch=={torch[1]}, not the CPU wheel (+{TORCH_LOCAL_VERSION}) that lies "
            f"in {DEFAULT_WHEELS}: PyPI's torch is a CUDA build of several GB "
            "(make lock TORCH_WHEELS=DIR where the wheel is elsewhere)"
        )
    cuda = sorted(shown for name, (shown, _, _) in lock.pins.items()
                  if name.startswith(CUDA_PREFIXES))
    if cuda:
        out.append(f"{LOCK} pins CUDA packages ({', '.join(cuda)}): torch must be the CPU wheel")
    return out


def installed_problems(root: Path = ROOT) -> tuple:
    """(errors, notes): installed versions against the lock, in the running interpreter."""
    from importlib import metadata

    lock = read_lock(root)
    if lock is None:
        return [f"{LOCK} is missing"], []
    have = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            have[normalize(name)] = dist.version
    errors = []
    for name, (shown, version, _) in sorted(lock.pins.items()):
        if name not in have:
            errors.append(f"{shown}=={version} is pinned but not installed")
        elif have[name] != version:
            errors.append(f"{shown} is {have[name]}, the lock pins {version}")
    extra = sorted(set(have) - set(lock.pins) - {"pip", normalize(PROJECT)})
    notes = [f"installed but not in the lock (a venv made before the lock changed; "
             f"`make clean install` starts afresh): {', '.join(extra)}"] if extra else []
    return errors, notes


# -- writing the lock -------------------------------------------------------------------------

def header(pyproject: dict) -> str:
    extras = sorted(pyproject.get("project", {}).get("optional-dependencies", {}))
    return "\n".join([
        "# softrank's lock: every dependency of pyproject.toml with all its extras, and the build",
        "# requirements, pinned with sha256 hashes. Do not edit by hand: `make lock` writes it",
        "# (tools/lockfile.py, uv pip compile); `make lock-check` (and make install) checks it.",
        f"# Platform: {PLATFORM_TEXT}.",
        "# torch is the CPU wheel from the --find-links directory below (never PyPI's CUDA build).",
        "# Installed by `make install` (make test, make audit):",
        f"#   pip install --require-hashes -r {LOCK.as_posix()}",
        "#   pip install --no-deps --no-build-isolation -e .",
        f"# extras: {', '.join(extras)}",
        f"# pyproject-sha256: {digest(pyproject)}",
        "",
    ])


def compile_lock(root: Path, uv: str, find_links: str, uv_args: list) -> int:
    pyproject = read_pyproject(root)
    if not (Path(find_links) / ".").is_dir():
        print(f"lockfile: {find_links} is not a directory: torch must come from its CPU wheel "
              "(make lock TORCH_WHEELS=DIR)", file=sys.stderr)
        return 2
    lock_path = root / LOCK
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    build = dependency_tables(pyproject)["build-system.requires"]
    with tempfile.TemporaryDirectory(prefix="softrank-lock-") as tmp:
        build_in = Path(tmp) / "build-system.requires.in"
        build_in.write_text("".join(r + "\n" for r in build))
        out = Path(tmp) / "lock.txt"
        if lock_path.exists():  # uv keeps the pins of the output file where they still fit
            shutil.copyfile(lock_path, out)
        cmd = [
            uv, "pip", "compile", "--no-config", "--quiet",
            "pyproject.toml", str(build_in),
            "--all-extras",
            "--generate-hashes",
            "--prerelease", "disallow",
            "--python-version", PYTHON_VERSION,
            "--python-platform", PYTHON_PLATFORM,
            "--find-links", find_links, "--emit-find-links",
            "--no-header",
            "--output-file", str(out),
            *uv_args,
        ]
        print("lockfile:", shlex.join(cmd), file=sys.stderr)
        # PyPI and the wheel directory only, whatever the environment says
        env = {k: v for k, v in os.environ.items() if k not in UV_SOURCES}
        rc = subprocess.call(cmd, cwd=root, env=env)
        if rc != 0:
            print(f"lockfile: uv pip compile failed (exit {rc}); {LOCK} is unchanged",
                  file=sys.stderr)
            return rc
        body = out.read_text()
    body = body.replace(f"-r {build_in}", f"{PROJECT} (pyproject.toml::build-system.requires)")
    text = header(pyproject) + body
    new = Lock(text)
    bad = torch_problems(new) + [f"{shown}=={v} has no --hash"
                                 for shown, v, h in new.pins.values() if not h]
    if bad:
        print("lockfile: the new lock is refused, " + LOCK.as_posix() + " is unchanged:",
              *bad, sep="\n  ", file=sys.stderr)
        return 1
    lock_path.write_text(text)
    remaining = problems(root)
    if remaining:
        print(*remaining, sep="\n", file=sys.stderr)
        return 1
    print(f"lockfile: wrote {LOCK} ({len(new.pins)} pins) for {PLATFORM_TEXT}", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tools/lockfile.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compile", help="re-resolve requirements/lock.txt with uv")
    p.add_argument("--uv", default="uv", help="the uv executable")
    p.add_argument("--find-links", default=DEFAULT_WHEELS,
                   help="directory with the torch CPU wheel (default %(default)s)")
    sub.add_parser("check", help="exit 1 when the lock does not match pyproject.toml")
    sub.add_parser("installed", help="exit 1 when installed versions differ from the lock")
    args, rest = parser.parse_known_args(argv)
    if args.command == "compile":
        return compile_lock(ROOT, args.uv, args.find_links, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "check":
        found = problems(ROOT)
        if found:
            print(f"{LOCK} does not match pyproject.toml:", *found, sep="\n  ", file=sys.stderr)
            return 1
        print(f"{LOCK} matches pyproject.toml")
        return 0
    errors, notes = installed_problems(ROOT)
    for note in notes:
        print("note:", note, file=sys.stderr)
    if errors:
        print(f"the installed packages differ from {LOCK}:", *errors, sep="\n  ",
              file=sys.stderr)
        return 1
    print(f"installed packages match {LOCK}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
