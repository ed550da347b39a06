"""The command line, run as a learner or a teacher would: `python -m exercises …` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import exercises
from exercises.cli.selftest import as_text

REPO_ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exercises", *args], cwd=REPO_ROOT, input=stdin,
                          capture_output=True, text=True, timeout=60)


def assert_clean_failure(result: subprocess.CompletedProcess, *words: str) -> None:
    """A non-zero exit, a message that says what went wrong, and no traceback."""
    assert result.returncode != 0
    said = result.stderr + result.stdout
    assert "Traceback" not in said
    assert said.strip()
    for word in words:
        assert word in said, (word, said)


@pytest.fixture(scope="module")
def softmax_file(tmp_path_factory) -> Path:
    """`python -m exercises generate softmax --seed 1 --level 2 --json > ex.json`"""
    result = cli("generate", "softmax", "--seed", "1", "--level", "2", "--json")
    assert result.returncode == 0, result.stderr
    path = tmp_path_factory.mktemp("cli") / "ex.json"
    path.write_text(result.stdout, encoding="utf-8")
    return path


def test_list_shows_every_kind_with_its_levels():
    result = cli("list")
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    for kind_id, kind in exercises.KINDS.items():
        line = next(line for line in lines if line.split()[0] == kind_id)
        assert ",".join(map(str, kind.LEVELS)) in line
    assert "Row-wise softmax" in result.stdout


def test_generate_as_text_shows_the_problem():
    result = cli("generate", "softmax", "--seed", "1", "--level", "2")
    assert result.returncode == 0
    ex = exercises.generate("softmax", seed=1, level=2)
    assert "seed 1" in result.stdout and "level 2" in result.stdout
    assert "-inf" in result.stdout  # the causal variant shows its masked cells
    assert "find A: 3×3" in result.stdout
    for name in ex.matrices():
        assert f"{name} =" in result.stdout


def test_generate_json_is_the_exercise(softmax_file):
    d = json.loads(softmax_file.read_text(encoding="utf-8"))
    ex = exercises.Exercise.from_dict(d)
    assert ex == exercises.generate("softmax", seed=1, level=2)
    assert d["kind"] == "softmax" and d["seed"] == 1 and d["level"] == 2


def test_grading_the_reference_scores_one(softmax_file):
    ex = exercises.Exercise.from_dict(json.loads(softmax_file.read_text(encoding="utf-8")))
    result = cli("grade", str(softmax_file), as_text(ex.part("A").reference))
    assert result.returncode == 0, result.stderr
    assert "score 1.000" in result.stdout


def test_grading_a_column_softmax_is_not_full_marks(softmax_file):
    d = json.loads(softmax_file.read_text(encoding="utf-8"))
    z = np.array([[float(x) for x in row] for row in d["given"]["masked"]])  # (3, 3), "-inf" included
    e = np.exp(z - z.max(axis=0, keepdims=True))  # (3, 3)
    columns = e / e.sum(axis=0, keepdims=True)  # softmax down each column: the classic mistake
    result = cli("grade", str(softmax_file), as_text(np.round(columns, 3)), "--json")
    assert result.returncode == 0, result.stderr
    fb = json.loads(result.stdout)
    assert fb["score"] < 1.0 and fb["correct"] is False
    assert fb["misconception"] == "softmax_columns"
    assert "wrong" in {c for row in fb["parts"]["A"]["cells"] for c in row}


def test_grading_from_standard_input_with_a_json_answer(softmax_file):
    ex = exercises.Exercise.from_dict(json.loads(softmax_file.read_text(encoding="utf-8")))
    answer = json.dumps({"A": as_text(ex.part("A").reference)})
    result = cli("grade", "-", answer, "--json", stdin=softmax_file.read_text(encoding="utf-8"))
    assert result.returncode == 0, result.stderr
    fb = json.loads(result.stdout)
    assert fb["score"] == 1.0 and fb["correct"] is True and fb["graded"] is True
    assert fb["parts"]["A"]["cells"] == [["right"] * 3] * 3


@pytest.mark.parametrize("args, words", [
    (("generate", "nope"), ["unknown kind 'nope'", "softmax"]),
    (("generate", "softmax", "--level", "9"), ["level must be one of"]),
    (("generate", "softmax", "--seed", "-1"), ["seed must be between"]),
    (("generate", "softmax", "--seed", "abc"), ["whole numbers"]),
])
def test_bad_generate_arguments(args, words):
    assert_clean_failure(cli(*args), *words)


def test_missing_file(tmp_path):
    assert_clean_failure(cli("grade", str(tmp_path / "nowhere.json"), "1"), "cannot read", "nowhere.json")


def test_non_json_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("this is not an exercise", encoding="utf-8")
    assert_clean_failure(cli("grade", str(path), "1"), "is not JSON", "generate")


def test_binary_file(tmp_path):
    path = tmp_path / "image.json"
    path.write_bytes(b"\xff\xfe\x00\x89PNG")
    assert_clean_failure(cli("grade", str(path), "1"), "not a text file")


@pytest.mark.parametrize("content", ['{"kind": "softmax"}'])
def test_json_that_is_not_an_exercise(tmp_path, content):
    path = tmp_path / "other.json"
    path.write_text(content, encoding="utf-8")
    assert_clean_failure(cli("grade", str(path), "1"), "is not an exercise")


@pytest.mark.parametrize("answer, words", [
    ("1 0 0; 0.1 0.9 0; 1/3 1/3 x", ["Row 3, column 3", "'x'"]),
    ("1 2 3; 4 5 6", ["3×3", "2×3"]),
    ("__import__('os').system('echo hi')", ["not allowed"]),
])
def test_malformed_answer(softmax_file, answer, words):
    result = cli("grade", str(softmax_file), answer)
    assert_clean_failure(result, *words)
    assert "score" not in result.stdout  # no score for an unreadable answer


def test_broken_json_answer(softmax_file):
    assert_clean_failure(cli("grade", str(softmax_file), '{"A": '), "looks like JSON")


def test_malformed_answer_as_json_reports_cell_errors(softmax_file):
    result = cli("grade", str(softmax_file), "1 0 0; 0.1 0.9 0; 1/3 1/3 x", "--json")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    fb = json.loads(result.stdout)
    assert fb["score"] is None and fb["graded"] is False
    assert fb["parts"]["A"]["cell_errors"][0]["row"] == 3 and fb["parts"]["A"]["cell_errors"][0]["col"] == 3


def test_grade_rejects_a_hand_edited_exercise_with_a_non_numeric_given(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "softmax", "seed": 1, "level": 2, "version": 1, '
                   '"given": {"scaled": "abc", "causal": false}, '
                   '"parts": [{"name": "A", "shape": [1, 1], "decimals": 2, "reference": [[1.0]]}]}')
    proc = subprocess.run([sys.executable, "-m", "exercises", "grade", str(bad), "1"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 2
    assert "scaled" in proc.stderr and "Traceback" not in proc.stderr
