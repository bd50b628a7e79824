"""Optional dependencies (the extras of ``pyproject.toml``): the one error a feature raises when
the extra it needs is not installed, naming what to install.

The base install (``pip install credrank``) indexes, searches and serves; evaluation measures
(``eval``: ir-measures, pytrec-eval-terrier), figures (``plots``: matplotlib) and Parquet corpora
(``parquet``: pyarrow) are extras, imported inside the functions that need them."""

from __future__ import annotations

import importlib.util


class MissingExtraError(RuntimeError):
    """The optional dependency of a feature is not installed; the message names the extra
    (``pip install 'credrank[EXTRA]'``). A ``RuntimeError``: the commands report it as
    ``error: …``, exit 2."""

    def __init__(self, what: str, extra: str, module: str | None = None) -> None:
        missing = f" ({module} is not installed)" if module else ""
        super().__init__(f"{what} needs the '{extra}' extra{missing}: "
                         f"pip install 'credrank[{extra}]'")
        self.extra = extra


def missing_extra(what: str, extra: str, exc: ImportError) -> MissingExtraError:
    """The error to raise from ``exc``, the failed import of ``what``'s optional dependency."""
    return MissingExtraError(what, extra, exc.name)


def require_extra(module: str, extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless ``module`` can be imported (found, not
    imported: for a check before a long run that needs it at the end)."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(what, extra, module)


__all__ = ["MissingExtraError", "missing_extra", "require_extra"]
