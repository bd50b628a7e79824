"""``credrank.toml``: defaults for the options a user would otherwise repeat on every command.

The file is the nearest ``credrank.toml`` from the current directory up (or a
``pyproject.toml`` with a ``[tool.credrank]`` table, whichever comes first), or the one named
by ``credrank --config FILE`` / ``CREDRANK_CONFIG``. Keys are the commands' long option names
(``index``, ``priors``, ``table``, ``pipeline``, ``top-k`` or ``top_k``, ``embedder``, …;
``tables`` is ``table``); a key at the top level is a default for every command that has that
option, a key in a ``[search]`` (or ``[priors.show]``) table for that command alone, and the
more specific one wins (``demo`` takes only its own table: its ``--index`` is where it writes
the demo corpus)::

    index = "./idx"
    priors = "aggressive"
    table = ["domains.csv"]

    [search]
    top-k = 5

Explicit flags always win (the file only supplies click's ``default_map``). Relative paths are
relative to the file's folder. A ``pipeline`` from the file is left out when the command line
gives a stage option (``--priors``, ``--select``, …), and the file's stage options are left
out when a pipeline is in use, so a flag never collides with the file's other half. The first
time the file supplies a value, ``credrank: defaults from PATH`` is said on stderr. A key of a
command's table that is no option of that command is an error naming the file and the key.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin

CONFIG_NAME = "credrank.toml"
#: other spellings a user may write for an option
ALIASES = {"tables": "table"}
#: commands the top-level keys do not apply to (only their own table): `demo --index` is
#: where the demo writes its own corpus, never the user's index
OWN_TABLE_ONLY = frozenset({"demo"})


def shortcut_names() -> frozenset[str]:
    """The options that build the pipeline when no --pipeline is given: the shortcuts of the
    one table (:data:`credrank.pipeline.shortcuts.SHORTCUTS`) but ``top_k`` and ``fetch_k``,
    which may come with a pipeline (imported when a file sets ``pipeline``)."""
    from credrank.pipeline.shortcuts import SHORTCUTS, WITH_PIPELINE

    return frozenset(SHORTCUTS) - frozenset(WITH_PIPELINE)


class ConfigError(ValueError):
    """A defaults file that cannot be read or names something that does not exist."""


@dataclass
class Config:
    """A defaults file: its ``path`` and its table (a pyproject's ``[tool.credrank]``)."""

    path: Path
    table: dict[str, Any]
    said: bool = field(default=False, compare=False)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def note(self) -> None:
        """Say once on stderr which file supplied defaults."""
        if not self.said:
            self.said = True
            print(f"credrank: defaults from {self.path}", file=sys.stderr)


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def load_config(path: Path) -> Config:
    """The defaults of ``path``: a ``credrank.toml`` (the whole file) or a
    ``pyproject.toml`` (its ``[tool.credrank]`` table, which must exist)."""
    path = path.expanduser().resolve()
    data = _read(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("credrank")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: no [tool.credrank] table")
        return Config(path, table)
    return Config(path, data)


def find_config(start: Path) -> Config | None:
    """The nearest ``credrank.toml``, or ``pyproject.toml`` with ``[tool.credrank]``, in
    ``start`` or a folder above it; ``None`` when there is none. A ``pyproject.toml``
    without the table (or one that does not parse: it is not ours) is passed over."""
    start = start.resolve()
    for folder in (start, *start.parents):
        own = folder / CONFIG_NAME
        if own.is_file():
            return load_config(own)
        project = folder / "pyproject.toml"
        if project.is_file():
            try:
                table = _read(project).get("tool", {}).get("credrank")
            except ConfigError:
                continue
            if isinstance(table, dict):
                return Config(project.resolve(), table)
    return None


def command_defaults(config: Config, group: Any) -> _Defaults:
    """The ``default_map`` of the root group ``group`` for ``config``."""
    return _Defaults(config, (), group)


def _keys(param: Any) -> list[str]:
    """The names a file may give ``param`` by: its long options and its Python name."""
    names = [o[2:].replace("-", "_") for o in param.opts if o.startswith("--")]
    return [*names, param.name]


def _norm(key: str) -> str:
    key = key.replace("-", "_")
    return ALIASES.get(key, key)


def _is_path(param: Any) -> bool:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if get_origin(annotation) in (list, tuple):
        annotation = (get_args(annotation) or (None,))[0]
    return isinstance(annotation, type) and issubclass(annotation, Path)


class _Defaults(Mapping[str, Any]):
    """click's ``default_map`` for one command (or group) at ``where`` (its name path): a
    subcommand's map for a subcommand name, else the file's value for a parameter name."""

    def __init__(self, config: Config, where: tuple[str, ...], command: Any) -> None:
        self.config, self.where, self.command = config, where, command
        self._options = {p.name: p for p in getattr(command, "params", ())
                         if getattr(p, "param_type_name", "") == "option" and p.name}
        self._sections = self._section_chain()
        if not hasattr(command, "commands") and where:
            self._check_own_section()

    # -- the file's tables ------------------------------------------------------------------
    def _section_chain(self) -> list[dict[str, Any]]:
        """The tables that apply here, most specific first: ``[a.b]``, ``[a]``, top level."""
        table = self.config.table
        chain = [] if self.where[:1] and self.where[0] in OWN_TABLE_ONLY else [table]
        for name in self.where:
            sub = table.get(name)
            if not isinstance(sub, dict):
                break
            table = sub
            chain.append(table)
        return chain[::-1]

    def _check_own_section(self) -> None:
        own: Any = self.config.table
        for name in self.where:
            own = own.get(name) if isinstance(own, dict) else None
        if not isinstance(own, dict):  # no table of its own
            return
        known = {_norm(k) for p in self._options.values() for k in _keys(p)}
        for key, value in own.items():
            if not isinstance(value, dict) and _norm(key) not in known:
                print(f"error: {self.config.path}: [{'.'.join(self.where)}] {key!r}: no such "
                      f"option of credrank {' '.join(self.where)}", file=sys.stderr)
                import typer

                raise typer.Exit(2)

    def _lookup(self, param: Any) -> tuple[bool, Any]:
        wanted = {_norm(k) for k in _keys(param)}
        for table in self._sections:
            for key, value in table.items():
                if not isinstance(value, dict) and _norm(key) in wanted:
                    return True, value
        return False, None

    def _file_has(self, name: str) -> bool:
        param = self._options.get(name)
        return param is not None and self._lookup(param)[0]

    # -- precedence -------------------------------------------------------------------------
    def _from_command_line(self, names: Any) -> bool:
        import importlib

        import typer

        # click's, or the copy typer vendors (whichever typer.Context derives from)
        base = next(c for c in typer.Context.__mro__
                    if c.__name__ == "Context" and c.__module__.endswith(".core"))
        core = sys.modules[base.__module__]
        here = importlib.import_module(f"{core.__package__}.globals")
        ctx = here.get_current_context(silent=True)
        if ctx is None or ctx.command is not self.command:
            return False
        commandline = core.ParameterSource.COMMANDLINE
        return any(ctx.get_parameter_source(n) == commandline for n in names)

    def _withheld(self, name: str) -> bool:
        """Whether the file's value for ``name`` gives way to the command line (module
        docstring: a pipeline and the stage shortcuts never meet)."""
        if "pipeline" not in self._options:
            return False
        names = shortcut_names()
        shortcuts = [n for n in names if n in self._options]
        if name == "pipeline":
            return self._from_command_line(shortcuts)
        if name in names:
            return self._from_command_line(["pipeline"]) or (
                self._file_has("pipeline") and not self._from_command_line(shortcuts))
        return False

    # -- the value --------------------------------------------------------------------------
    def _value(self, param: Any, value: Any) -> Any:
        if getattr(param, "multiple", False) and not isinstance(value, list):
            value = [value]
        if isinstance(value, list):
            return [self._path(param, v) for v in value]
        return self._path(param, value)

    def _path(self, param: Any, value: Any) -> Any:
        """A relative path is relative to the file's folder (a path option, or a text option
        whose value names a file there, such as ``priors = "priors.toml"``)."""
        if not isinstance(value, str) or not value or Path(value).is_absolute():
            return value
        candidate = self.config.folder / Path(value).expanduser()
        if _is_path(param) or candidate.exists():
            return str(candidate)
        return value

    # -- Mapping ----------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        commands = getattr(self.command, "commands", None)
        if commands is not None and key in commands:
            return _Defaults(self.config, (*self.where, key), commands[key])
        param = self._options.get(key)
        if param is None:
            return default
        found, value = self._lookup(param)
        if not found or self._withheld(key):
            return default
        self.config.note()
        return self._value(param, value)

    def __getitem__(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)


__all__ = ["CONFIG_NAME", "Config", "ConfigError", "command_defaults", "find_config",
           "load_config"]
