"""The Exercise model and the generator: deterministic, frozen, read-only, JSON round-tripping."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import exercises
from exercises import Exercise, Part
from exercises.core import numbers
from tests import generated

REPO_ROOT = Path(__file__).resolve().parent.parent

KIND_LEVELS = [(kind_id, level) for kind_id, kind in exercises.KINDS.items() for level in kind.LEVELS]
FOUNDATION_KINDS = ("projection", "scores", "scaling", "masking", "softmax", "weighted_sum")
STANDARD_NAMES = {"X", "W_Q", "W_K", "W_V", "Q", "K", "V", "scores", "scaled", "masked", "A", "O", "G_O", "G_A",
                  "G_V", "G_scaled", "G_scores", "G_Q", "G_K", "G_W_Q", "G_W_K", "G_W_V", "G_X", "d_k", "causal",
                  "token_ids", "E", "G_E"}


def round_trip(ex: Exercise) -> Exercise:
    return Exercise.from_dict(json.loads(json.dumps(ex.to_dict())))


# ---------------------------------------------------------------- determinism


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_same_triple_gives_the_same_exercise(kind_id, level):
    for seed in range(3):
        a = exercises.generate(kind_id, seed=seed, level=level)
        b = exercises.generate(kind_id, seed=seed, level=level)
        assert a == b and a is not b
        assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_different_seeds_give_different_exercises(kind_id, level):
    dumps = {json.dumps({**generated.exercise(kind_id, seed, level).to_dict(), "seed": None})
             for seed in range(8)}
    assert len(dumps) >= 4


def test_generation_is_the_same_in_a_fresh_process():
    """Every kind and level, seeds inside and far outside the pinned ones, in a process of another hash seed;
    and generated twice here, equal."""
    triples = [(k, s, lv) for k, lv in KIND_LEVELS for s in (0, 1, 7, 29, 123456789)]
    script = (
        "import json, sys\n"
        "import exercises\n"
        "triples = json.loads(sys.argv[1])\n"
        "print(json.dumps([exercises.generate(k, seed=s, level=l).to_dict() for k, s, l in triples]))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # a different hash seed must not matter
    out = subprocess.run([sys.executable, "-c", script, json.dumps(triples)], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    theirs = json.loads(out.stdout)
    ours = [exercises.generate(k, seed=s, level=lv) for k, s, lv in triples]
    assert theirs == [json.loads(json.dumps(ex.to_dict())) for ex in ours]
    again = [exercises.generate(k, seed=s, level=lv) for k, s, lv in triples]
    assert [f"{k} L{lv} s{s}" for (k, s, lv), a, b in zip(triples, ours, again, strict=True) if a != b] == []


def test_rng_depends_on_kind_seed_and_level():
    draws = {tuple(exercises.rng_for(k, s, lv).integers(1 << 30, size=4))
             for k in ("softmax", "scores") for s in (0, 1) for lv in (1, 2)}
    assert len(draws) == 8


# ---------------------------------------------------------------- JSON


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_json_round_trip(kind_id, level):
    for seed in range(5):
        ex = generated.exercise(kind_id, seed, level)
        back = round_trip(ex)
        assert back == ex
        assert back.part_names == ex.part_names
        for name, value in ex.given.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(np.asarray(back.given[name], dtype=float), value)
            else:
                assert back.given[name] == value
        for p, q in zip(ex.parts, back.parts):
            assert (p.name, p.shape, p.decimals) == (q.name, q.shape, q.decimals)
            np.testing.assert_array_equal(p.reference, q.reference)
        # strict JSON: no NaN or Infinity tokens anywhere
        json.dumps(ex.to_dict(), allow_nan=False)


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_to_dict_has_the_documented_fields(kind_id, level):
    d = exercises.generate(kind_id, seed=3, level=level).to_dict()
    assert {"kind", "seed", "level", "version", "given", "parts"} <= d.keys()
    for part in d["parts"]:
        assert {"name", "shape", "decimals", "reference"} <= part.keys()
        assert isinstance(part["reference"], list) and len(part["reference"]) == part["shape"][0]


def test_minus_infinity_is_written_as_a_string():
    ex = exercises.generate("masking", seed=0, level=1)
    d = ex.to_dict()
    masked = d["parts"][0]["reference"]
    assert masked[0][1] == "-inf" and masked[0][2] == "-inf"
    text = json.dumps(d, allow_nan=False)
    assert '"-inf"' in text and "Infinity" not in text
    assert math.isinf(round_trip(ex).part("masked").reference[0, 1])


def test_a_causal_softmax_exercise_gives_minus_infinity_as_a_string():
    for seed in range(40):
        ex = exercises.generate("softmax", seed=seed, level=2)
        if "masked" in ex.given:
            assert "-inf" in ex.to_dict()["given"]["masked"][0]
            assert np.isneginf(round_trip(ex).given["masked"][0, -1])
            return
    pytest.fail("no causal softmax exercise in 40 seeds")


# ---------------------------------------------------------------- frozen and read-only


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_given_arrays_and_references_are_read_only(kind_id, level):
    ex = exercises.generate(kind_id, seed=2, level=level)
    for candidate in (ex, round_trip(ex)):
        arrays = [v for v in candidate.given.values() if isinstance(v, np.ndarray)]
        arrays += [p.reference for p in candidate.parts]
        assert arrays
        for a in arrays:
            assert not a.flags.writeable
            with pytest.raises(ValueError):
                a.flat[0] = 99
    with pytest.raises(dataclasses.FrozenInstanceError):
        ex.seed = 3


def test_freezing_copies_the_callers_array():
    M = np.ones((2, 2))  # (2, 2)
    ex = Exercise(kind="test", seed=0, level=1, version=1, given={"A": M}, parts=(Part("O", (1, 1), [[1]]),))
    M[0, 0] = 5
    assert ex.given["A"][0, 0] == 1 and M.flags.writeable


@pytest.mark.parametrize("kind_id", FOUNDATION_KINDS)
def test_foundation_kinds_use_the_standard_names(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        ex = exercises.generate(kind_id, seed=1, level=level)
        assert set(ex.given) <= STANDARD_NAMES and set(ex.part_names) <= STANDARD_NAMES


def test_part_rejects_a_reference_of_the_wrong_shape():
    with pytest.raises(ValueError, match="shape"):
        Part("A", (2, 2), np.zeros((2, 3)))


def test_part_decimals_and_tolerance():
    assert Part("A", (1, 1), [[0.5]]).tolerance == pytest.approx(0.0051)
    assert Part("S", (1, 1), [[3]], decimals=0).tolerance < 1e-6


def test_exercise_helpers():
    ex = exercises.generate("masking", seed=4, level=2)
    assert ex.id == "masking-L2-s4"
    assert ex.part("A").name == "A" and ex.part_names == ["masked", "A"]
    with pytest.raises(KeyError):
        ex.part("nope")
    assert list(ex.matrices()) == ["scaled"]
    assert hash(ex) == hash(exercises.generate("masking", seed=4, level=2))


# ---------------------------------------------------------------- validation of the triple


@pytest.mark.parametrize("kind_id, seed, level, words", [
    ("nope", 1, 1, "unknown kind"),
    ("softmax", 1, 9, "level must be one of"),
    ("softmax", -1, 1, "seed must be between"),
    ("softmax", 2**53, 1, "seed must be between"),
    ("softmax", "abc", 1, "whole numbers"),
    ("softmax", 1, "x", "whole numbers"),
])
def test_bad_triples_are_value_errors(kind_id, seed, level, words):
    with pytest.raises(ValueError, match=words):
        exercises.generate(kind_id, seed=seed, level=level)


def test_seed_and_level_given_as_text_are_read_as_numbers():
    assert exercises.generate("softmax", seed="5", level="2") == exercises.generate("softmax", seed=5, level=2)


RNG_SEED = 14


def test_decimals_for_is_the_numpy_test():
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(2000):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 5))) if rng.random() < 0.9 else (9, 9)
        ref = rng.integers(-5, 6, size=shape).astype(float)
        ref = ref + rng.choice([0.0, 0.0, 1e-13, 1e-6, 0.5, 0.25, -1e-11], size=shape)
        if rng.random() < 0.3:
            ref[0, 0] = rng.choice([-np.inf, np.inf, np.nan, 2.5e6 + 1.0, 1e300])
        finite = ref[np.isfinite(ref)]
        whole = np.round(finite)
        expected = 0 if bool(np.all(np.abs(finite - whole) <= 1e-12 + 1e-5 * np.abs(whole))) else 2
        assert numbers.decimals_for(ref, 2) == expected
