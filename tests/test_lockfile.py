"""requirements/lock.txt agrees with pyproject.toml (tools/lockfile.py; `make lock` refreshes it).

The first test is the gate: CI (`make test`) fails, naming `make lock`, when pyproject.toml's
dependency tables changed without the lock. The others check that the checker notices each
kind of disagreement, on copies in a temporary directory.
"""

import importlib.util
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load():
    path = ROOT / "tools" / "lockfile.py"
    spec = importlib.util.spec_from_file_location("softrank_lockfile", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lockfile = _load()


def test_lock_matches_pyproject():
    found = lockfile.problems(ROOT)
    assert not found, "requirements/lock.txt does not match pyproject.toml:\n" + "\n".join(found)


def test_lock_pins_torch_cpu_with_hash():
    lock = lockfile.read_lock(ROOT)
    _, version, hashes = lock.pins["torch"]
    assert version.endswith("+cpu") and len(hashes) == 1
    assert not any(n.startswith(("nvidia-", "triton")) for n in lock.pins)


PYPROJECT = """\
[build-system]
requires = ["setuptools>=68", "wheel"]

[project]
name = "softrank"
dependencies = ["numpy>=1.26", "tomli; python_version < '3.11'"]

[project.optional-dependencies]
models = ["torch==2.13.0", "softrank[dev]"]
dev = ["pytest>=8"]
"""

PINS = {
    "numpy": "2.4.6",
    "torch": "2.13.0+cpu",
    "pytest": "9.2.0",
    "setuptools": "84.2.1",
    "wheel": "0.48.0",
}


def _write(tmp_path, pyproject=PYPROJECT, pins=PINS, made_from=PYPROJECT, hashes=True):
    (tmp_path / "pyproject.toml").write_text(pyproject)
    text = lockfile.header(tomllib.loads(made_from)) + "--find-links /opt/wheels\n\n"
    for name, version in pins.items():
        text += f"{name}=={version}"
        text += f" \\\n    --hash=sha256:{'0' * 64}\n" if hashes else "\n"
        text += "    # via softrank (pyproject.toml)\n"
    (tmp_path / "requirements").mkdir(exist_ok=True)
    (tmp_path / "requirements" / "lock.txt").write_text(text)
    return tmp_path


def test_checker_accepts_a_matching_lock(tmp_path):
    assert lockfile.problems(_write(tmp_path)) == []


def test_checker_names_make_lock_when_an_extra_is_added(tmp_path):
    newer = PYPROJECT + 'docs = ["sphinx>=7"]\n'
    found = lockfile.problems(_write(tmp_path, pyproject=newer))
    text = "\n".join(found)
    assert "dependency tables changed" in text
    assert "not locked: docs" in text
    assert "'sphinx>=7' has no pin" in text
    assert found[-1] == "to fix: run `make lock` and commit requirements/lock.txt"


def test_checker_finds_an_unsatisfied_pin(tmp_path):
    newer = PYPROJECT.replace("numpy>=1.26", "numpy>=3")
    found = lockfile.problems(_write(tmp_path, pyproject=newer))
    assert any("'numpy>=3' is not satisfied by the pin numpy==2.4.6" in p for p in found)


def test_checker_ignores_order_but_not_content(tmp_path):
    reordered = PYPROJECT.replace('["setuptools>=68", "wheel"]', '["wheel", "setuptools>=68"]')
    assert lockfile.problems(_write(tmp_path, pyproject=reordered)) == []


def test_checker_refuses_missing_hashes_and_cuda_torch(tmp_path):
    pins = dict(PINS, torch="2.13.0", **{"nvidia-cublas": "13.1.0"})
    found = "\n".join(lockfile.problems(_write(tmp_path, pins=pins, hashes=False)))
    assert "numpy==2.4.6 has no --hash" in found
    assert "not the CPU wheel" in found
    assert "pins CUDA packages (nvidia-cublas)" in found


def test_checker_reports_a_missing_lock(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert lockfile.problems(tmp_path) == [
        "requirements/lock.txt is missing: run `make lock` and commit requirements/lock.txt"
    ]
