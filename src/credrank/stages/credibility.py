"""The pipeline stage of the learned page-credibility prior.

:class:`LearnedCredibilityPrior` adds the factor ``λ = floor + (1 − floor) · p`` with
``p = P(credible)`` of each candidate, so ``λ ∈ [floor, 1]``: a page the model is sure is not
credible is demoted by at most ``floor`` (default 0.3), never removed.

**Where ``p`` comes from.** From the candidate's payload when the index was scored with this
model (``credrank score credibility --index DIR --model MODEL``, or ``credrank index …
--credibility-model MODEL``: the fields ``credibility`` and ``credibility_key``,
:mod:`credrank.credibility.indexed`) — a column read, no model, no embedder. When *every*
document of the index holds a score of this model (one engine count when the pipeline is
built), the factor is scored inside the engine's formula instead (pushdown, with the prior,
freshness and the top-k cut: :data:`credrank.index.formula.CREDIBILITY_FORMULA`).

**Declared policies** for a candidate without a stored score of this model (an index never
scored, documents added after scoring, or a score of another model — a refit has a new key:
re-score), by ``missing``:

* ``score`` (default): computed now from the candidate's text, url and title, with the stored
  vector as the embedding feature (a ``document`` model: no embedder call for indexed
  candidates) or the embedder (a ``head`` model; candidates from elsewhere without vectors),
  the query-time price of the stage before index-time scores existed. It keeps
  ``--credibility-model`` working on an unscored index and on the rerank / adapter path
  (candidates from elsewhere carry no payload and are never trusted to). A search of an
  index that scores candidates now warns once (:class:`UnscoredCredibilityWarning`, naming
  the command that adds the scores) and counts them in ``info.credibility_prior.scored_now``;
* ``neutral``: ``p = 0.5`` (:data:`NEUTRAL_P`, ``λ = (1 + floor)/2``), counted in
  ``info.credibility_prior.neutral``; pushed down whether or not the index is fully scored
  (the engine formula gives an unscored point the same ``p``);
* ``error``: a :class:`~credrank.core.candidates.StageError` naming the command that adds
  the scores.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, FormulaTerm, Stage
from credrank.core.schema import AnyOf, Function, Nullable, Number, Text
from credrank.credibility.indexed import FIELD, KEY_FIELD, command
from credrank.credibility.model import CredibilityModel
from credrank.index.formula import CredibilityFormula
from credrank.learn.modelfile import fitted_here_note

#: the policies for a candidate without a stored score of the model (module docstring)
MISSING = ("score", "neutral", "error")
#: ``p`` of an unscored candidate under ``missing = neutral`` (the engine's formula default)
NEUTRAL_P = 0.5
#: the floor of a model that states none (a model built in code, a plain callable)
DEFAULT_FLOOR = 0.3


class UnscoredCredibilityWarning(UserWarning):
    """A search of an index computes ``P(credible)`` at query time: the index holds no
    index-time credibility scores of the model for some candidates."""


class CredibilityFn(Protocol):
    """Any ``(texts, urls) -> P(credible)`` callable, one probability per page."""

    def __call__(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray: ...


class LearnedCredibilityPrior(Stage):
    """Adds the factor ``name`` (default ``prior``) ``λ = floor + (1 − floor) · p``, with
    ``p = P(credible)`` of each candidate: stored at index time, else by ``missing``
    (module docstring).

    Args:
        model_or_callable: a fitted :class:`CredibilityModel`, a model file
            (:class:`~credrank.credibility.modelfile.SavedCredibilityModel`), or any callable
            ``(texts, urls) -> p`` returning one probability in ``[0, 1]`` per page.
        name: the factor name; ``prior`` lets :class:`AnswerAgreement` use ``λ`` as the
            credibility of its vote weight ``w = λ · sim``.
        floor: the smallest factor, in ``[0, 1]`` (``λ ∈ [floor, 1]``).
        missing: ``score`` | ``neutral`` | ``error`` (module docstring).
        key: the ``credibility_key`` of this model's stored scores (default: the model
            file's :attr:`~credrank.credibility.modelfile.SavedCredibilityModel.key`; a
            plain callable has none, so every candidate is unscored).
        coverage: ``(documents scored with key, documents)`` of the index searched (``None``:
            candidates from elsewhere); every document scored lets the engine score the
            factor (:meth:`formula_term`).
        index: the index directory, named in messages.

    A candidate scored now without text raises :class:`~credrank.core.candidates.StageError`
    (the model needs it); a missing URL is allowed (its URL features are zero, ``no_url =
    1``). ``p`` goes to the meta column ``p_credible`` and a summary to
    ``info["credibility_prior"]``.
    """

    #: per row: the stored P(credible) is the document's (on each of its passages, scored
    #: from its first passage's vector); a query-time score reads the row's text and vector
    counts_documents = False

    reads = frozenset({"text"})

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> LearnedCredibilityPrior:
        """The factor ``credibility`` of the model file ``model`` (a registered name or a
        path), with ``floor`` (``null``: the model file's) and ``missing``. A model fitted on
        another embedder than the index's is refused (``ctx.store``); the index's count of
        documents scored with the model decides whether the engine scores the factor."""
        from credrank.credibility.indexed import coverage
        from credrank.credibility.modelfile import load_model  # the model file's reader

        saved = load_model(ctx.path(params["model"], "model", "credibility model"))
        found = None
        index = None
        if ctx.store is not None:
            saved.check_store(ctx.store)
            found = coverage(ctx.store, saved.key)
            path = getattr(ctx.store, "path", None)
            index = None if path is None else str(path)
        return construct(cls, params, model=saved, name="credibility", coverage=found,
                         index=index)

    @parameters(model=AnyOf((Text(what="a model file of 'credrank credibility fit'"),
                             Function(what="a CredibilityModel or a callable (texts, urls) -> "
                                           "p"))),
                floor=Nullable(Number(0.0, 1.0)), missing=Text(choices=MISSING))
    def __init__(self, model: str | CredibilityModel | CredibilityFn | Callable[..., Any],
                 name: str = "prior", floor: float | None = None, *, missing: str = "score",
                 key: str | None = None, coverage: tuple[int, int] | None = None,
                 index: str | None = None):
        if isinstance(model, str):  # a model file
            from credrank.credibility.modelfile import load_model  # the model file's reader

            model = load_model(model)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        self.model = model
        self.name = name
        #: ``floor`` as used: as given, else the model file's, else :data:`DEFAULT_FLOOR`
        self.floor = float(getattr(model, "floor", DEFAULT_FLOOR)) if floor is None else floor
        self.missing = missing
        self.key = key if key is not None else getattr(model, "key", None)
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise ValueError(f"key: expected a non-empty string, got {self.key!r}")
        self.coverage = coverage
        self.index = index
        #: what data a model file saw, and whether it is the index searched (settings)
        seen = getattr(model, "training_data", None)  # a model file's; a callable: none
        self.trained_on: dict[str, Any] | None = seen(index) if callable(seen) else None
        #: said in every ``info.credibility_prior`` when the model saw labels of this index
        self.note = None if self.trained_on is None else fitted_here_note("credibility",
                                                                          self.trained_on)
        #: the candidate data read: the text (and stored vectors) to score unscored ones
        #: now; nothing when every document holds a score or none is computed here
        self.reads = self._reads()

    # -- what the stage is ---------------------------------------------------------------
    @property
    def fully_scored(self) -> bool:
        """Whether every document of the index searched holds a score of this model."""
        return (self.key is not None and self.coverage is not None
                and self.coverage[1] > 0 and self.coverage[0] == self.coverage[1])

    def _reads(self) -> frozenset[str]:
        if self.fully_scored or self.missing != "score":
            return frozenset()
        if getattr(self.model, "embedding_source", "head") == "document" and \
                getattr(self.model, "needs_embedder", False):
            return frozenset({"text", "vectors"})  # the stored vector is the embedding
        return frozenset({"text"})

    @property
    def model_path(self) -> str | None:
        """The model file (``None`` for a model built in code)."""
        return getattr(self.model, "path", None)

    @property
    def formula(self) -> CredibilityFormula:
        """The factor as the engine's formula term (:data:`~credrank.index.formula.
        CREDIBILITY_FORMULA`)."""
        if self.key is None:
            raise ValueError("credibility: a model without a key has no stored scores")
        return CredibilityFormula(self.key, self.floor, NEUTRAL_P, FIELD)

    def formula_term(self) -> FormulaTerm | str:
        if self.key is None:
            return "needs the Python path (a credibility model built in code has no stored scores)"
        if self.coverage is None:
            return "needs the Python path (candidates retrieved elsewhere carry no stored scores)"
        if self.name == "prior":
            return "needs the Python path (its factor is named 'prior', as the type prior's)"
        if self.fully_scored or self.missing == "neutral":
            return FormulaTerm("credibility", self)
        scored, total = self.coverage
        return (f"needs the Python path ({scored} of {total} documents hold a credibility "
                f"score of this model; add the rest with "
                f"`{command(self.index, self.model_path)}`)")

    # -- scoring ---------------------------------------------------------------------------
    def _stored(self, batch: Candidates) -> tuple[np.ndarray, list[int], list[str]]:
        """``(p, unscored rows, other keys seen)``: ``p`` from the payload where the row holds a
        score of this model (``nan`` elsewhere)."""
        values, keys = batch.column(FIELD), batch.column(KEY_FIELD)
        p = np.full(len(batch), np.nan)
        unscored: list[int] = []
        others: set[str] = set()
        for i in range(len(batch)):
            value = values[i]
            if self.key is not None and keys[i] == self.key and _probability(value):
                p[i] = float(value)
                continue
            unscored.append(i)
            if keys[i] is not None and keys[i] != self.key:
                others.add(str(keys[i]))
        return p, unscored, sorted(others)

    def _unscored_error(self, batch: Candidates, unscored: list[int], others: list[str]
                        ) -> StageError:
        n = len(batch)
        stale = (f"; {len(others)} other key(s) found ({others[0]!r}…): scored with another "
                 "model (a refit) — re-score" if others else "")
        return StageError(
            f"credibility: {len(unscored)} of {n} candidates hold no stored credibility score "
            f"of this model (key {self.key!r}; e.g. {str(batch.doc_ids[unscored[0]])!r}): the "
            f"index was not scored with it, or documents were added after scoring{stale}; add "
            f"the scores with `{command(self.index, self.model_path)}` (or index with "
            "`credrank index … --credibility-model MODEL`); to compute them at query time "
            "use {\"stage\": \"credibility\", \"missing\": \"score\"}")

    def pushed(self, batch: Candidates) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """The factor of the stored ``p`` the engine read for ``batch`` (the hits of the
        formula search, :class:`~credrank.pipeline.pushdown.PushdownSearch`): ``(λ, p,
        info)`` in one pass, for the caller to attach to the one batch it builds. Raises
        :class:`StageError` when the engine scored a hit without a stored score of this model
        under a policy other than ``neutral`` (the index changed after the pipeline was
        built: a new search decides again)."""
        stored = self._stored(batch)  # read once: checked here, used by _factor
        unscored = stored[1]
        if self.missing != "neutral" and unscored:
            raise StageError(
                f"credibility: {len(unscored)} hits hold no stored credibility score of this "
                f"model (e.g. {str(batch.doc_ids[unscored[0]])!r}): documents were added or "
                "changed after this search was compiled; search again (they are then scored at "
                f"query time) or add the scores with `{command(self.index, self.model_path)}`")
        return self._factor(batch, stored)

    def transform(self, batch: Candidates) -> Candidates:
        lam, p, info = self._factor(batch)
        out = batch.with_factor(self.name, lam, low=0.0, high=1.0)
        if len(batch):
            out = out.with_meta("p_credible", list(p))
        return out.with_info(credibility_prior=info)

    def _factor(self, batch: Candidates,
                read: tuple[np.ndarray, list[int], list[str]] | None = None
                ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """``λ = floor + (1 − floor) · p`` per candidate (``p`` stored, else by ``missing``),
        ``p`` and the ``credibility_prior`` info (``read``: :meth:`_stored` already read)."""
        if len(batch) == 0:
            return np.zeros(0), np.zeros(0), {"floor": self.floor, "n": 0,
                                              "missing": self.missing}
        p, unscored, others = read if read is not None else self._stored(batch)
        stored = len(batch) - len(unscored)
        scored_now = neutral = 0
        notes: list[str] = []
        if unscored:
            if self.missing == "error":
                raise self._unscored_error(batch, unscored, others)
            if self.missing == "neutral":
                p[unscored] = NEUTRAL_P
                neutral = len(unscored)
            else:
                p[unscored] = self._score_now(batch, unscored)
                scored_now = len(unscored)
                if self.coverage is not None:  # a search of an index: say how to avoid it
                    notes.append(self._warn())
        if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
            raise StageError("credibility model: expected finite probabilities in [0, 1]; got "
                             f"range [{np.nanmin(p):.6g}, {np.nanmax(p):.6g}]")
        lam = np.clip(self.floor + (1.0 - self.floor) * p, self.floor, 1.0)
        info: dict[str, Any] = {"floor": self.floor, "n": len(p), "mean_p": float(p.mean()),
                                "missing": self.missing, "stored": stored,
                                "scored_now": scored_now, "neutral": neutral,
                                "other_keys": len(others), "key": self.key}
        if notes:
            info["warnings"] = notes
        if self.note is not None:
            info["note"] = self.note
        return lam, p, info

    def _warn(self) -> str:
        message = (f"credibility: the index holds no stored credibility score of this model "
                   f"for some candidates, so they are scored at query time (slow on a first "
                   f"query); add the scores with `{command(self.index, self.model_path)}`")
        warnings.warn(message, UnscoredCredibilityWarning, stacklevel=4)
        return message

    def _score_now(self, batch: Candidates, rows: list[int]) -> np.ndarray:
        """``P(credible)`` of ``rows`` from their text, url, title (and stored vectors)."""
        texts = batch.column("text")
        missing = [str(batch.doc_ids[i]) for i in rows if not isinstance(texts[i], str)]
        if missing:
            raise StageError(f"LearnedCredibilityPrior needs document text; {len(missing)} "
                             f"candidates have none (e.g. {missing[0]!r}): fill the meta "
                             "column 'text' (retrieve with with_text=True)")
        urls = [None if u is None else str(u) for u in batch.column("url")[rows]]
        sub = [str(texts[i]) for i in rows]
        if isinstance(self.model, CredibilityModel) or hasattr(self.model, "embedding_source"):
            titles = [t if isinstance(t, str) else None for t in batch.column("title")[rows]]
            vectors = None if batch.vectors is None else batch.vectors[rows]
            p = self.model(sub, urls, titles=titles, vectors=vectors)  # type: ignore[call-arg]  # a model with those inputs (the isinstance/attribute test above)
        else:
            p = self.model(sub, urls)
        p = np.asarray(p, dtype=np.float64).reshape(-1)
        if len(p) != len(rows):
            raise StageError(f"credibility model returned {len(p)} probabilities; expected "
                             f"{len(rows)} (one per candidate)")
        return p

    def config(self) -> dict[str, Any]:
        """The floor applied (the model file's where none was given: the pipeline's spec
        keeps ``floor: null``), the stored-score coverage and, for a fitted model, its
        configuration (a model file: its summary, the file under ``model`` as the input named
        it)."""
        given = self.params()
        cfg: dict[str, Any] = {"floor": self.floor, "missing": self.missing}
        if self.coverage is not None:
            cfg["stored_scores"] = {"documents": self.coverage[1], "scored": self.coverage[0]}
        summary = getattr(self.model, "summary", None)
        if callable(summary):
            cfg.update(summary())
            if self.trained_on is not None:
                cfg["trained_on"] = self.trained_on
            if isinstance(given.get("model"), str):
                cfg["model"] = given["model"]
        elif isinstance(self.model, CredibilityModel):
            cfg["model"] = self.model.config.to_dict()
            cfg["excluded_topics"] = list(self.model.excluded)
        return cfg


def _probability(value: Any) -> bool:
    """Whether a stored payload value is a probability (a finite number in ``[0, 1]``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    return math.isfinite(float(value)) and 0.0 <= float(value) <= 1.0
