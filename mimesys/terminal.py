"""Text from files and peers on its way to a terminal.

A plan, a trace or an agent's reply is someone else's: a name, a provenance entry or an error
that carries an escape sequence would move the cursor, rewrite what is on screen, retitle the
window or (on some terminals) answer back into the shell's input when printed raw. Every such
string passes through `printable` before a command prints it.
"""

from __future__ import annotations

import unicodedata


def printable(text, *, multiline: bool = False) -> str:
    """`text` (str() of it) with every control, format, private-use, unassigned or surrogate
    character and the line and paragraph separators written as a Python escape (ESC -> \\x1b,
    U+202E -> \\u202e); everything else as it is. With `multiline`, newlines are kept."""
    s = str(text)
    if s.isprintable():   # the common case: no C* or Z* character but the space
        return s
    return "".join(c if c.isprintable() or unicodedata.category(c) == "Zs" or (multiline and c == "\n")
                   else c.encode("unicode_escape").decode("ascii") for c in s)
