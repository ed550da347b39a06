"""One sampler draws every kind (DESIGN §2).

A kind says how to draw a batch of candidate inputs and which of its mistakes must stay apart (GUARDS).
The sampler runs the step records over the whole batch at once (every candidate is one slice of a stack),
keeps the candidates the kind finds hand-friendly, whose guarded mistakes land apart from the answer and
from each other, and whose counted minutes fit the level, and takes the first in the generator's order
whose guarded mistakes also land outside the interval a careful student reaches (exercises.core.reach:
what the grader takes as right), so that every one of them is still named.

    def draw(rng, level) -> Batch        # candidates stacked on a first axis
    def generate(rng, level) -> Draft    # a kind that draws one candidate at a time (a batch of one)

Speed has this one home: a kind carries no tables, caches or fast paths of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from . import budget, misconceptions, pipeline, reach
from .draft import Draft
from .model import Exercise, Part, declared_decimals
from .numbers import decimals_for

MAX_ROUNDS = 200  # batches (or single drafts) drawn before giving up


@dataclass
class Batch:
    """Candidate inputs of one kind and level.

    given    the inputs: those named in `stacked` carry the candidates on their first axis, the others
             (d_k, causal …) are shared by the whole batch; every value the records compute from them is
             stacked too
    parts    the names of the asked parts, in order: values the records compute, or that `derive` adds
    keep     the kind's own conditions (hand-friendly numbers): env -> one flag per candidate
    derive   the kind's own values from the records' (a head's slice, a concatenation): env -> {name:
             stacked value}; also applied to every mistaken run, so a part read from a mistaken value is
             mistaken too. `sources` names the record values each derived one reads
    own      the kind's own catalogued mistakes: {id: env -> {part name: stacked value}}, kept apart like
             the records' mistakes (the records' are the kind's GUARDS)
    shown    the given values of one candidate as its exercise stores them, when the stack holds them
             otherwise (heads as an axis of W_Q, named W_Q1, W_Q2 … in the exercise)
    """

    given: dict[str, Any]
    stacked: tuple[str, ...]
    parts: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    keep: Callable[[Mapping[str, Any]], np.ndarray] | None = None
    decimals: int = 2
    derive: Callable[[Mapping[str, Any]], dict[str, np.ndarray]] | None = None
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    own: dict[str, Callable[[Mapping[str, Any]], dict[str, np.ndarray]]] = field(default_factory=dict)
    shown: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def size(self) -> int:
        return len(self.given[self.stacked[0]])

    def candidate(self, i: int) -> dict[str, Any]:
        """The given values of candidate `i`, as its exercise stores them."""
        given = {k: (v[i] if k in self.stacked else v) for k, v in self.given.items()}
        return given if self.shown is None else self.shown(given)

    def computed(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every value of every candidate: the records' run over the stack, and what `derive` adds."""
        env = dict(pipeline.run(given))
        if self.derive is not None:
            env.update(self.derive(env))
        return env

    def records(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """The values of the records' run in `env` (what pipeline.run of the given computes), stacked. A
        derived value may bear a record's name (kv_cache's A, rope's scores of the rotated rows): left out."""
        derived = set(self.derive(env)) if self.derive is not None else set()
        return {k: v for k, v in env.items() if k not in self.given and k not in derived}


def sample(kind: Any, rng: np.random.Generator, level: int, make: Callable[..., Exercise]) -> Exercise:
    """The first candidate of `kind` that the checks keep. `make(given, parts, params)` builds the Exercise."""
    for _ in range(MAX_ROUNDS):
        if kind.draw is None:
            ex = _from_draft(kind.generate(rng, level), make)
            if (not misconceptions.collides(ex, guards=kind.GUARDS) and budget.within_budget(ex, kind.operations)
                    and outside_reach(ex, misconceptions.by_part(ex, kind.GUARDS), kind.chain)):
                return ex
            continue
        batch = kind.draw(rng, level)
        env = batch.computed(batch.given)  # every value of every candidate, stacked
        ok = np.ones(batch.size, dtype=bool) if batch.keep is None else np.asarray(batch.keep(env), dtype=bool)
        kept = np.flatnonzero(ok)
        if not len(kept):
            continue
        few, few_env = _only(batch, env, kept)  # the apartness of the kept candidates only: each one's is its own
        found = mistaken(few, few_env, kind.GUARDS)
        ok[kept] = ~_clash(few, few_env, found)
        records = batch.records(env) if ok.any() and batch.shown is None else {}
        for j, i in enumerate(kept):
            if not ok[i]:
                continue
            ex = make(batch.candidate(i), _parts(batch, env, i), batch.params)
            if batch.shown is None:  # the records' values of exactly the exercise's given values
                pipeline.seed_reference_env(ex, {k: v[i] for k, v in records.items()})
            if budget.within_budget(ex, kind.operations) and outside_reach(ex, _of_candidate(found, j), kind.chain):
                return ex
    raise RuntimeError(f"{kind.ID}: no candidate kept in {MAX_ROUNDS} rounds (level {level})")


def candidates(kind: Any, rng: np.random.Generator, level: int, make: Callable[..., Exercise]) -> Iterator[Exercise]:
    """Every candidate the sampler weighs, in its order and unchecked: each draft of a kind that draws one at a
    time, each hand-friendly candidate of a batch. For tests and tools that ask what the sampler saw."""
    for _ in range(MAX_ROUNDS):
        if kind.draw is None:
            yield _from_draft(kind.generate(rng, level), make)
            continue
        batch = kind.draw(rng, level)
        env = batch.computed(batch.given)
        keep = np.ones(batch.size, dtype=bool) if batch.keep is None else np.asarray(batch.keep(env), dtype=bool)
        for i in np.flatnonzero(keep):
            yield make(batch.candidate(i), _parts(batch, env, i), batch.params)


def outside_reach(ex: Exercise, alternatives: Mapping[str, Mapping[str, np.ndarray]],
                  chain: Callable[..., Mapping[str, Any]]) -> bool:
    """Every mistake's value ({part name: {id: value}}) differs from the answer, in some cell, by more than
    that cell's slack (reach.of: what a careful student may write) and the part's separation: graded wrong,
    written exactly or rounded, and so still named."""
    slack = reach.of(ex, chain, declared_decimals(ex))
    parts = misconceptions.parts_by_name(ex)
    for name, values in alternatives.items():
        part = parts[name]
        reference = misconceptions.comparable(part.reference)
        gap = misconceptions.separation(part) + slack.get(name, 0.0)
        for value in values.values():
            value = np.asarray(value, dtype=float)
            if value.size != reference.size or np.isnan(value).any() or (value == np.inf).any():
                continue  # a shape or a value no one can write names nothing
            value = value.reshape(part.shape)  # (a candidate's cells of a stack come flat)
            if np.all(np.abs(misconceptions.comparable(value) - reference) <= gap):
                return False
    return True


def _of_candidate(found: Mapping[str, list[tuple[np.ndarray, np.ndarray]]], j: int) -> dict[str, dict]:
    """The mistakes' values of candidate j of `found` (mistaken()), by part, those it can write."""
    return {name: {k: cells[j] for k, (cells, writable) in enumerate(values) if writable[j]}
            for name, values in found.items()}


def _only(batch: Batch, env: Mapping[str, Any], rows: np.ndarray) -> tuple[Batch, dict[str, Any]]:
    """The batch and its values cut down to the candidates `rows`."""
    shared = set(batch.given) - set(batch.stacked)
    given = {k: (v if k in shared else v[rows]) for k, v in batch.given.items()}
    return replace(batch, given=given), {k: (v if k in shared else v[rows]) for k, v in env.items()}


def _from_draft(draft: Draft, make: Callable[..., Exercise]) -> Exercise:
    return make(draft.given, draft.parts, draft.params)


def _parts(batch: Batch, env: Mapping[str, Any], i: int) -> list[Part]:
    parts = []
    for name in batch.parts:
        ref = np.asarray(env[name], dtype=float)[i]
        parts.append(Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, batch.decimals)))
    return parts


def clashing(batch: Batch, env: Mapping[str, Any], guards: tuple[str, ...]) -> np.ndarray:
    """Per candidate: some part has a guarded mistake whose value lies within the part's separation of the
    answer or of another guarded mistake's (misconceptions.collides, asked of every candidate at once)."""
    return _clash(batch, env, mistaken(batch, env, guards))


def mistaken(batch: Batch, env: Mapping[str, Any], guards: tuple[str, ...]) -> dict[str, list]:
    """{part name: [(the value a mistake gives, (B, cells)), which candidates can write it (B,))]}: the guarded
    mistakes of the records and the kind's own, of every candidate at once."""
    wanted = set(batch.parts)
    record_parts = {batch.sources.get(name, (name,)) for name in wanted}
    needed = {source for sources in record_parts for source in sources}
    by_part: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}

    def add(values: Mapping[str, Any], names: set[str], made: np.ndarray) -> None:
        for name in names:
            value, reference = np.asarray(values[name], dtype=float), np.asarray(env[name], dtype=float)
            if value.shape != reference.shape:
                continue  # a shape no one can write: a shape error, not an answer
            cells = value.reshape(batch.size, -1)
            # a value no one can write (NaN, +∞) names nothing
            writable = made & ~np.isnan(cells).any(axis=1) & ~(cells == np.inf).any(axis=1)
            by_part.setdefault(name, []).append((cells, writable))

    every = np.ones(batch.size, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for mid in guards:
            if not pipeline.AFFECTED.get(mid, frozenset()) & needed:
                continue
            run = pipeline.run_mistake(batch.given, env, mid, until=needed, ignoring_errors=True, only_if_made=True)
            if not run.used:
                continue
            values = dict(run)
            if batch.derive is not None:  # a derived value of a record's name keeps what the mistake made of it
                values.update({k: v for k, v in batch.derive(values).items() if k not in run.tainted})
            tainted = {name for name in wanted if run.tainted & set(batch.sources.get(name, (name,)))}
            # made in some matrix of a candidate's stack (a head): made for that candidate
            add(values, tainted, every if run.made is None else run.made.reshape(batch.size, -1).any(axis=1))
        for mistaken_values in batch.own.values():
            values = mistaken_values(env)
            add(values, wanted & set(values), every)
    return by_part


def _clash(batch: Batch, env: Mapping[str, Any], by_part: Mapping[str, list]) -> np.ndarray:
    """clashing() of the mistakes' values mistaken() found."""
    clash = np.zeros(batch.size, dtype=bool)
    for name, alternatives in by_part.items():
        reference = np.asarray(env[name], dtype=float).reshape(batch.size, -1)
        gap = _separation(reference, batch.decimals)  # (B,)
        values = misconceptions.comparable(np.stack([cells for cells, _ in alternatives], axis=1))  # (B, k, cells)
        usable = np.stack([writable for _, writable in alternatives], axis=1)  # (B, k)
        ref = misconceptions.comparable(reference)[:, None, :]
        like_answer = (np.abs(values - ref).max(axis=-1, initial=0.0) <= gap[:, None]) & usable
        widest = np.abs(values[:, :, None, :] - values[:, None, :, :]).max(axis=-1, initial=0.0)  # (B, k, k)
        k = values.shape[1]
        pairs = (widest <= gap[:, None, None]) & usable[:, :, None] & usable[:, None, :] & ~np.eye(k, dtype=bool)
        clash |= like_answer.any(axis=1) | pairs.any(axis=(1, 2))
    return clash


def _separation(reference: np.ndarray, decimals: int) -> np.ndarray:
    """misconceptions.separation of each candidate's part (rows of `reference`): a part whose every finite
    cell is whole is graded exactly (numbers.decimals_for), the others to `decimals` places."""
    with np.errstate(invalid="ignore"):
        whole = np.round(reference)
        exact = np.where(np.isfinite(reference), np.abs(reference - whole) <= 1e-12 + 1e-5 * np.abs(whole), True)
    places = np.where(exact.all(axis=1), 0, decimals)
    return np.array([misconceptions.separation_for(int(d)) for d in places])
