"""Feedback-updated source priors: bounded, versioned, logged and reversible (seed 004).

Seed 004 updates the priors after each query from feedback, and says itself that its feedback
came from an oracle (ground-truth labels), which is not a deployable mechanism. This module keeps
the update rule and adds what a product needs around it:

* **bounded** steps: one update moves a prior by at most ``max_change`` and never outside
  ``[ε, 1]`` (see :meth:`FeedbackPriors.update` for the rule);
* **versioned**: every change is a new version in ``<store>/priors.json`` (timestamp, author,
  reason, feedback counts, the full table of per-type and per-source priors);
* **logged**: one JSON line per event is appended to ``<store>/audit.jsonl`` (never rewritten);
* **reversible**: :meth:`FeedbackPriors.rollback` restores any earlier version as a new one.

:class:`FeedbackPrior` is the stage that reads the store (per-source prior first, then per-type).
:func:`simulate_oracle_feedback` reproduces the seed's oracle experiment.

Concurrent writers (several processes, or several ``FeedbackPriors`` objects on one folder) are
safe: every read-modify-write (creation, :meth:`~FeedbackPriors.update`,
:meth:`~FeedbackPriors.rollback`) holds an exclusive ``fcntl.flock`` on ``<store>/priors.lock``
and re-reads the store under it, so no update is lost and version numbers never repeat. The
store file is replaced atomically (a unique temporary file in the same folder, flushed and
fsynced, then ``os.replace`` and an fsync of the folder); audit lines are fsynced too. Readers
take no lock: they see the old or the new file, never half of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.files import atomic_write_text
from credrank.core.pipeline import Stage
from credrank.core.validation import (
    check_bool,
    check_choice,
    check_int,
    check_probability,
    check_real,
    check_str,
)
from credrank.documents.schema import SOURCE_TYPES
from credrank.signals.prior import PriorTable, load_priors

FORMAT = "credrank-feedback-priors/1"
STORE_FILE = "priors.json"
AUDIT_FILE = "audit.jsonl"
LOCK_FILE = "priors.lock"

#: one feedback item: (source_type, source_id or None, relevant)
Feedback = tuple[str, str | None, bool]


class FeedbackStoreError(ValueError):
    """A feedback store is missing, unreadable or inconsistent."""


def _now() -> datetime:
    return datetime.now(UTC)


def check_step(step: object) -> float:
    """Validate the learning rate η ∈ (0, 0.5]."""
    return check_real("feedback step", step, 0.0, 0.5, open_low=True)


def check_epsilon(epsilon: object, *, error: type[Exception] = ValueError) -> float:
    """Validate the floor ε of every prior, ε ∈ (0, 1)."""
    return check_probability("epsilon", epsilon, open_low=True, open_high=True, error=error)


def check_max_change(max_change: object, *, error: type[Exception] = ValueError) -> float:
    """Validate the per-update cap on one prior's change, in (0, 1]."""
    return check_probability("max_change", max_change, open_low=True, error=error)




def feedback_move(prior: float, n_relevant: int, n_total: int, step: float, max_change: float,
                  epsilon: float) -> float:
    """One bounded move of one prior from ``n_total`` feedback items (seed 004's update).

    ``λ ← clip(λ + clamp(η_n · (r̄ − λ), −c, c), ε, 1)`` with ``r̄ = n_relevant / n_total`` the
    share of relevant items (target 1 for relevant, 0 for non-relevant, averaged),
    ``η_n = 1 − (1 − η)^n`` (the same as ``n`` successive steps of size η toward one target, but
    independent of the order of mixed items), ``c = max_change`` the per-update cap. With
    ``n_total = 0`` the prior is returned unchanged (declared: no evidence, no move).
    """
    if n_total <= 0:
        return float(prior)
    target = n_relevant / n_total
    rate = 1.0 - (1.0 - step) ** n_total
    delta = min(max(rate * (target - prior), -max_change), max_change)
    return float(min(max(prior + delta, epsilon), 1.0))


def _check_feedback(feedback: Iterable[Feedback]) -> list[Feedback]:
    """Validate feedback items ``(source_type, source_id or None, relevant)``; return them as
    a list with ``relevant`` a plain bool."""
    items = []
    for i, item in enumerate(feedback):
        if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 3:
            raise ValueError(f"feedback[{i}]: expected (source_type, source_id or None, "
                             f"relevant), got {item!r}")
        stype, sid, relevant = item
        check_choice(f"feedback[{i}] source_type", stype, SOURCE_TYPES)
        if sid is not None:
            check_str(f"feedback[{i}] source_id", sid, what="a non-empty string or None")
        items.append((stype, sid, check_bool(f"feedback[{i}] relevant", relevant)))
    return items


class FeedbackPriors:
    """A versioned store of per-type and per-source priors updated from relevance feedback.

    ``FeedbackPriors(directory, base)`` creates the store from ``base`` (a
    :class:`~credrank.signals.prior.PriorTable` or a preset name) when ``directory`` holds none,
    and loads it otherwise (``base`` may then be omitted; if given it must equal the stored
    base). ``epsilon`` (ε, the floor of every prior, in (0, 1); default 0.01) and
    ``max_change`` (the cap on one update's change of one prior, in (0, 1]; default 0.05) are
    fixed at creation and stored; when loading, values given must equal the stored ones. ``clock``
    supplies timestamps (tests pass a fixed one).
    """

    def __init__(self, directory: str | Path, base: PriorTable | str | None = None, *,
                 epsilon: float | None = None, max_change: float | None = None,
                 author: str = "credrank",
                 reason: str = "initial priors", clock: Callable[[], datetime] = _now):
        self.directory = Path(directory)
        self.clock = clock
        path = self.directory / STORE_FILE
        if path.exists():
            self._open_existing(path, base, epsilon, max_change)
            return
        if base is None:
            raise FeedbackStoreError(f"{path}: no feedback store here; pass base= (a PriorTable "
                                     "or preset name) to create one")
        table = load_priors(base) if isinstance(base, str) else base
        if not isinstance(table, PriorTable):
            raise ValueError(f"base: expected a PriorTable or preset name, got {base!r}")
        eps = check_epsilon(0.01 if epsilon is None else epsilon)
        cap = check_max_change(0.05 if max_change is None else max_change)
        values = {t: float(table[t]) for t in SOURCE_TYPES}
        low = {t: v for t, v in values.items() if v < eps}
        if low:
            raise ValueError(f"base: priors {low} are below epsilon={eps}; lower "
                             "epsilon or raise them")
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._locked():
            if path.exists():  # another writer created it while we waited for the lock
                self._open_existing(path, base, epsilon, max_change)
                return
            self.epsilon, self.max_change, self.base = eps, cap, values
            self.base_name = table.name
            self.versions: list[dict[str, Any]] = []
            self._commit("init", dict(self.base), {}, author, reason, counts={}, changes={})

    def _open_existing(self, path: Path, base: PriorTable | str | None,
                       epsilon: float | None, max_change: float | None) -> None:
        self._load(path)
        if base is not None:
            table = load_priors(base) if isinstance(base, str) else base
            if {t: float(table[t]) for t in SOURCE_TYPES} != self.base:
                raise FeedbackStoreError(
                    f"{path}: the store exists with a different base table; open it "
                    "without base= to load it, or use another directory")
        for label, given, stored in (("epsilon", epsilon, self.epsilon),
                                     ("max_change", max_change, self.max_change)):
            if given is not None and float(given) != stored:
                raise FeedbackStoreError(f"{path}: {label}={given!r} differs from the "
                                         f"stored {label}={stored}; it is fixed at creation")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store's exclusive lock (``fcntl.flock`` on ``<store>/priors.lock``)."""
        with (self.directory / LOCK_FILE).open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _reload(self) -> None:
        """Re-read the store from disk (call under the lock, before a read-modify-write)."""
        path = self.directory / STORE_FILE
        if not path.exists():
            raise FeedbackStoreError(f"{path}: the feedback store has disappeared")
        self._load(path)

    # ------------------------------------------------------------------ persistence
    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise FeedbackStoreError(f"{path}: cannot read the feedback store: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise FeedbackStoreError(f"{path}: expected a store with format {FORMAT!r}")
        try:
            self.epsilon = check_epsilon(data["epsilon"])
            self.max_change = check_max_change(data["max_change"])
            self.base = {t: float(data["base"]["values"][t]) for t in SOURCE_TYPES}
            self.base_name = str(data["base"]["name"])
            self.versions = list(data["versions"])
            for v in self.versions:
                PriorTable("stored", v["types"])  # validates every stored table
                for key, x in v["sources"].items():
                    check_probability(f"version {v['version']} source prior {key!r}", x,
                                      open_low=True)
        except (KeyError, TypeError, ValueError) as exc:
            raise FeedbackStoreError(f"{path}: malformed feedback store: {exc!r}") from exc
        if not self.versions or [v["version"] for v in self.versions] != list(
                range(len(self.versions))):
            raise FeedbackStoreError(f"{path}: versions must be numbered 0, 1, 2, ...")

    def _commit(self, event: str, types: dict[str, float], sources: dict[str, float],
                author: str, reason: str, *, counts: dict[str, Any],
                changes: dict[str, Any], restored_from: int | None = None) -> int:
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        version = len(self.versions)
        record: dict[str, Any] = {
            "version": version,
            "parent": version - 1 if version else None,
            "event": event,
            "timestamp": self.clock().isoformat(),
            "author": author,
            "reason": reason,
            "counts": counts,
            "types": types,
            "sources": dict(sorted(sources.items())),
        }
        if restored_from is not None:
            record["restored_from"] = restored_from
        self.versions.append(record)
        data = {
            "format": FORMAT,
            "epsilon": self.epsilon,
            "max_change": self.max_change,
            "base": {"name": self.base_name, "values": self.base},
            "current": version,
            "versions": self.versions,
        }
        try:
            atomic_write_text(self.directory / STORE_FILE,
                          json.dumps(data, indent=1, ensure_ascii=False))
        except BaseException:
            self.versions.pop()  # not stored: keep the object in step with the disk
            raise
        line = {k: record[k] for k in ("version", "parent", "event", "timestamp", "author",
                                       "reason", "counts")}
        if restored_from is not None:
            line["restored_from"] = restored_from
        line["changes"] = changes
        with (self.directory / AUDIT_FILE).open("a", encoding="utf-8") as log:
            log.write(json.dumps(line, ensure_ascii=False) + "\n")
            log.flush()
            os.fsync(log.fileno())
        return version

    # ------------------------------------------------------------------ reading
    @property
    def current(self) -> int:
        """The latest version number."""
        return len(self.versions) - 1

    def record(self, version: int | None = None) -> dict[str, Any]:
        """The stored record of ``version`` (default: the latest); treat it as read-only."""
        if version is None:
            return self.versions[-1]
        return self.versions[check_int("version", version, 0, self.current)]

    def table(self, version: int | None = None) -> PriorTable:
        """The per-type priors of ``version`` (default: the latest) as a PriorTable."""
        v = self.record(version)
        return PriorTable(f"feedback@v{v['version']}", dict(v["types"]))

    def source_priors(self, version: int | None = None) -> dict[str, float]:
        """The per-source priors of ``version`` (default: the latest)."""
        return dict(self.record(version)["sources"])

    def history(self) -> list[dict[str, Any]]:
        """Every version record, oldest first (copies)."""
        return [json.loads(json.dumps(v)) for v in self.versions]

    def audit(self) -> list[dict[str, Any]]:
        """The parsed lines of the append-only audit log.

        Raises :class:`FeedbackStoreError` naming the file and line of an unreadable entry.
        """
        path = self.directory / AUDIT_FILE
        if not path.exists():
            return []
        entries = []
        try:
            with path.open(encoding="utf-8") as log:
                for number, line in enumerate(log, start=1):
                    if not line.strip():
                        continue
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise FeedbackStoreError(f"{path}:{number}: corrupt audit entry: "
                                                 f"{exc.msg}") from None
                    if not isinstance(entry, dict):
                        raise FeedbackStoreError(f"{path}:{number}: corrupt audit entry: "
                                                 "expected a JSON object")
                    entries.append(entry)
        except (OSError, UnicodeDecodeError) as exc:
            raise FeedbackStoreError(f"{path}: cannot read the audit log: {exc}") from exc
        return entries

    # ------------------------------------------------------------------ writing
    def update(self, feedback: Iterable[Feedback], step: float = 0.1, *,
               author: str = "feedback", reason: str = "") -> int:
        """Apply one round of feedback and store the result as a new version; return it.

        ``feedback``: ``(source_type, source_id or None, relevant)`` items. Every prior an item
        involves (its type's, and its source's when ``source_id`` is given) moves once by
        :func:`feedback_move` over all items that involve it: toward 1 for relevant, toward 0
        for non-relevant, by ``η_n = 1 − (1 − η)^n`` of the gap to the share of relevant
        items, at most ``max_change``, clipped to ``[ε, 1]``. All moves are computed from the
        state before the update. A source seen for the first time starts from its type's
        prior (the type of its first item in this round). An empty round is still a version
        (it records that feedback was asked for and none came).
        """
        eta = check_step(step)
        items = _check_feedback(feedback)
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        with self._locked():
            self._reload()
            return self._update(items, eta, author, reason)

    def _update(self, items: list[Feedback], eta: float, author: str, reason: str) -> int:
        state = self.versions[-1]
        types, sources = dict(state["types"]), dict(state["sources"])
        by_type: dict[str, Counter[bool]] = {}
        by_source: dict[str, Counter[bool]] = {}
        source_start: dict[str, float] = {}
        for stype, sid, relevant in items:
            by_type.setdefault(stype, Counter())[relevant] += 1
            if sid is not None:
                by_source.setdefault(sid, Counter())[relevant] += 1
                source_start.setdefault(sid, sources.get(sid, state["types"][stype]))
        changes: dict[str, dict[str, list[float]]] = {"types": {}, "sources": {}}
        for stype, c in by_type.items():
            old = state["types"][stype]
            types[stype] = feedback_move(old, c[True], c[True] + c[False], eta,
                                         self.max_change, self.epsilon)
            changes["types"][stype] = [old, types[stype]]
        for sid, c in by_source.items():
            old = source_start[sid]
            sources[sid] = feedback_move(old, c[True], c[True] + c[False], eta,
                                         self.max_change, self.epsilon)
            changes["sources"][sid] = [old, sources[sid]]
        n_rel = sum(1 for _, _, r in items if r)
        counts = {
            "items": len(items), "relevant": n_rel, "non_relevant": len(items) - n_rel,
            "step": eta,
            "by_type": {t: {"relevant": c[True], "non_relevant": c[False]}
                        for t, c in sorted(by_type.items())},
            "sources": len(by_source),
        }
        return self._commit("update", types, sources, author, reason, counts=counts,
                            changes=changes)

    def rollback(self, version: int, *, author: str = "credrank", reason: str = "") -> int:
        """Restore the tables of ``version`` as a new version (the log keeps everything)."""
        check_int("version", version, 0)
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        with self._locked():
            self._reload()
            return self._rollback(version, author, reason)

    def _rollback(self, version: int, author: str, reason: str) -> int:
        target = self.record(version)
        state = self.versions[-1]
        changes = {
            "types": {t: [state["types"][t], target["types"][t]] for t in SOURCE_TYPES
                      if state["types"][t] != target["types"][t]},
            "sources": {s: [state["sources"].get(s), target["sources"].get(s)]
                        for s in sorted(set(state["sources"]) | set(target["sources"]))
                        if state["sources"].get(s) != target["sources"].get(s)},
        }
        return self._commit("rollback", dict(target["types"]), dict(target["sources"]),
                            author, reason or f"rollback to version {target['version']}",
                            counts={}, changes=changes, restored_from=int(target["version"]))


class FeedbackPrior(Stage):
    """Factor ``name`` = the store's prior: per-source (``source_id``) first, then per-type.

    Reads the latest version at each call unless ``version`` pins one.
    ``batch.info["feedback_prior"]`` records the version used and how many candidates took a
    per-source prior.
    """

    def __init__(self, store: FeedbackPriors, *, name: str = "prior", version: int | None = None):
        if not isinstance(store, FeedbackPriors):
            raise ValueError(f"store: expected a FeedbackPriors, got {type(store).__name__}")
        self.store, self.name, self.version = store, name, version

    def transform(self, batch: Candidates) -> Candidates:
        record = self.store.record(self.version)
        values = self.store.table(record["version"]).lookup(batch.column("source_type"))
        sources = record["sources"]
        hits = 0
        for i, sid in enumerate(batch.column("source_id")):
            if isinstance(sid, str) and sid in sources:
                values[i] = sources[sid]
                hits += 1
        return (batch.with_factor(self.name, values, low=0.0, high=1.0)
                .with_info(feedback_prior={"version": record["version"], "source_hits": hits}))

    def config(self) -> dict[str, Any]:
        return {"store": str(self.store.directory), "version": self.version}
