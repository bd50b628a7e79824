"""Document text made safe to show on a terminal: its control characters made visible.

A page's title or text may hold terminal control sequences (``ESC [ 2 J`` clears the screen,
``ESC ] 0 ; … BEL`` sets the window title, OSC 8 plants a link). Indexed as it came (the
index keeps a document's text whole), such text reached the terminal raw through the human
output of ``credrank search`` and ``credrank context``. What those commands show people goes
through :func:`visible`: every C0 control but newline and tab becomes its Unicode Control
Picture (``ESC`` → ``␛``), DEL becomes ``␡`` and a C1 control ``�``. ``--json`` is untouched
(JSON escapes them itself), and so is a prompt written to a pipe or a file: that is data.
"""

from __future__ import annotations

from typing import Any

#: control character → what is shown instead (C0 but \n and \t, DEL, C1)
_SHOWN = {**{c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)},
          0x7F: 0x2421, **{c: 0xFFFD for c in range(0x80, 0xA0)}}


def visible_text(text: str) -> str:
    """``text`` with its control characters made visible (module docstring)."""
    return text.translate(_SHOWN)


def visible(value: Any) -> Any:
    """``value`` (an answer document: dicts, lists, strings) with every string's control
    characters made visible; a copy where anything changed, other values as they are."""
    if isinstance(value, str):
        return visible_text(value)
    if isinstance(value, dict):
        return {k: visible(v) for k, v in value.items()}
    if isinstance(value, list):
        return [visible(v) for v in value]
    return value
