"""A rich console for untrusted text: every string it turns into text is made visible first,
and none is read as rich markup.

Rich turns each plain string it prints, and each string cell, title or caption of a table
or panel, into text through :meth:`rich.console.Console.render_str`; :class:`SafeConsole`
passes them through :func:`otelcar.safe_text.visible` there, so an escape sequence or a bidi
override from a trace reaches the terminal as ``\\x1b`` or ``\\u202e``, never raw. Its
markup is off unless asked for: trace text, a note or a label such as ``[agent]`` or
``[#3 lookup_order]`` prints as it is (rich would take it for a style tag and drop it), and
no trace can style the output. otelcar's own output uses styles, never markup. Rich ``Text``
built by hand is made safe where it is built (:func:`otelcar.render.untrusted_text`).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from otelcar.safe_text import visible


class SafeConsole(Console):
    """A :class:`rich.console.Console` whose strings are shown through :func:`visible`, with
    markup off unless ``markup=True`` is passed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().__init__(*args, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)
