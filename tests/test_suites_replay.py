"""python -m softrank.suites.replay: a saved failure is run again against its certifier."""


import pytest

from softrank.errors import InvalidArgumentError
from softrank.generators.synthetic import planted
from softrank.suites.failures import FailureStore
from softrank.suites.replay import main, replay

RAISES = '''
class Raises:
    name = "raises"
    def witness(self, operator, eps):
        raise ZeroDivisionError("boom")
'''


@pytest.fixture
def saved(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "replaymod.py").write_text(RAISES)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    op = planted(8, 8, 2, 0.01, seed=3)
    store = FailureStore(tmp_path / "f")

    def save(spec, test="construction_stress"):
        return store.save("x", test, op, 0.1, "reason", tag="raised", spec=spec)
    return save


def test_replay_reproduces_a_crash(saved, capsys):
    d = saved("replaymod:Raises")
    reproduced, msg = replay(d)
    assert reproduced and "ZeroDivisionError: boom" in msg
    assert main([str(d)]) == 1 and "REPRODUCED" in capsys.readouterr().out


def test_replay_of_a_sound_certifier_does_not_reproduce(saved, capsys):
    d = saved("builtin:truncated-svd")
    assert replay(d) == (False, "does not reproduce: the certifier now passes this case")
    assert main([str(d)]) == 0


def test_replay_writes_nothing_over_the_saved_case(saved):
    d = saved("replaymod:Raises")
    before = sorted(p.name for p in d.iterdir())
    replay(d)
    assert sorted(p.name for p in d.iterdir()) == before


def test_replay_refuses_what_it_cannot_replay(saved, tmp_path, capsys):
    with pytest.raises(InvalidArgumentError, match="directory"):
        replay(tmp_path / "nothing-here")
    d = saved("builtin:truncated-svd", test="lower_le_upper")
    with pytest.raises(InvalidArgumentError, match="lower_le_upper"):
        replay(d)
    assert main([str(d)]) == 2
    assert "replay: error" in capsys.readouterr().err
