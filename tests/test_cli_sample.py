"""``gramopt sample GRAMMAR --faithful ...`` (issue 17)."""

import pytest

pytest.importorskip("torch")

from gramopt.cli import main  # noqa: E402


@pytest.fixture
def finite(tmp_path):
    p = tmp_path / "g.ebnf"
    p.write_text('root ::= "ab" | "ba" | "a" ("c" | "d")\n')
    return str(p)


@pytest.mark.parametrize("faithful", ["none", "onestep", "mc", "exact"])
def test_samples_are_in_the_language(finite, faithful, capsys):
    assert main(["sample", finite, "--faithful", faithful, "-n", "4", "--max-tokens", "4", "--mc-k", "2",
                 "--json"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 4
    assert set(lines) <= {'"ab"', '"ba"', '"ac"', '"ad"'}
    assert f"--faithful {faithful}" in err


def test_help_says_what_faithful_changes(capsys):
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    out = capsys.readouterr().out
    assert "locally projected" in out and "given the grammar" in out


def test_exact_beyond_its_node_budget_is_a_one_line_error(finite, capsys):
    assert main(["sample", finite, "--faithful", "exact", "--max-nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{finite}: error: --faithful exact: more than 2 viable prefixes" in err


def test_bad_numbers_exit_2(finite, capsys):
    assert main(["sample", finite, "-n", "0"]) == 2
    assert "--num must be at least 1" in capsys.readouterr().err


def test_precompute_warms_the_cache_without_changing_the_samples(finite, capsys):
    """Precomputing states changes when Φ̂ is computed, never its value: same seed, same strings."""
    argv = ["sample", finite, "--faithful", "onestep", "-n", "6", "--max-tokens", "4", "--json"]
    assert main(argv) == 0
    plain = capsys.readouterr()
    assert main(argv + ["--precompute", "1000"]) == 0
    warm = capsys.readouterr()
    assert warm.out == plain.out
    states = int(warm.err.split(" states precomputed")[0].rsplit("(", 1)[1])
    assert states >= 4  # the empty text, "a", "b" and the finished strings at least


@pytest.mark.parametrize("faithful", ["none", "onestep", "exact"])
def test_the_matrix_backend_samples_the_same_language(finite, faithful, capsys):
    assert main(["sample", finite, "--faithful", faithful, "-n", "4", "--max-tokens", "4", "--json",
                 "--backend", "valiant"]) == 0
    out, err = capsys.readouterr()
    assert set(out.splitlines()) <= {'"ab"', '"ba"', '"ac"', '"ad"'} and "valiant matcher" in err


@pytest.mark.parametrize("argv, message", [(["--precompute", "-1"], "--precompute must be at least 0"),
                                           (["--precompute", "5"], "--precompute applies to --faithful onestep")])
def test_bad_precompute_exits_2(finite, capsys, argv, message):
    assert main(["sample", finite, *argv]) == 2
    assert message in capsys.readouterr().err
