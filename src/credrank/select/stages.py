"""Selection stages for the end of a pipeline (chapter 35.8 pluralism, 35.9 fair exposure).

Every stage reads the utility ``u(d) = max(batch.score, 0)`` — the combined,
credibility-aware score with **negative scores clipped to 0** (a negative utility would
reward leaving an item out of a set and has no exposure-merit meaning) — and, where needed,
the embeddings ``batch.vectors``. It returns the chosen rows in display order and records a
JSON-serialisable summary under ``batch.info["select"]`` (``utility_definition`` says which
utility it used; ``warnings`` what the caller should know).

**Scale (35.8: "weights require retuning when list length or score scale changes").** MMR
and the coverage objective weigh the utility against terms in ``[−1, 1]`` and ``[0, 1]``
(a cosine; ILAD and coverage), while the score's scale depends on the pipeline: a cosine
times a prior is about 0–1, reciprocal rank fusion about 0.03, BM25 about 10. Their
``utility_scale`` parameter says which utility they weigh: ``"pool_max"`` divides it by the
largest utility of the (eligible) pool, ``û(d) = u(d) / max u`` in ``[0, 1]`` (every ``u`` 0:
``û = u``), so a ``diversity`` or ``λ`` means the same trade-off whatever the combination;
``"score"`` takes ``u`` as it comes — the chapter's objective, in which the 35.8 toy's numbers
are stated. MMR defaults to ``pool_max`` (its relevance and novelty terms must share a
scale); coverage to ``score`` (the chapter's ``Σu + λ1·ILAD + λ2·coverage``), and warns
(:class:`SelectionWarning` and ``info["select"]["warnings"]``) when the pool's largest
utility is more than :data:`SCALE_RANGE` away from 1.

**Eligibility (35.8: "diversify only over eligible, sufficiently relevant evidence").**
``mmr`` and ``coverage`` take ``min_ratio``: only candidates whose retrieval score reaches
``min_ratio`` times the pool's best (:func:`~credrank.select.eligibility.eligible_rows`; at
least ``top_k`` kept) are diversified over. The default ``0`` diversifies over the whole
fetched pool.

* :class:`MMRSelect` — greedy MMR, then ordered by utility.
* :class:`CoverageSelect` — exact optimum of ``Σu + λ1·ILAD + λ2·coverage`` (MILP) up to
  ``exact_pool`` candidates, an anytime search within ``time_limit`` above (flagged not
  optimal), ordered by utility; intents from a label column, or from clustering the
  embeddings when no labels exist (``info["select"]["intents"]["source"]`` says which).
* :class:`ExposureSelect` — exposure LP under parity or utility-proportional group
  constraints, Birkhoff–von Neumann lottery, one sampled list per request. It holds a seeded
  generator and an :class:`~credrank.select.bvn.ExposureMonitor`, so consecutive requests draw
  different lists and the realised exposure over the stream is reported (stateful by design).
* :class:`FairSelect` — FA*IR greedy re-ranking with prefix minimums.

:func:`build_selector` builds one of them by name (the CLI's entry point).
"""

from __future__ import annotations

import inspect
import time
import warnings
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.errors import CandidateVectorError
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import AnyOf, Flag, Integer, ListOf, Nullable, Number, Text
from credrank.core.validation import check_choice, check_int, is_integer, is_number
from credrank.select.budget import pool_warnings
from credrank.select.bvn import (
    ExposureMonitor,
    decompose_ranking,
    realised_exposure,
    sample_ranking,
)
from credrank.select.coverage import EXACT_POOL, best_set_bounded
from credrank.select.diversity import (
    best_set_milp,
    dissimilarity_from_similarity,
    ilad_from_dissimilarity,
    intent_coverage,
    mmr_picks,
    order_by_utility,
)
from credrank.select.eligibility import eligible_rows
from credrank.select.exposure import (
    ExposureInfeasible,
    check_discounts,
    exposure_lp,
    group_means,
    log_discounts,
)
from credrank.select.fair import failure_probability, fair_rerank
from credrank.select.intents import Intents, has_labels, intents_from_clusters, intents_from_labels

#: the group of ``exposure``'s candidates with no value in ``group_column``; a real value of
#: that name is refused (:func:`group_labels`), so the two can never merge
MISSING_GROUP = "(missing)"
#: what a parameter naming a meta column expects
COLUMN = "a meta column name"


#: how ``mmr`` and ``coverage`` scale the utility they weigh (module docstring)
UTILITY_SCALES = ("pool_max", "score")
#: ``utility_scale=score`` warns when the pool's largest utility is below ``1/SCALE_RANGE``
#: or above ``SCALE_RANGE``: the other terms of the objective lie in [0, 1]
SCALE_RANGE = 10.0
UTILITY = "max(score, 0)"


def utility_definition(scale: str) -> str:
    """``info["select"]["utility_definition"]`` of ``mmr`` and ``coverage``: the utility
    (``utility``, ``top_k_utility`` are in its unit) and what the objective weighs."""
    if scale == "score":
        return f"{UTILITY}; the objective weighs it as it comes (utility_scale=score)"
    return (f"{UTILITY}; the objective weighs it divided by utility_divisor, the largest of "
            "the pool selected from (utility_scale=pool_max; 1 when every score is <= 0)")


class SelectionWarning(UserWarning):
    """A selection ran, but on inputs the caller should look at (a utility scale far from the
    other terms', a protected value no candidate has)."""


def _warned(message: str) -> str:
    """``message``, issued as a :class:`SelectionWarning` too (the CLI prints it on stderr)."""
    warnings.warn(message, SelectionWarning, stacklevel=3)
    return message


def utilities(batch: Candidates) -> np.ndarray:
    """``u(d) = max(score(d), 0)``: the combined score with negatives clipped to 0."""
    return np.maximum(np.asarray(batch.score, dtype=np.float64), 0.0)


def scaled_utilities(u: np.ndarray, scale: str) -> tuple[np.ndarray, float]:
    """``(û, divisor)``: ``pool_max`` divides ``u`` by its largest value (1 when every ``u``
    is 0), ``score`` leaves it (divisor 1)."""
    top = float(u.max()) if u.size else 0.0
    divisor = top if scale == "pool_max" and top > 0 else 1.0
    return u / divisor, divisor


def scale_warnings(stage: str, u: np.ndarray, scale: str, against: str) -> list[str]:
    """A warning when ``utility_scale=score`` weighs utilities whose largest is more than
    :data:`SCALE_RANGE` away from 1 against ``against`` (terms in [0, 1]); else ``[]``."""
    top = float(u.max()) if u.size else 0.0
    if scale != "score" or top == 0.0 or 1 / SCALE_RANGE <= top <= SCALE_RANGE:
        return []
    more = "more" if top < 1 else "less"
    return [_warned(
        f"utility_scale: {stage} weighs utilities up to {top:.3g} (utility_scale=score) "
        f"against {against} in [0, 1], so those terms count about {max(top, 1 / top):.0f}x "
        f"{more} than against utilities on a 0-1 scale (rank fusion scores are about 0.03, "
        "BM25 about 10); set utility_scale=pool_max (the utility divided by the pool's "
        "largest) or retune the weights (35.8)")]


def _eligible(batch: Candidates, u: np.ndarray, k: int, min_ratio: float
              ) -> tuple[Candidates, np.ndarray, dict[str, Any]]:
    """The eligible part of ``batch`` (retrieval score ≥ ``min_ratio`` × the pool's best, at
    least ``k`` kept: :func:`~credrank.select.eligibility.eligible_rows`), its utilities and
    the summary for ``info``."""
    rows, eligible = eligible_rows(batch.retrieval_score, min_ratio, k)
    info = {"min_ratio": min_ratio, "relevance": "max(retrieval_score, 0)",
            "pool": len(batch), "eligible": eligible, "kept": len(rows)}
    if len(rows) == len(batch):
        return batch, u, info
    return batch.take(rows), u[rows], info


def _vectors(batch: Candidates, stage: str, why: str) -> np.ndarray:
    """The candidates' vectors; a zero one (a candidate sent with a vector of zeros) is an
    error naming that candidate: the selectors compare directions, and it has none (the
    error named a row of the pool)."""
    if batch.vectors is None:
        raise StageError(f"{stage}: batch.vectors is None; {why} needs the candidate embeddings "
                         "(let the retriever return vectors)")
    x = np.asarray(batch.vectors, dtype=np.float64)
    zero = np.flatnonzero(~np.any(x != 0, axis=1)) if x.ndim == 2 else np.zeros(0, dtype=int)
    if zero.size:
        doc_id = str(batch.doc_ids[zero[0]])
        raise CandidateVectorError(
            f"{stage}: the candidate {doc_id!r} has a vector of zeros, which has no direction "
            f"to compare ({why} compares the candidates' directions); send its text without a "
            "vector, or a nonzero vector", doc_id)
    return x


def _doc_ids(batch: Candidates, rows: np.ndarray) -> list[str]:
    return [str(batch.doc_ids[i]) for i in rows]


def _known_column(batch: Candidates, param: str, column: str) -> np.ndarray:
    """Meta column ``column`` of ``batch``; a name the batch does not have is a misspelling,
    not a column of missing values (those are ``None`` rows of a present column)."""
    if column not in batch.meta:
        raise StageError(f"{param}: expected one of the candidates' columns "
                         f"({', '.join(sorted(batch.meta))}), got {column!r}")
    return batch.column(column)


def _wrap(stage: str, exc: ValueError) -> StageError:
    return StageError(f"{stage}: {exc}")


# --------------------------------------------------------------------------------------------
class Selector(Stage):
    """What every selector shares: an empty batch chooses nothing (said in ``info``);
    otherwise :meth:`select` receives the utilities ``u = max(score, 0)`` and
    ``k = min(top_k, N)``."""

    top_k: int
    selects = True

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> Stage:
        """The selector of the pipeline's ``top_k`` with ``params`` the spec checked."""
        return construct(cls, params, top_k=ctx.top_k)

    def config(self) -> dict[str, Any]:
        """``top_k`` (the pipeline's) and the declared parameters."""
        return {"top_k": self.top_k, **super().config()}

    def transform(self, batch: Candidates) -> Candidates:
        if len(batch) == 0:
            return batch.with_info(select={"selector": self.name, "top_k": self.top_k,
                                           "chosen": []})
        return self.select(batch, utilities(batch), min(self.top_k, len(batch)))

    @abstractmethod
    def select(self, batch: Candidates, u: np.ndarray, k: int) -> Candidates:
        """The chosen rows of a non-empty ``batch``, in display order, with ``info["select"]``."""


# --------------------------------------------------------------------------------------------
class MMRSelect(Selector):
    """Maximal marginal relevance: ``(1−diversity)·û − diversity·max cos`` (chapter 35.8).

    ``diversity ∈ [0, 1]``, 1 = diverse. ``û`` is the utility divided by the pool's largest
    (``utility_scale="pool_max"``, default: the relevance term then shares the cosine's scale
    whatever the score's, as Carbonell and Goldstein's two similarities do) or the utility as
    it comes (``"score"``). ``min_ratio``: only candidates whose retrieval score reaches that
    share of the pool's best are picked from (at least ``top_k`` kept; 0, default: the whole
    pool). The picked set is returned ordered by utility; the pick order is kept in
    ``info``. ``intent_column`` (optional) only adds the coverage of the chosen set to the
    report. Only the ``K`` cosine rows of the picks are computed
    (:func:`~credrank.select.diversity.mmr_picks`, ``O(K·N·dim)``), never the ``N × N``
    matrix; pools over :attr:`max_pool` run with a
    :class:`~credrank.select.budget.PoolSizeWarning`.
    """

    #: per row: with unit passage it selects passages, two of one page as redundant as their
    #: vectors say
    counts_documents = False

    name = "mmr"
    reads = frozenset({"vectors"})
    #: the largest pool handled within the budget (``O(K·N·dim)``: K cosine rows)
    max_pool = 20_000

    @parameters(diversity=Number(0.0, 1.0), intent_column=Nullable(Text(what=COLUMN)),
                min_ratio=Number(0.0, 1.0), utility_scale=Text(choices=UTILITY_SCALES))
    def __init__(self, top_k: int, diversity: float, intent_column: str | None = None,
                 min_ratio: float = 0.0, utility_scale: str = "pool_max"):
        self.top_k = check_int("top_k", top_k, 1)
        self.diversity, self.intent_column = diversity, intent_column
        self.min_ratio, self.utility_scale = min_ratio, utility_scale

    def select(self, batch: Candidates, u: np.ndarray, k: int) -> Candidates:
        notes = pool_warnings(self.name, len(batch), self.max_pool,
                              "K cosine rows over the pool's embeddings")
        batch, u, eligibility = _eligible(batch, u, k, self.min_ratio)
        if self.diversity > 0:
            notes += scale_warnings(self.name, u, self.utility_scale, "the cosine novelty term")
        weighed, divisor = scaled_utilities(u, self.utility_scale)
        vectors = (None if self.diversity == 0.0 and batch.vectors is None
                   else _vectors(batch, "mmr", "MMR"))
        try:
            if vectors is None:
                picks = np.argsort(-u, kind="stable")[:k]
                rows = None
            else:  # K cosine rows, never the N × N matrix (mmr_picks)
                picks, rows = mmr_picks(weighed, k, self.diversity, vectors=vectors)
        except ValueError as exc:
            raise _wrap(self.name, exc) from exc
        # the novelty term at pick time: max cos to the earlier picks (0 for the first)
        seen = np.zeros(len(picks))
        if rows is not None and len(picks) > 1:
            earlier = np.tril(np.ones((len(picks), len(picks)), dtype=bool), -1)
            seen = np.where(earlier, rows[:, picks].T, -np.inf).max(axis=1)
            seen[0] = 0.0
        gains = (1 - self.diversity) * weighed[picks] - self.diversity * seen
        chosen = order_by_utility(u, picks)
        info: dict[str, Any] = {
            "selector": self.name, "top_k": self.top_k, "diversity": self.diversity,
            "utility_definition": utility_definition(self.utility_scale),
            "utility_scale": self.utility_scale, "utility_divisor": divisor,
            "eligibility": eligibility,
            "objective": float(np.sum(gains)),
            "objective_definition": "sum of MMR gains at pick time",
            "utility": float(u[chosen].sum()),
            "ilad": None if rows is None else _ilad_of_picks(rows, picks, chosen),
            "ilad_policy": "0.0 when fewer than 2 items (term omitted)",
            "coverage": None,
            "pick_order": _doc_ids(batch, picks),
            "chosen": _doc_ids(batch, chosen),
            "warnings": notes,
        }
        if self.intent_column is not None:
            labels = _known_column(batch, "intent_column", self.intent_column)
            if has_labels(labels):
                intents = intents_from_labels(labels)
                info["coverage"] = intent_coverage(intents.membership, chosen)
                info["intents"] = intents.as_info() | {"column": self.intent_column}
        return batch.take(chosen).with_info(select=info)



def _ilad_of_picks(rows: np.ndarray, picks: np.ndarray, chosen: np.ndarray) -> float:
    """ILAD of ``chosen`` (a reordering of ``picks``) from the picks' cosine rows."""
    where = {int(p): t for t, p in enumerate(picks)}
    at = np.array([where[int(c)] for c in chosen], dtype=np.int64)
    sim = rows[np.ix_(at, picks[at])]
    return ilad_from_dissimilarity(dissimilarity_from_similarity((sim + sim.T) / 2.0))


# --------------------------------------------------------------------------------------------
class CoverageSelect(Selector):
    """Exact optimum of ``Σu + λ1·ILAD + λ2·coverage`` over ``top_k``-sets (chapter 35.8).

    Intents: the labels in ``intent_column`` (a string, a list of strings or ``None`` per
    candidate; ``intent_set`` declares 𝒮, default the labels present). When the column is
    absent or holds no label, the embeddings are clustered into ``n_clusters`` intents
    (default ``min(top_k, N)``). Up to ``exact_pool`` candidates (default 50) the set is
    solved exactly by a MILP (HiGHS); above, by the anytime search of
    :func:`~credrank.select.coverage.best_set_bounded` (greedy, swaps over the whole pool,
    the exact MILP over a shortlist of ``exact_pool`` rows). ``time_limit`` seconds bound the
    whole stage (intents, cosines and search): when they end the search, or when the pool
    exceeds ``exact_pool``, the best set found is used and ``info["select"]["optimal"]`` is
    false; ``time_limit_hit``, ``steps``, ``pool`` and ``elapsed_s`` say what ran. Pools over
    :attr:`max_pool` (2,000: the intent clustering is ``O(N²)``) run with a
    :class:`~credrank.select.budget.PoolSizeWarning`. The chosen set is ordered by utility.

    ``u`` is the utility as it comes (``utility_scale="score"``, default: the chapter's
    objective, whose toy numbers are in score units; a warning when the pool's largest
    utility is far from 1) or divided by the pool's largest (``"pool_max"``), in which unit
    ``objective`` is reported (``utility``, ``top_k_utility`` and ``utility_loss`` stay in
    score units; ``utility_divisor`` converts). ``min_ratio``: only
    candidates whose retrieval score reaches that share of the pool's best are chosen from
    (at least ``top_k`` kept; 0, default: the whole pool).
    """

    #: per row: with unit passage it covers the intents with passages
    counts_documents = False

    name = "coverage"
    reads = frozenset({"vectors"})
    #: the largest pool handled within the budget (intent clustering is O(N²))
    max_pool = 2_000
    #: the clock of the time limit (seconds; replaceable in tests)
    clock = staticmethod(time.perf_counter)

    #: the largest weight λ1, λ2 (declared): the objective's terms are in [0, 1], so a larger
    #: weight only drowns the utility, and 1e308 overflowed the solver's coefficients (a
    #: SciPy error answered to the client)
    max_weight = 1e9

    @parameters(lambda_ilad=Number(0.0, max_weight), lambda_coverage=Number(0.0, max_weight),
                intent_column=Nullable(Text(what=COLUMN)), n_clusters=Nullable(Integer(1)),
                intent_set=Nullable(ListOf(Text(what="an intent name"), min_len=1)),
                time_limit=Number(0.0, open_low=True), exact_pool=Integer(1),
                min_ratio=Number(0.0, 1.0), utility_scale=Text(choices=UTILITY_SCALES))
    def __init__(self, top_k: int, lambda_ilad: float, lambda_coverage: float,
                 intent_column: str | None = None, n_clusters: int | None = None,
                 intent_set: Sequence[str] | None = None, time_limit: float = 10.0,
                 exact_pool: int = EXACT_POOL, min_ratio: float = 0.0,
                 utility_scale: str = "score"):
        self.top_k = check_int("top_k", top_k, 1)
        self.lambda_ilad, self.lambda_coverage = lambda_ilad, lambda_coverage
        self.intent_column, self.n_clusters = intent_column, n_clusters
        self.intent_set = None if intent_set is None else list(intent_set)
        self.time_limit, self.exact_pool = time_limit, exact_pool
        self.min_ratio, self.utility_scale = min_ratio, utility_scale

    def _intents(self, batch: Candidates, k: int, notes: list[str]
                 ) -> tuple[Intents | None, str]:
        """The intents of the pool and where they came from; what the caller should know is
        added to ``notes`` (and warned): labels outside ``intent_set``, a named column with no
        labels (the embeddings clustered instead)."""
        if self.intent_column is not None:
            labels = _known_column(batch, "intent_column", self.intent_column)
            if has_labels(labels) or self.intent_set is not None:
                intents = intents_from_labels(labels, self.intent_set)
                if intents.outside_set:
                    notes.append(_warned(
                        f"coverage: intent labels outside intent_set {list(intents.names)} "
                        f"cover nothing: {intents.outside_set} (label: candidates)"))
                return intents, f"labels:{self.intent_column}"
            if self.lambda_coverage > 0 and batch.vectors is not None:
                notes.append(_warned(
                    f"coverage: intent_column {self.intent_column!r} holds no label in this "
                    "pool; its intents are clusters of the embeddings"))
        if batch.vectors is None:
            if self.lambda_coverage > 0:
                raise StageError(
                    "intent_column: no intent labels"
                    + (f" in column {self.intent_column!r}" if self.intent_column else "")
                    + " and batch.vectors is None, so intents cannot be clustered either; "
                    "name a column with labels, or let the retriever return vectors")
            return None, "none"
        n_clusters = self.n_clusters or min(k, len(batch))
        why = ("clusters" if self.intent_column is None
               else f"clusters (column {self.intent_column!r} has no labels)")
        return intents_from_clusters(_vectors(batch, "coverage", "clustering"),
                                     n_clusters), why

    def select(self, batch: Candidates, u: np.ndarray, k: int) -> Candidates:
        started = self.clock()  # the time limit counts the intents and cosines too
        notes = pool_warnings(self.name, len(batch), self.max_pool,
                              "intent clustering and its N × N distances")
        batch, u, eligibility = _eligible(batch, u, k, self.min_ratio)
        if self.lambda_ilad > 0 or self.lambda_coverage > 0:
            notes += scale_warnings(self.name, u, self.utility_scale,
                                    "the ILAD and coverage terms")
        weighed, divisor = scaled_utilities(u, self.utility_scale)
        try:
            intents, source = self._intents(batch, k, notes)
            vectors: np.ndarray | None
            if self.lambda_ilad > 0:
                vectors = _vectors(batch, "coverage", "ILAD")
            else:
                vectors = (None if batch.vectors is None
                           else np.asarray(batch.vectors, dtype=np.float64))
            sel = best_set_bounded(weighed, k, vectors=vectors,
                                   membership=None if intents is None else intents.membership,
                                   lambda_ilad=self.lambda_ilad,
                                   lambda_coverage=self.lambda_coverage,
                                   time_limit=self.time_limit, exact_pool=self.exact_pool,
                                   clock=self.clock, started=started, solver=best_set_milp)
        except StageError:
            raise
        except ValueError as exc:
            raise _wrap(self.name, exc) from exc
        top_utility = float(np.sort(u)[::-1][:k].sum())
        utility = float(u[sel.indices].sum())
        info = {
            "selector": self.name, "top_k": self.top_k,
            "lambda_ilad": self.lambda_ilad, "lambda_coverage": self.lambda_coverage,
            "utility_definition": utility_definition(self.utility_scale),
            "utility_scale": self.utility_scale, "utility_divisor": divisor,
            "eligibility": eligibility,
            **sel.as_info(),
            "utility": utility,
            "ilad_policy": "0.0 when fewer than 2 items (term omitted)",
            "top_k_utility": top_utility,
            "utility_loss": (top_utility - utility) / top_utility if top_utility > 0 else None,
            "intents": None if intents is None else intents.as_info() | {"used": source},
            "intent_source": source,
            "chosen": _doc_ids(batch, sel.indices),
            "elapsed_s": self.clock() - started,
            "warnings": notes,
        }
        return batch.take(sel.indices).with_info(select=info)



# --------------------------------------------------------------------------------------------
#: the largest ``seed`` and ``draw`` of the exposure selector: every integer up to it is exact
#: in a JSON number read as an IEEE double (jq, JavaScript), so an answer's ``draw`` fed back
#: replays the same list (a larger one was rounded on the way, and the replay drew another)
JSON_SAFE_INT = 2**53 - 1


class ExposureSelect(Selector):
    """Fair-exposure ranking lottery (chapter 35.9), one sampled list per request.

    Solves the exposure LP over all candidates with ``rule`` (``"parity"`` or
    ``"proportional"``) on the groups in meta column ``group_column`` (``None`` values form the
    group ``"(missing)"``, counted in ``info["select"]["n_missing"]``; a real value
    ``"(missing)"`` is refused: :func:`group_labels`), decomposes the policy (Birkhoff–von
    Neumann) and samples one list per request: its ``draw`` (a number the stage's generator,
    seeded by ``seed``, gives each request; ``info["select"]["draw"]``) seeds the one sample, so
    that a request's list is replayed with ``draw`` set to it — what an answer's echoed pipeline
    carries (the lottery still varies across requests: a fixed ``draw`` gives every request the
    same list). ``discounts`` default to ``1/log2(1+k)``. The proportional rule needs every
    group's average utility ``ū_G > 0`` (35.9: "for nonempty groups with positive average
    utility"); a group whose every candidate scores ≤ 0 is an error naming the group and its
    candidates. The last solved policy is reused while the utilities, groups and discounts of a
    request are identical to the previous one (``info["select"]["policy_reused"]``).

    **State (declared).** The generator and the monitor belong to the stage object: a
    process that builds the stage once and serves many requests with it (the service
    memoises the compiled spec) draws each request's ``draw`` from one seeded stream — the
    ``n``-th request of the stage gets the ``n``-th number of ``seed``'s stream
    (``info["select"]["monitor"]["requests"]`` is ``n``) — and its monitor sums every
    request the stage served. A fresh stage (each CLI run) starts both anew.
    """

    name = "exposure"

    @parameters(group_column=Text(what=COLUMN), rule=Text(choices=("parity", "proportional")),
                discounts=Nullable(ListOf(Number(0.0), min_len=1)),
                seed=Nullable(Integer(0, JSON_SAFE_INT)), draw=Nullable(Integer(0, JSON_SAFE_INT)))
    def __init__(self, top_k: int, group_column: str, rule: str = "parity",
                 discounts: Sequence[float] | None = None, seed: int | None = None,
                 draw: int | None = None):
        self.top_k = check_int("top_k", top_k, 1)
        self.group_column, self.rule = group_column, rule
        if discounts is not None:
            v = check_discounts(discounts)
            if len(v) != self.top_k:
                raise ValueError(f"discounts: expected {self.top_k} values (one per position), "
                                 f"got {len(v)}")
            self.discounts: np.ndarray | None = v
        else:
            self.discounts = None
        self.seed, self.draw = seed, draw
        self.rng = np.random.default_rng(seed)
        self.monitor = ExposureMonitor()
        # the last solved policy, reused while utilities, groups and discounts are unchanged
        self._cache: tuple[tuple[Any, ...], Any, Any] | None = None

    def select(self, batch: Candidates, u: np.ndarray, k: int) -> Candidates:
        v = log_discounts(k) if self.discounts is None else self.discounts[:k]
        groups, n_missing = group_labels(batch, self.group_column)
        key = (u.tobytes(), tuple(groups), np.asarray(v).tobytes())
        kept = self._cache  # read once: another request's thread may replace it meanwhile
        cached = kept is not None and kept[0] == key
        if kept is not None and cached:
            _, policy, dec = kept
        else:
            if self.rule == "proportional":
                _check_group_utility(batch, u, groups, self.group_column)
            try:
                policy = exposure_lp(u, groups, v, rule=self.rule)
            except ExposureInfeasible as exc:
                raise StageError(f"rule: {self.rule} exposure on {self.group_column!r} cannot "
                                 f"be met for this pool: {str(exc).partition(': ')[2]}; "
                                 "rule=parity can always be met") from exc
            except ValueError as exc:
                raise _wrap(self.name, exc) from exc
            dec = decompose_ranking(policy.P)
            self._cache = (key, policy, dec)
        draw = (self.draw if self.draw is not None
                else int(self.rng.integers(0, JSON_SAFE_INT, endpoint=True)))
        ranking = sample_ranking(dec, np.random.default_rng(draw))
        realised = realised_exposure(ranking, len(batch), v)
        realised_groups = group_means(realised, policy.codes, len(policy.group_names))
        self.monitor.record(ranking, groups, v, policy.targets)
        info = policy.as_info()
        for g, name in enumerate(policy.group_names):
            info["groups"][name]["realised"] = float(realised_groups[g])
        info.update({
            "selector": self.name, "top_k": self.top_k, "group_column": self.group_column,
            "n_missing": n_missing, "missing_group": MISSING_GROUP,
            "utility_definition": UTILITY,
            "objective": policy.expected_utility,
            "realised_utility": float(u @ realised),
            "bvn_terms": dec.n_terms, "bvn_residual": dec.residual,
            "policy_reused": cached,
            "seed": self.seed, "draw": draw, "monitor": self.monitor.summary(),
            "chosen": _doc_ids(batch, ranking),
        })
        return batch.take(ranking).with_info(select=info)



def _kind(value: Any) -> str:
    """The kind of a group value, numpy's and Python's alike: ``bool``, ``int``, ``float``,
    ``str`` or the type's name (``1`` and ``numpy.int64(1)`` are one value; ``True`` and
    ``1`` are not)."""
    if isinstance(value, bool | np.bool_):
        return "bool"
    if is_integer(value):
        return "int"
    if is_number(value):
        return "float"
    return "str" if isinstance(value, str) else type(value).__name__


def group_labels(batch: Candidates, column: str) -> tuple[list[str], int]:
    """Each candidate's group in meta column ``column`` (``str`` of its value, as the exposure
    LP names groups; 35.9) and how many have no value (``None``: the group
    :data:`MISSING_GROUP`).

    Two different values are never one group: a real value written as :data:`MISSING_GROUP`,
    or two values of one text but different types (``True`` and ``"True"``, ``1`` and
    ``"1"``), is a :class:`StageError` naming the column, the values and their candidates.
    """
    values = _known_column(batch, "group_column", column)
    labels: list[str] = []
    first: dict[str, tuple[Any, int]] = {}
    for i, value in enumerate(values):
        if value is None:
            labels.append(MISSING_GROUP)
            continue
        name = str(value)
        if name == MISSING_GROUP:
            raise StageError(
                f"group_column: the column {column!r} holds the value {name!r} (of "
                f"{str(batch.doc_ids[i])!r}), the name exposure gives the group of candidates "
                f"with no {column}; rename that value in the documents' metadata so the two "
                "groups stay apart")
        seen, row = first.setdefault(name, (value, i))
        if _kind(seen) != _kind(value):  # one kind and one text: one value
            raise StageError(
                f"group_column: the column {column!r} holds {seen!r} (of "
                f"{str(batch.doc_ids[row])!r}) and {value!r} (of {str(batch.doc_ids[i])!r}), "
                f"which would be one group {name!r}; give {column} one type in the documents' "
                "metadata")
        labels.append(name)
    return labels, labels.count(MISSING_GROUP)


def _check_group_utility(batch: Candidates, u: np.ndarray, groups: list[str],
                         column: str) -> None:
    """The proportional rule's condition ``ū_G > 0`` for every group (35.9), or a
    :class:`StageError` naming the first group that fails and its candidates."""
    labels = np.asarray(groups, dtype=object)
    for name in sorted(set(groups)):
        members = np.flatnonzero(labels == name)
        if not np.any(u[members] > 0):
            ids = _doc_ids(batch, members[:5])
            more = f" and {len(members) - 5} more" if len(members) > 5 else ""
            raise StageError(
                f"rule: proportional exposure divides by each group's average utility, but "
                f"group {name!r} ({column} of {', '.join(map(repr, ids))}{more}) has average "
                "utility 0 (every score <= 0); use rule=parity, or a pool without that group")


# --------------------------------------------------------------------------------------------
_TRUE = {"true", "yes", "1", "protected"}
_FALSE = {"false", "no", "0", ""}


def _flag(value: Any) -> bool | None:
    """A boolean flag's truth (``True``/``False``, ``1``/``0``, the words of :data:`_TRUE` and
    :data:`_FALSE` in any case and spacing), or ``None`` for a value that is no flag."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return None


def _matches(value: Any, protected_value: Any) -> bool:
    """``value`` is ``protected_value``: equal, or the same text (``"2024"`` for ``2024``, the
    number a ``-P`` value is read as)."""
    return bool(value == protected_value) or str(value) == str(protected_value)


def _protected_flags(values: np.ndarray, column: str, protected_value: Any | None,
                     doc_ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Each candidate's protected flag and how many have no value (``None``: not protected).

    ``protected_value`` ``None``: the column holds boolean flags (:func:`_flag`); a boolean:
    the flags equal to it are protected (``True`` finds ``"true"``, ``"True"`` and ``1``
    alike); any other value: the candidates that hold it (:func:`_matches`). A value that is
    no flag where a flag is expected is a :class:`StageError` naming it and its candidate."""
    flags = np.zeros(len(values), dtype=bool)
    missing = 0
    by_flag = protected_value is None or isinstance(protected_value, (bool, np.bool_))
    for i, value in enumerate(values):
        if value is None:
            missing += 1
            continue
        if not by_flag:
            flags[i] = _matches(value, protected_value)
            continue
        flag = _flag(value)
        if flag is None:
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            given = ("" if protected_value is None
                     else f"protected_value={protected_value} reads the column as flags; ")
            # named by the parameter, which a door says as its field (select_params.…)
            raise StageError(f"protected_column: the column {column!r} holds {shown} (of "
                             f"{str(doc_ids[i])!r}); {given}expected a boolean flag "
                             "(True/False, 1/0, 'true'/'false') or protected_value=<the value "
                             "that marks the protected group>")
        flags[i] = flag if protected_value is None else flag == bool(protected_value)
    return flags, missing


def _unmatched(values: np.ndarray, column: str, protected_value: Any) -> str:
    """The warning for a ``protected_value`` no candidate has: the values the pool holds."""
    present = sorted({str(v) for v in values if v is not None})
    shown = ", ".join(repr(v) for v in present[:10]) + (" …" if len(present) > 10 else "")
    return (f"protected_value: no candidate has {column} = {protected_value!r} (values in "
            f"the pool: {shown or 'none'}), so none is protected and every prefix minimum "
            "above 0 falls short")


def _near_misses(values: np.ndarray, flags: np.ndarray, column: str,
                 protected_value: Any) -> list[str]:
    """A warning when candidates not protected hold ``protected_value`` but for case or
    spacing (``"Blog"`` for ``"blog"``): likely meant, yet not counted; else ``[]``."""
    want = str(protected_value).strip().casefold()
    near = sorted({str(v) for v, f in zip(values, flags, strict=True)
                   if v is not None and not f and str(v).strip().casefold() == want})
    if not near:
        return []
    count = sum(1 for v, f in zip(values, flags, strict=True)
                if v is not None and not f and str(v) in near)
    return [f"protected_value: {count} candidate(s) hold {column} = "
            f"{', '.join(map(repr, near))}, which differs from {protected_value!r} only in case "
            "or spacing and is not protected; give the value exactly as the documents hold it"]


class FairSelect(Selector):
    """FA*IR top-k with prefix minimums ``m(i)`` (Zehlike et al. 2017; chapter 35.9).

    ``protected_column`` holds boolean flags, or any values when ``protected_value`` names the
    one that marks the protected group (a boolean ``protected_value`` reads the column as flags:
    ``True`` finds ``"true"``, ``"True"`` and ``1``; a value that differs from the one given
    only in case or spacing is a warning); ``None`` counts as not protected (reported as
    ``n_missing``). ``adjust=True`` applies the exact multiple-testing correction.
    """

    name = "fair"

    @parameters(protected_column=Text(what=COLUMN),
                p=Number(0.0, 1.0, open_low=True, open_high=True),
                alpha=Number(0.0, 1.0, open_low=True, open_high=True), adjust=Flag(),
                protected_value=Nullable(AnyOf((Text(allow_empty=True), Integer(), Flag()))))
    def __init__(self, top_k: int, protected_column: str, p: float, alpha: float,
                 adjust: bool = True, protected_value: Any | None = None):
        self.top_k = check_int("top_k", top_k, 1)
        self.protected_column, self.p, self.alpha = protected_column, p, alpha
        self.adjust, self.protected_value = adjust, protected_value

    def select(self, batch: Candidates, u: np.ndarray, k: int) -> Candidates:
        flags, missing = _protected_flags(_known_column(batch, "protected_column",
                                                        self.protected_column),
                                          self.protected_column, self.protected_value,
                                          batch.doc_ids)
        notes: list[str] = []
        values = batch.column(self.protected_column)
        if self.protected_value is not None and not flags.any():
            notes.append(_warned(_unmatched(values, self.protected_column,
                                            self.protected_value)))
        if self.protected_value is not None and not isinstance(self.protected_value, bool):
            notes += [_warned(w) for w in _near_misses(values, flags, self.protected_column,
                                                       self.protected_value)]
        result = fair_rerank(u, flags, self.top_k, self.p, self.alpha, adjust=self.adjust)
        order = result.order
        if not result.satisfied:  # said at every door, not only in the CLI's line
            notes.append(_warned(
                f"fair: the prefix minimums are not met from position {result.shortfall_at}: "
                f"the pool holds {int(flags.sum())} protected candidate(s) "
                f"({self.protected_column}); the list is the best the pool allows"))
        info = {
            "selector": self.name, "top_k": self.top_k,
            "protected_column": self.protected_column, "p": self.p, "alpha": self.alpha,
            "adjust": self.adjust, "alpha_used": result.alpha_used,
            "mtable": [int(x) for x in result.mtable],
            "failure_probability": failure_probability(result.mtable, self.p),
            "satisfied": result.satisfied, "shortfall_at": result.shortfall_at,
            "n_protected_candidates": int(flags.sum()), "n_missing": missing,
            "protected_positions": [int(i) + 1 for i in np.flatnonzero(flags[order])],
            "utility_definition": UTILITY,
            "objective": float(u[order].sum()),
            "chosen": _doc_ids(batch, order),
            "warnings": notes,
        }
        return batch.take(order).with_info(select=info)



# --------------------------------------------------------------------------------------------
SELECTORS: dict[str, type[Selector]] = {
    "mmr": MMRSelect,
    "coverage": CoverageSelect,
    "exposure": ExposureSelect,
    "fair": FairSelect,
}


def build_selector(name: str, top_k: int, **params: Any) -> Stage:
    """Build a selection stage by name (``mmr|coverage|exposure|fair``) with checked params.

    Unknown names, unknown or missing parameters and out-of-range values raise
    ``ValueError`` saying what was expected and what came.
    """
    cls = SELECTORS[check_choice("selector", name, SELECTORS)]
    sig = inspect.signature(cls.__init__)
    accepted = [p for p in sig.parameters if p not in ("self", "top_k")]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"selector {name!r}: unknown parameter(s) {unknown}; accepted: "
                         f"{', '.join(accepted)}")
    required = [p for p in accepted if sig.parameters[p].default is inspect.Parameter.empty]
    missing = [p for p in required if p not in params]
    if missing:
        raise ValueError(f"selector {name!r}: missing required parameter(s) {missing}")
    make: Callable[..., Stage] = cls  # its own constructor: top_k, the parameters just checked
    return make(top_k, **params)
