"""``credrank.toml``: defaults for the options a user would otherwise repeat on every command.

The file is the one named by ``credrank --config FILE`` / ``CREDRANK_CONFIG``, else the
*discovered* one: ``credrank.toml`` in the current directory, else a ``pyproject.toml`` there
with a ``[tool.credrank]`` table, else the user's ``$XDG_CONFIG_HOME/credrank/credrank.toml``
(``~/.config/credrank/credrank.toml``); folders above the current one are never searched, and
``CREDRANK_NO_CONFIG=1`` turns discovery off (issue 37, N4). Configuration is trusted only
where the user put it:

* a discovered file must be a regular file owned by the current user and writable by nobody
  else (group or others); otherwise every command stops with ``error: PATH: refused: …``
  (exit 2) saying why and how to fix it (``chmod go-w``, or ``--config PATH``);
* a discovered file may not set where ``serve`` listens (``host``, ``port``), an engine URL
  (``qdrant-url``), where an API key is read from (``api-key-env``, ``qdrant-api-key-env``),
  nor a path a command writes (``rejects``, ``trec-run``, ``out``, ``template``, ``cache``,
  ``report``, ``checkpoint``, ``dir``; the ``index`` of ``index``/``optimize``/``serve``/
  ``demo``, ``qdrant-path`` of ``index``/``serve`` and ``priors-store`` of ``serve``) outside
  its own folder: the command stops with an error naming the key and the flag to pass instead
  (the flag given, the file's value is never consulted). A file named with ``--config`` is
  the user's explicit choice and is taken whole;
* every file is read by the hardened reader (:mod:`credrank.core.structured`): UTF-8 only,
  at most :data:`MAX_CONFIG_BYTES`, nesting bounded; a malformed one is a one-line
  ``error: PATH: …`` (exit 2), never a traceback (N10).

Keys are the commands' long option names
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
relative to the file's folder, also a ``KEY=PATH`` piece of a text value that names a file
there (``freshness = "half_life=1y,config=fr.toml"``, a ``set`` item). A ``pipeline`` from
the file is left out when the command line gives a stage option (``--priors``, ``--select``,
…), and the file's stage options are left out when a pipeline is in use, so a flag never
collides with the file's other half. The first
time the file supplies a value, ``credrank: defaults from PATH`` is said on stderr. What no
command reads is an error naming the file, the table and the key, whatever command runs
(:func:`check_keys`): a key that is no option (of any command at the top level, of the
table's command in a table), a table that is no command, a table where a value belongs, and
one option written twice in two spellings.
"""

from __future__ import annotations

import difflib
import os
import stat
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, get_args, get_origin

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
    discovered: bool = False
    said: bool = field(default=False, compare=False)
    #: a help has said that it shows no default from a wrong value of the file
    warned: bool = field(default=False, compare=False)
    #: where the table is in its file: ``tool.credrank`` in a ``pyproject.toml``
    prefix: str = ""

    @property
    def folder(self) -> Path:
        return self.path.parent

    def label(self, where: Sequence[str]) -> str:
        """The table ``where`` as the file writes it, with a space: ``[search] ``,
        ``[tool.credrank.search] ``; ``""`` for a credrank.toml's top level."""
        name = ".".join([*([self.prefix] if self.prefix else []), *where])
        return f"[{name}] " if name else ""

    def note(self) -> None:
        """Say once on stderr which file supplied defaults."""
        if not self.said:
            self.said = True
            print(f"credrank: defaults from {self.path}", file=sys.stderr)


#: the most bytes a defaults file may have
MAX_CONFIG_BYTES = 1024 * 1024
#: set (to anything but ``""`` or ``0``) to turn discovery off: only ``--config`` is read
NO_CONFIG_ENV = "CREDRANK_NO_CONFIG"

#: options a *discovered* file may never set (only a flag, or a file named with ``--config``):
#: where a server listens, where an engine is, where a secret is read from
NETWORK = frozenset({"host", "port"})
ENGINE_URLS = frozenset({"qdrant_url"})
KEY_SOURCES = frozenset({"api_key_env", "qdrant_api_key_env"})
#: options that name a file or folder a command writes: a discovered file may set them only
#: to a path inside its own folder
OUTPUTS = frozenset({"rejects", "trec_run", "template", "out", "cache", "report",
                     "checkpoint", "directory"})
#: the same for options that a command writes but others only read (``--index`` of
#: ``credrank index``)
OUTPUTS_OF = {"index": frozenset({"index_dir", "qdrant_path"}), "demo": frozenset({"index_dir"}),
              "optimize": frozenset({"index_dir"}),
              "serve": frozenset({"index_dir", "qdrant_path", "priors_store"})}


def _open_bytes(path: Path, discovered: bool) -> bytes:
    """The bytes of ``path``. A discovered file must be a regular file that the current user
    owns and nobody else may write (checked on the open file, so a swap after the check
    changes nothing); a file named with ``--config`` is the user's choice and is not checked."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) * discovered  # a FIFO never blocks
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.isdir(path):
            raise ConfigError(f"{path}: expected a file, got a directory") from None
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise ConfigError(f"{path}: expected a file, got a directory")
    if discovered:
        try:
            _check_trusted(path, info)
        except ConfigError:
            os.close(fd)
            raise
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: expected a file of at most {MAX_CONFIG_BYTES:,} bytes, "
                          "got a larger one")
    return data


def _check_trusted(path: Path, info: os.stat_result) -> None:
    """Refuse a discovered file that is not a regular file, is owned by another user or is
    writable by its group or by others (issue 37, N4)."""
    hint = f"or name it with --config {path} to use it anyway"
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: refused: not a regular file; remove it, {hint}")
    getuid = getattr(os, "getuid", None)
    if getuid is not None and info.st_uid != getuid():
        raise ConfigError(f"{path}: refused: owned by another user (uid {info.st_uid}), so "
                          f"anyone could have written it; {hint}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "others" if info.st_mode & stat.S_IWOTH else "its group"
        raise ConfigError(f"{path}: refused: writable by {who} (mode "
                          f"{stat.S_IMODE(info.st_mode):04o}), so anyone could have written "
                          f"it; run chmod go-w {path}, {hint}")


def _read(path: Path, discovered: bool = False) -> dict[str, Any]:
    """The TOML table of ``path`` through the hardened reader (:mod:`credrank.core.structured`):
    UTF-8 only, nesting and size bounded; every failure a :class:`ConfigError` naming the file."""
    from credrank.core.structured import decode_utf8, parse_text

    data = _open_bytes(path, discovered)
    text = decode_utf8(data, str(path), error=ConfigError)
    table = parse_text(text, "toml", str(path), error=ConfigError)
    if not isinstance(table, dict):  # tomllib always gives a table; kept for the type
        raise ConfigError(f"{path}: expected a TOML table")
    return table


def load_config(path: Path, discovered: bool = False,
                plugins: Callable[[], Mapping[str, frozenset[str]]] | None = None) -> Config:
    """The defaults of ``path``: a ``credrank.toml`` (the whole file) or a
    ``pyproject.toml`` (its ``[tool.credrank]`` table, which must exist). ``discovered``:
    found rather than named (:func:`find_config`), so checked and restricted. A key no command
    reads is refused (:func:`check_keys`; ``plugins``: the installed plugins' options,
    :func:`credrank.cli.root.plugin_options`)."""
    path = path.expanduser().resolve()
    data = _read(path, discovered)
    if path.name == "pyproject.toml":
        table = _tool_table(path, data)
        if table is None:
            raise ConfigError(f"{path}: no [tool.credrank] table")
        config = Config(path, table, discovered=discovered, prefix="tool.credrank")
    else:
        config = Config(path, data, discovered=discovered)
    check_keys(config, plugins=plugins)
    return config


def _tool_table(path: Path, data: dict[str, Any]) -> dict[str, Any] | None:
    """A pyproject's ``[tool.credrank]`` table, ``None`` when it has none; a ``tool`` or a
    ``tool.credrank`` that is no table is a :class:`ConfigError`."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: tool: expected a table, got {type(tool).__name__}")
    table = tool.get("credrank")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: tool.credrank: expected a table ([tool.credrank]), got "
                          f"{type(table).__name__} {table!r}")
    return table


def user_config_path() -> Path:
    """``$XDG_CONFIG_HOME/credrank/credrank.toml`` (``~/.config/…`` when the variable is unset
    or not an absolute path)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    folder = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return folder / "credrank" / CONFIG_NAME


def discovery_off() -> bool:
    from credrank.cli import env_flag

    return env_flag(NO_CONFIG_ENV)


def find_config(start: Path, plugins: Callable[[], Mapping[str, frozenset[str]]] | None = None
                ) -> Config | None:
    """The defaults file found for a command run in ``start`` (never a folder above it):
    ``start/credrank.toml``, else ``start/pyproject.toml`` with a ``[tool.credrank]`` table,
    else the user's :func:`user_config_path`; ``None`` when there is none or
    ``CREDRANK_NO_CONFIG`` is set. A found file must be the user's own and writable by
    nobody else (:func:`_check_trusted`). A ``pyproject.toml`` without the table is passed
    over, and so is one that does not parse and never names credrank (it is not ours); one
    that names credrank and does not parse, or whose ``tool.credrank`` is no table, is an
    error (it was passed over, and the user's file used instead)."""
    if discovery_off():
        return None
    start = Path(os.path.abspath(start))
    own = start / CONFIG_NAME
    if os.path.lexists(own):
        return load_config(own, discovered=True, plugins=plugins)
    project = start / "pyproject.toml"
    if project.is_file():
        try:
            table = _tool_table(project, _read(project))
        except ConfigError:
            try:
                ours = b"credrank" in project.read_bytes()
            except OSError:
                ours = True
            if ours:
                raise
            table = None
        if table is not None:
            return load_config(project, discovered=True, plugins=plugins)
    user = user_config_path()
    if os.path.lexists(user):
        return load_config(user, discovered=True, plugins=plugins)
    return None


def command_defaults(config: Config, group: Any) -> _Defaults:
    """The ``default_map`` of the root group ``group`` for ``config``."""
    return _Defaults(config, (), group)


def _keys(param: Any) -> list[str]:
    """The names a file may give ``param`` by: its long option (``top-k`` or ``top_k`` for
    ``--top-k``). Its Python name (``index_dir`` for ``--index``) is not one: a second name
    made one option settable twice in one table, the first winning."""
    names = [o[2:].replace("-", "_") for o in param.opts if o.startswith("--")]
    return names or [param.name]


def _norm(key: str) -> str:
    key = key.replace("-", "_")
    return ALIASES.get(key, key)


def option_keys(command: Any) -> frozenset[str]:
    """The names a file may set the options of click command ``command`` by (:func:`_keys`,
    normalised: ``top_k`` for ``--top-k``)."""
    return frozenset(_norm(k) for p in getattr(command, "params", ())
                     if getattr(p, "param_type_name", "") == "option" and p.name
                     for k in _keys(p))


def command_options(where: tuple[str, ...], command: Any) -> dict[str, frozenset[str]]:
    """``"command [subcommand]"`` → :func:`option_keys` for the click command ``command`` at
    the path ``where`` and each of its subcommands, at any depth."""
    found: dict[str, frozenset[str]] = {}
    stack: list[tuple[tuple[str, ...], Any]] = [(where, command)]
    while stack:
        path, here = stack.pop()
        found[" ".join(path)] = option_keys(here)
        stack += [((*path, sub), child) for sub, child in getattr(here, "commands", {}).items()]
    return found


def _suggestion(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'top-k'?)``, in the spelling ``name`` uses (dashes or underscores)."""
    close = difflib.get_close_matches(_norm(name), sorted(known), n=1)
    if not close:
        return ""
    return f" (did you mean {close[0].replace('_', '-') if '-' in name else close[0]!r}?)"


def _kind(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "an array of tables"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "text",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def check_keys(config: Config, options: Mapping[str, frozenset[str]] | None = None,
               plugins: Callable[[], Mapping[str, frozenset[str]]] | None = None) -> None:
    """Refuse (:class:`ConfigError` naming the file, the table and the key) a file that sets
    what no command reads, instead of ignoring it: a top-level key that is no option of any
    command, a table that is no command (``[serch]``), a key of a command's table that is no
    option of that command or of one of its subcommands (a group's table, ``[priors]``, gives
    defaults to its subcommands), a table where a value belongs (``top-k = {…}``) and a value
    where a command's table belongs (``search = 5``, ``[[search]]``), a flag's ``--no-`` form
    (``no-lexical = true``: ``lexical = false``), and one option set twice in one table by
    two spellings (``top-k`` and ``top_k``; ``tables`` and ``table``). ``options``: the
    built-in command paths' option names (default :data:`credrank.cli.helptext.OPTIONS`,
    generated); ``plugins``: those of the installed plugins' commands
    (:func:`credrank.cli.root.plugin_options`; ``None``: none), asked for only when a name is
    not a built-in's. A plugin
    command's table is checked when that command runs (:meth:`_Defaults._check_own_section`),
    as its options are known only once it is loaded."""
    if options is None:
        from credrank.cli.helptext import OPTIONS

        options = OPTIONS
    found: dict[str, frozenset[str]] | None = None

    def plugin_paths() -> Mapping[str, frozenset[str]]:
        nonlocal found
        if found is None:
            found = dict(plugins() if plugins is not None else {})
        return found

    _check_table(config, config.table, (), options, plugin_paths)


def _check_table(config: Config, table: dict[str, Any], where: tuple[str, ...],
                 options: Mapping[str, frozenset[str]],
                 plugin_paths: Callable[[], Mapping[str, frozenset[str]]]) -> None:
    """:func:`check_keys` of ``table``, the table of the command path ``where`` (``()``: the
    file's top level), against ``options`` (command path → option names)."""
    label = config.label(where)

    def refuse(message: str) -> NoReturn:
        raise ConfigError(f"{config.path}: {message}")

    def under(table: Mapping[str, frozenset[str]]) -> set[str]:
        """The option names of the command at ``where`` and of its subcommands (all
        commands' at the top level)."""
        prefix = " ".join(where)
        return {n for path, names in table.items()
                if not where or path == prefix or path.startswith(prefix + " ") for n in names}

    spelled: dict[str, str] = {}
    for key in table:
        name = _norm(key)
        if name in spelled:
            refuse(f"{label}{spelled[name]!r} and {key!r} set the same option; keep one")
        spelled[name] = key
    known = under(options)
    subcommands = {p.split(" ")[len(where)] for p in options
                   if p.split(" ")[:len(where)] == list(where) and len(p.split(" ")) > len(where)}
    for key, value in table.items():
        path = (*where, key)
        command = key in subcommands  # the path of a command: its table may be here
        if isinstance(value, dict):
            if command:
                _check_table(config, value, path, options, plugin_paths)
            elif not where and key in plugin_paths():
                continue  # checked when the plugin's command runs
            elif _norm(key) in known:
                refuse(f"{label}{key!r}: expected a value (text, a number, true or false, or "
                       f"an array of them), got a table")
            else:
                commands = subcommands | (set(plugin_paths()) if not where else set())
                what = (f"no credrank command {key!r}" if not where else
                        f"no command credrank {' '.join(path)}")
                refuse(f"{config.label(path).strip()}: {what}{_suggestion(key, commands)}")
        elif _norm(key) in known:  # an option's value (``index``: an option and a command)
            continue
        elif command or (not where and key in plugin_paths()):
            refuse(f"{label}{key!r}: expected a table ({config.label(path).strip()}) of "
                   f"credrank {' '.join(path)}'s options, got {_kind(value)}")
        else:
            if not where and _norm(key) in under(plugin_paths()):
                continue
            flag = _norm(key)[3:] if _norm(key).startswith("no_") else ""
            if flag in known:
                refuse(f"{label}{key!r}: a flag's --no- form is its false: write "
                       f"{flag.replace('_', '-') if '-' in key else flag} = false")
            if where:
                group = bool(subcommands)
                refuse(f"{label}{key!r}: no such option of credrank {' '.join(where)}"
                       f"{' or of its subcommands' if group else ''}{_suggestion(key, known)}")
            refuse(f"{label}{key!r}: no option of any credrank command has this name"
                   + _suggestion(key, known))


def _click_context() -> tuple[Any, Any]:
    """``(click's core module, the current context or None)``: click's, or the copy typer
    vendors (whichever ``typer.Context`` derives from)."""
    import importlib

    import typer

    base = next(c for c in typer.Context.__mro__
                if c.__name__ == "Context" and c.__module__.endswith(".core"))
    core = sys.modules[base.__module__]
    here = importlib.import_module(f"{core.__package__}.globals")
    return core, here.get_current_context(silent=True)


def from_file(name: str) -> bool:
    """Whether the running command's parameter ``name`` (its Python name: ``index_dir``) took
    its value from a defaults file; an argument written on the command line then wins over
    it where the two exclude each other (a file's ``index`` and ``advise PROFILE``, a file's
    ``queries`` and ``search QUERY``), as every written value does."""
    if "typer" not in sys.modules:
        return False
    core, ctx = _click_context()
    if ctx is None or not isinstance(ctx.default_map, _Defaults):
        return False
    try:
        return bool(ctx.get_parameter_source(name) == core.ParameterSource.DEFAULT_MAP)
    except (KeyError, AttributeError):
        return False


def value_origin(message: str) -> str:
    """`` (from FILE: [table] key)`` when ``message`` opens with an option (``--top-k: …``)
    whose value the running command took from a defaults file, else ``""``: an error about a
    value the user wrote in a file names where it is written, not only the flag it stands
    for."""
    flag = message.split(":", 1)[0].split(" ", 1)[0]
    if not flag.startswith("-") or "typer" not in sys.modules:  # --top-k, and -S items
        return ""
    core, ctx = _click_context()
    defaults = None if ctx is None else ctx.default_map
    if not isinstance(defaults, _Defaults):
        return ""
    for param in ctx.command.params:
        if flag in getattr(param, "opts", ()) and param.name:
            if ctx.get_parameter_source(param.name) != core.ParameterSource.DEFAULT_MAP:
                return ""
            found = defaults._find(param)
            if found is None:
                return ""
            label, key, _ = found
            where = tuple(label.split(".")) if label else ()
            return f" (from {defaults.config.path}: {defaults.config.label(where)}{key})"
    return ""


def _rendering_help() -> bool:
    """Whether click (or typer's rich formatter) is asking for a default to show in a help
    text: ``--help`` shows what the file sets, it never uses it."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(40):
        if frame is None:
            return False
        if frame.f_code.co_name in ("get_help", "format_help", "get_help_record",
                                    "format_options"):
            return True
        frame = frame.f_back
    return False


def _is_path(param: Any) -> bool:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if get_origin(annotation) in (list, tuple):
        annotation = (get_args(annotation) or (None,))[0]
    return isinstance(annotation, type) and issubclass(annotation, Path)


def _value_type(param: Any) -> Any:
    """The Python type of one value of option ``param`` (``int``, ``float``, ``bool``,
    ``str``, ``Path``; ``None`` unless plain): its annotation without ``None`` or ``list``."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else None
    if typing.get_origin(annotation) is list:
        items = typing.get_args(annotation)
        annotation = items[0] if len(items) == 1 else None
    return annotation if annotation in (int, float, bool, str, Path) else None


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
    def _section_chain(self) -> list[tuple[str, dict[str, Any]]]:
        """The tables that apply here, most specific first: ``[a.b]``, ``[a]``, top level
        (each with its name as the file writes it, ``""`` for the top level)."""
        table = self.config.table
        chain = [] if self.where[:1] and self.where[0] in OWN_TABLE_ONLY else [("", table)]
        for i, name in enumerate(self.where):
            sub = table.get(name)
            if not isinstance(sub, dict):
                break
            table = sub
            chain.append((".".join(self.where[:i + 1]), table))
        return chain[::-1]

    def _check_own_section(self) -> None:
        """A plugin command's own table against its options, as :func:`check_keys` checks a
        built-in's when the file is read (a plugin's options are known once it is loaded)."""
        from credrank.cli.helptext import OPTIONS

        if " ".join(self.where) in OPTIONS:
            return
        own: Any = self.config.table
        for name in self.where:
            own = own.get(name) if isinstance(own, dict) else None
        if not isinstance(own, dict):  # no table of its own
            return
        try:
            _check_table(self.config, own, self.where,
                         command_options(self.where, self.command), dict)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            import typer

            raise typer.Exit(2) from None

    def _lookup(self, param: Any) -> tuple[bool, Any]:
        found = self._find(param)
        return (False, None) if found is None else (True, found[2])

    def _find(self, param: Any) -> tuple[str, str, Any] | None:
        """``(table, key, value)`` of the file's value for ``param``, or ``None``."""
        wanted = {_norm(k) for k in _keys(param)}
        for label, table in self._sections:
            for key, value in table.items():
                if not isinstance(value, dict) and _norm(key) in wanted:
                    return label, key, value
        return None

    def _file_has(self, name: str) -> bool:
        param = self._options.get(name)
        return param is not None and self._lookup(param)[0]

    # -- precedence -------------------------------------------------------------------------
    def _from_command_line(self, names: Any) -> bool:
        core, ctx = _click_context()
        if ctx is None or ctx.command is not self.command:
            return False
        commandline = core.ParameterSource.COMMANDLINE
        return any(ctx.get_parameter_source(n) == commandline for n in names)

    def _withheld(self, name: str) -> bool:
        """Whether the file's value for ``name`` gives way to the command line (module
        docstring: a pipeline and the stage shortcuts never meet; a ``--pipeline`` written on
        the command line also takes none of the file's ``top-k``, ``fetch-k`` or ``set``: it
        runs as written, so a replayed ``--json`` output ranks as it did)."""
        if "pipeline" not in self._options:
            return False
        from credrank.pipeline.shortcuts import WITH_PIPELINE

        if name in (*WITH_PIPELINE, "set_param"):  # a spec given on the command line runs
            return self._from_command_line(["pipeline"])  # as written (a --json replayed)
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
        whose value names a file there, such as ``priors = "priors.toml"``; a folder of the
        value's name is no file: ``priors = "current"`` stays the preset beside a folder
        ``current/``)."""
        if not isinstance(value, str) or not value or Path(value).is_absolute():
            return value
        candidate = self.config.folder / Path(value).expanduser()
        if _is_path(param) or candidate.is_file():
            return str(candidate)
        return self._embedded(value)

    def _embedded(self, value: str) -> str:
        """``value`` with each ``KEY=PATH`` piece (comma-separated: ``half_life=1y,config=
        fr.toml``, a ``set`` item ``prior.priors=mine.toml``) of a parameter that names a file
        (:data:`~credrank.pipeline.spec.SPEC_FILE_PARAMS`) made the path in the file's folder
        when it is there, as a path option's is (it was looked for in the current folder);
        other values stay as written (``combine.mode=linear`` beside a file ``linear``)."""
        if "=" not in value:
            return value
        from credrank.pipeline.spec import spec_file_beside

        pieces = []
        for piece in value.split(","):
            key, sep, given = piece.partition("=")
            found = spec_file_beside(key.strip().rpartition(".")[2], given.strip(),
                                     self.config.folder) if sep else None
            pieces.append(piece if found is None else f"{key}={found}")
        return ",".join(pieces)

    # -- Mapping ----------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        commands = getattr(self.command, "commands", None)
        if commands is not None and key in commands:
            return _Defaults(self.config, (*self.where, key), commands[key])
        param = self._options.get(key)
        if param is None:
            return default
        found = self._find(param)
        if found is None or self._withheld(key):
            return default
        wrong = self._wrong_type(param, found)
        if wrong is not None:
            if _rendering_help():  # the help a user reads to mend the file: without it
                if not self.config.warned:
                    self.config.warned = True
                    print(f"warning: {wrong} (the help shows no default from it)",
                          file=sys.stderr)
                return default
            print(f"error: {wrong}", file=sys.stderr)
            import typer

            raise typer.Exit(2)
        value = self._value(param, found[2])
        if self.config.discovered:
            self._check_sensitive(param, found, value)
        self.config.note()
        return value

    def _wrong_type(self, param: Any, found: tuple[str, str, Any]) -> str | None:
        """What is wrong (the file, the table and the key) with a value whose TOML type is not
        the option's, or ``None``: ``top-k = true`` became 1, ``lexical = 1`` turned BM25 on,
        ``priors = 5`` was read as the text "5"; a run is refused (exit 2), a help shows no
        default from it. The command line's validator then checks the value."""
        label, key, value = found
        kind = _value_type(param)
        values = value if isinstance(value, list) and getattr(param, "multiple", False) \
            else [value]
        if getattr(param, "is_flag", False) or kind is bool:
            want, fits = "true or false", lambda v: isinstance(v, bool)
        elif kind is int:
            want, fits = "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
        elif kind is float:
            want = "a number"
            fits = lambda v: isinstance(v, int | float) and not isinstance(v, bool)  # noqa: E731
        elif kind in (str, Path):
            want, fits = "text", lambda v: isinstance(v, str)
        else:
            return None
        bad = next((v for v in values if not fits(v)), None)
        if bad is None:
            return None
        where = self.config.label(tuple(label.split(".")) if label else ())
        return (f"{self.config.path}: {where}{key!r}: expected {want}, got "
                f"{type(bad).__name__} {bad!r}")

    # -- what a discovered file may not set -------------------------------------------------
    def _check_sensitive(self, param: Any, found: tuple[str, str, Any], value: Any) -> None:
        """Refuse (exit 2) a discovered file's value for a listen address, an engine URL, a
        secret's source, or an output path outside the file's folder (issue 37, N4): those
        come from a flag or a file named with ``--config``."""
        name = param.name
        what = None
        if name in NETWORK:
            what = "a network listen address"
        elif name in ENGINE_URLS:
            what = "an engine URL"
        elif name in KEY_SOURCES:
            what = "where an API key is read from"
        elif (name in OUTPUTS or name in OUTPUTS_OF.get(self.where[0] if self.where else "",
                                                         frozenset())) \
                and self._outside(value):
            what = "a path written outside the file's folder"
        if what is None or _rendering_help():
            return
        label, key, _ = found
        flag = next((o for o in param.opts if o.startswith("--")), f"--{name}")
        place = f"[{label}] {key}" if label else key
        print(f"error: {self.config.path}: {place}: {what} is not taken from a discovered "
              f"defaults file; pass {flag} on the command line, or name the file with "
              f"credrank --config {self.config.path}", file=sys.stderr)
        import typer

        raise typer.Exit(2)

    def _outside(self, value: Any) -> bool:
        """Whether a path value (or any of a list) lies outside the file's folder, symbolic
        links followed."""
        values = value if isinstance(value, list) else [value]
        folder = self.config.folder.resolve()
        for v in values:
            if v is None or isinstance(v, bool) or not isinstance(v, (str, Path)):
                continue
            p = Path(v).expanduser()
            if not p.is_absolute():
                p = folder / p
            if not p.resolve().is_relative_to(folder):
                return True
        return False

    def __getitem__(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)


__all__ = ["CONFIG_NAME", "Config", "ConfigError", "check_keys", "command_defaults",
           "command_options", "find_config", "load_config", "option_keys", "value_origin"]
