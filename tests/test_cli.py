"""The command line, run as a learner or a teacher would: its main() with arguments, standard input and output
of its own (exercises.cli.main), and `python -m exercises` in a subprocess where the process is what is tested
(the exit code the shell sees, a closed pipe, the installed command)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import exercises
from exercises.cli.main import main
from exercises.cli.selftest import as_text

REPO_ROOT = Path(__file__).resolve().parent.parent


def cli_process(*args: str) -> subprocess.CompletedProcess:
    """`python -m exercises …` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "exercises", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The command line's main(args) in this process, with a standard input, output and error of its own; a usage
    error argparse reports exits (SystemExit) with its code, as the process would."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        if stdin is not None:
            stack.enter_context(pytest.MonkeyPatch.context()).setattr(
                sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(["exercises", *args], code, out.getvalue(), err.getvalue())


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
    """`python -m exercises generate softmax --seed 1 --level 2 --json --key > ex.json` (with the answers)"""
    result = cli("generate", "softmax", "--seed", "1", "--level", "2", "--json", "--key")
    assert result.returncode == 0, result.stderr
    path = tmp_path_factory.mktemp("cli") / "ex.json"
    path.write_text(result.stdout, encoding="utf-8")
    return path


def test_list_shows_every_kind_with_its_levels():
    result = cli_process("list")
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
    result = cli_process("grade", str(softmax_file), as_text(np.round(columns, 3)), "--json")
    assert result.returncode == 1, result.stderr  # a wrong answer exits 1 (the process's code), not 0 like a right one
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
    ("1 0 0; 0.1 0.9 0; 1/3 1/3 x", ["row 3, column 3", "'x'"]),
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
    proc = cli("grade", str(bad), "1")
    assert proc.returncode == 2
    assert "scaled" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- a CLI that scripts


def test_a_student_file_carries_no_answers_and_grades_from_the_rebuilt_exercise(tmp_path):
    result = cli("generate", "softmax", "--seed", "1", "--level", "2", "--json")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert all("reference" not in part for part in d["parts"])
    ex = exercises.generate("softmax", seed=1, level=2)
    assert not any(f"{x:.6f}" in result.stdout for x in ex.part("A").reference.ravel() if 0 < x < 1)
    path = tmp_path / "student.json"
    path.write_text(result.stdout, encoding="utf-8")
    right = cli("grade", str(path), as_text(ex.part("A").reference))
    assert right.returncode == 0 and "score 1.000" in right.stdout


def _edited(softmax_file, tmp_path, change) -> Path:
    d = json.loads(softmax_file.read_text(encoding="utf-8"))
    change(d)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    return path


def test_grade_refuses_a_file_whose_answers_were_edited(softmax_file, tmp_path):
    """The issue's case: references edited to all 9s, answering 9s scored 100%."""
    def nines(d):
        d["parts"][0]["reference"] = [[9] * 3] * 3
    result = cli("grade", str(_edited(softmax_file, tmp_path, nines)), "9 9 9; 9 9 9; 9 9 9", "--json")
    assert_clean_failure(result, "does not match", "answers were changed")
    assert result.returncode == 2 and "score" not in result.stdout


def test_grade_refuses_a_file_whose_given_values_or_version_were_edited(softmax_file, tmp_path):
    def given(d):
        d["given"]["masked"][0][0] = 5
    result = cli("grade", str(_edited(softmax_file, tmp_path, given)), "1")
    assert_clean_failure(result, "given values or parts were changed")
    assert result.returncode == 2

    def version(d):
        d["version"] = 99
    result = cli("grade", str(_edited(softmax_file, tmp_path, version)), "1")
    assert_clean_failure(result, "version 99")
    assert result.returncode == 2


def test_exit_codes_tell_right_wrong_malformed_and_usage_apart(softmax_file):
    ex = exercises.Exercise.from_dict(json.loads(softmax_file.read_text(encoding="utf-8")))
    assert cli("grade", str(softmax_file), as_text(ex.part("A").reference)).returncode == 0
    assert cli("grade", str(softmax_file), "0 0 0; 0 0 0; 0 0 0").returncode == 1
    assert cli("grade", str(softmax_file), "1 2; 3 4").returncode == 3
    assert cli("grade", str(softmax_file), "1 0 0; 0 1 0; 0 0 x").returncode == 3
    assert cli("generate", "nope").returncode == 2
    assert cli("grade").returncode == 2


# ---------------------------------------------------------------- hostile exercise files


def _student_file(**changes) -> str:
    from exercises.cli.main import student_dict

    d = student_dict(exercises.generate("softmax", 1, 1))
    d.update(changes)
    return json.dumps(d)


HOSTILE_FILES = {
    "empty": "", "blank": "  \n", "null": "null", "number": "3", "string": '"x"', "list": "[1, 2]", "nan": "NaN",
    "truncated": '{"kind": "softmax", ', "bad-utf8": b"\xff\xfe{}\x89PNG",
    "deep-list": "[" * 100_000 + "]" * 100_000, "deep-object": '{"a":' * 20_000 + "1" + "}" * 20_000,
    "many-numbers": "[" + "1," * 100_000 + "1]", "over-the-size": '{"kind": "' + "a" * 400_000 + '"}',
    "huge-integer": _student_file().replace('"seed": 1', '"seed": ' + "9" * 5000),
    "kind-list": _student_file(kind=["softmax"]), "kind-object": _student_file(kind={}),
    "kind-number": _student_file(kind=3), "level-text": _student_file(level="2"), "level-nan": _student_file(level=float("nan")),
    "level-true": _student_file(level=True), "seed-float": _student_file(seed=1.5), "seed-inf": _student_file(seed=float("inf")),
    "seed-list": _student_file(seed=[1]), "version-text": _student_file(version="1"),
    "given-list": _student_file(given=[1, 2]), "given-text": _student_file(given="x"),
    "given-nested": _student_file(given={"masked": [[[[["1"]]]]]}), "given-nan": _student_file(given={"masked": float("nan")}),
    "params-text": _student_file(params="x"), "params-list": _student_file(params=[1]),
    "parts-text": _student_file(parts="x"), "parts-object": _student_file(parts={}), "parts-of-text": _student_file(parts=["x"]),
    "parts-of-numbers": _student_file(parts=[1]), "part-empty": _student_file(parts=[{}]),
    "part-shape-text": _student_file(parts=[{"name": "A", "shape": "x", "decimals": 2}]),
    "part-decimals-object": _student_file(parts=[{"name": "A", "shape": [3, 3], "decimals": {}}]),
}


@pytest.mark.parametrize("name", HOSTILE_FILES)
def test_a_hostile_exercise_file_is_bad_input_in_one_line(name, tmp_path, capsys):
    """Exit 2 and one line on stderr for every such file: never a traceback, never 1 ("graded, wrong")."""
    from exercises.cli.main import EXIT_USAGE

    content = HOSTILE_FILES[name]
    path = tmp_path / f"{name}.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    code = main(["grade", str(path), "1 0 0; 0 1 0; 0 0 1"])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, (name, code, out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, (name, err)
    assert "score" not in out


def test_a_deep_json_answer_is_bad_input(softmax_file, capsys):
    from exercises.cli.main import EXIT_USAGE

    assert main(["grade", str(softmax_file), '{"A": ' * 5000 + '"1"' + "}" * 5000]) == EXIT_USAGE
    assert capsys.readouterr().err.count("\n") == 1


def test_a_forty_million_number_file_is_refused_at_once(tmp_path):
    """Bounded before parsing: read up to MAX_FILE_BYTES, no more (it ran past 60 s and 2 GB)."""
    import time

    path = tmp_path / "numbers.json"
    with path.open("wb") as file:
        file.write(b"[")
        for _ in range(40):
            file.write(b"1," * 1_000_000)
        file.write(b"1]")
    started = time.monotonic()
    result = cli("grade", str(path), "1")
    assert time.monotonic() - started < 20
    assert_clean_failure(result, "over 256 kB")
    assert result.returncode == 2


def test_a_file_with_a_byte_order_mark_is_read(softmax_file, tmp_path, capsys):
    from exercises.cli.main import EXIT_RIGHT

    ex = exercises.Exercise.from_dict(json.loads(softmax_file.read_text(encoding="utf-8")))
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + softmax_file.read_bytes())
    assert main(["grade", str(path), as_text(ex.part("A").reference)]) == EXIT_RIGHT


@pytest.mark.parametrize("args", [("generate", "softmax", "--lang", "fr"), ("generate", "softmax", "--lang", "zh-CN"),
                                  ("worksheet", "--kinds", "softmax", "--out", "x", "--lang", "zh-CN")])
def test_an_unknown_language_is_bad_usage(args):
    result = cli(*args)
    assert_clean_failure(result, "unknown language", "en, zh")
    assert result.returncode == 2


def test_generate_concepts_shows_the_questions_and_lettered_options():
    result = cli("generate", "concepts", "--level", "1")
    assert result.returncode == 0
    ex = exercises.generate("concepts", seed=0, level=1)
    from exercises.i18n import t

    for part in ex.parts:
        assert t(part.prompt, "en", **part.params) in result.stdout
    assert "  A. " in result.stdout and "  D. " in result.stdout and "  0. " not in result.stdout
    key = cli("generate", "concepts", "--level", "1", "--key").stdout
    choice = next(p for p in ex.parts if p.is_choice)
    assert f"{choice.name} = {chr(ord('A') + int(choice.reference[0, 0]))}" in key


def test_a_closed_pipe_ends_quietly():
    code = ("import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
            "from exercises.cli.main import main; sys.exit(main(['list']))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
    assert result.returncode == 141


def test_the_installed_command_runs_outside_the_project(tmp_path):
    """`pip install .` gives an `attention-by-hand` command that works from any folder."""
    import shutil

    source = tmp_path / "source"  # a copy: building leaves build/ and *.egg-info beside pyproject.toml
    for name in ("attention_core", "exercises"):
        shutil.copytree(REPO_ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(source)], check=True, capture_output=True, timeout=300)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    *map(str, wheels.glob("*.whl"))], check=True, capture_output=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**__import__("os").environ, "PYTHONPATH": str(target)}
    result = subprocess.run([str(target / "bin" / "attention-by-hand"), "generate", "softmax", "--lang", "zh"],
                            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "find A" in result.stdout and "行" in result.stdout  # the Chinese catalog came along


CHECK_STEPS = {"topic": "attention", "given": {"X": "1 0; 0 1; 1 1", "W_Q": "1 0; 0 1", "W_K": "1 0; 0 1",
                                               "W_V": [[1, 0], [0, 1]], "causal": True},
               "steps": {"scores": "1 0 1; 0 1 1; 1 1 2", "A": r"\begin{bmatrix}1 & 0 & 0 \\ 0.330 & 0.670 & 0 \\ "
                                                           r"0.248 & 0.248 & 0.503\end{bmatrix}"}}


@pytest.mark.parametrize("steps, code, said", [
    (CHECK_STEPS, 0, "right"),
    ({**CHECK_STEPS, "steps": {**CHECK_STEPS["steps"], "scores": "1 0 1; 1 1 1; 1 1 2"}}, 1, "scores"),
    ({**CHECK_STEPS, "topic": "nonsense"}, 2, "not a topic"),
    ({**CHECK_STEPS, "given": {**CHECK_STEPS["given"], "W_K": "1 0; 0 \\x"}}, 2, "W_K"),
    ({**CHECK_STEPS, "steps": {"A": "1 2"}}, 2, "A should be 3×3"),
    ({**CHECK_STEPS, "answers": {}}, 2, "unknown field"),
    ("[1, 2]", 2, "JSON object"),
])
def test_check_exits_0_all_right_1_a_wrong_step_2_bad_input(steps, code, said, tmp_path, capsys):
    """python -m exercises check FILE.json: Check my work from a file of the learner's own steps."""
    path = tmp_path / "steps.json"
    path.write_text(steps if isinstance(steps, str) else json.dumps(steps), encoding="utf-8")
    assert main(["check", str(path)]) == code, said
    out, err = capsys.readouterr()
    assert said in out + err, (said, out, err)
    assert "Traceback" not in err and (code < 2 or err.count("\n") == 1 or "A should be" in out), err
    if code < 2:
        assert main(["check", str(path), "--json", "--lang", "zh"]) == code
        report = json.loads(capsys.readouterr().out)
        assert report["all_right"] == (code == 0) and (code == 0 or report["first_error"] == "scores")
