"""Two small inline-SVG charts with intervals, drawn without any library.

- :func:`curve_chart` — a line through point estimates with a shaded interval band and a
  whisker per point (the commitment curve q_k with its Wilson intervals).
- :func:`bar_chart` — horizontal bars from zero with a whisker per bar (step effects Δ_k,
  Shapley values, culprit shares, mean effects across traces).

Labels and tooltips go through :mod:`otelcar.report.markup`, so they are always escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from otelcar.report.markup import Safe, clip_label, el


@dataclass(frozen=True)
class Point:
    """One estimate with its interval. ``step`` links the mark to ``#step-N``."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    title: str = ""
    css: str = ""
    step: int | None = None


def number(value: float | None, *, signed: bool = False, digits: int = 2) -> str:
    """A number for people: fixed digits, ``+`` for signed values, ``–`` when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def interval(low: float | None, high: float | None, *, signed: bool = False) -> str:
    """``[low, high]`` formatted like :func:`number`."""
    if low is None or high is None:
        return ""
    return f"[{number(low, signed=signed)}, {number(high, signed=signed)}]"


def nice_domain(values: Sequence[float]) -> tuple[float, float]:
    """A value axis spanning zero and ``values``, widened to round multiples of 0.25 (0.5
    when it spans more than 1)."""
    lo, hi = min([0.0, *values]), max([0.0, *values])
    if hi - lo == 0:
        return (0.0, 1.0)
    step = 0.25 if hi - lo <= 1.0 else 0.5
    return (math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step)


def nice_ticks(d0: float, d1: float) -> list[float]:
    """Round tick values from ``d0`` to ``d1`` (4 to 9 of them)."""
    span = d1 - d0
    for step in (0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0):
        if span / step <= 8:
            break
    first = math.ceil(d0 / step - 1e-9) * step
    ticks = []
    t = first
    while t <= d1 + 1e-9:
        ticks.append(round(t, 6) + 0.0)
        t += step
    return ticks


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _f(value: float) -> str:
    return f"{value:.1f}"


def _linked(step: int | None, mark: Safe) -> Safe:
    return el("a", mark, href=f"#step-{step}") if step is not None else mark


def curve_chart(
    points: Sequence[Point],
    *,
    chart_id: str,
    caption: str,
    y_label: str,
    marker: int | None = None,
    marker_label: str = "",
) -> Safe:
    """Point estimates joined by a line over a shaded interval band, y in [0, 1].

    ``marker`` (an index into ``points``) draws a dashed vertical line there.
    """
    left, right, top, bottom, plot_h = 48, 16, 14, 44, 180
    n = max(1, len(points))
    dx = max(28.0, min(90.0, 720 / n))
    width = left + right + dx * n
    height = top + plot_h + bottom

    def x(i: int) -> float:
        return left + dx / 2 + i * dx

    def y(v: float) -> float:
        return top + (1 - max(0.0, min(1.0, v))) * plot_h

    parts: list[Safe] = [el("title", caption)]
    grid = " ".join(f"M{left},{_f(y(t))} H{_f(width - right)}" for t in (0, 0.25, 0.5, 0.75, 1))
    parts.append(el("path", d=grid, class_="grid"))
    for t in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            el("text", f"{t:.2f}", x=left - 6, y=_f(y(t) + 4), class_="tick", text_anchor="end")
        )
    known = [(i, p) for i, p in enumerate(points) if _finite(p.value)]
    banded = [(i, p) for i, p in known if _finite(p.low) and _finite(p.high)]
    if len(banded) >= 2:
        upper = [f"{_f(x(i))},{_f(y(p.high))}" for i, p in banded]  # type: ignore[arg-type]
        lower = [f"{_f(x(i))},{_f(y(p.low))}" for i, p in reversed(banded)]  # type: ignore[arg-type]
        parts.append(el("path", d="M" + " L".join(upper + lower) + " Z", class_="band"))
    if len(known) >= 2:
        line = " L".join(f"{_f(x(i))},{_f(y(p.value))}" for i, p in known)  # type: ignore[arg-type]
        parts.append(el("path", d="M" + line, class_="line"))
    if marker is not None and 0 <= marker < len(points):
        mx = _f(x(marker))
        parts.append(el("path", d=f"M{mx},{top} V{top + plot_h}", class_="marker"))
        if marker_label:
            parts.append(
                el("text", marker_label, x=mx, y=top - 3, class_="tick", text_anchor="middle")
            )
    for i, p in enumerate(points):
        cx = _f(x(i))
        if _finite(p.low) and _finite(p.high):
            lo, hi = _f(y(p.low)), _f(y(p.high))  # type: ignore[arg-type]
            d = f"M{cx},{lo} V{hi} M{_f(x(i) - 4)},{lo} h8 M{_f(x(i) - 4)},{hi} h8"
            parts.append(el("path", d=d, class_=f"whisker {p.css}".strip()))
        if _finite(p.value):
            dot = el(
                "circle",
                el("title", p.title or p.label),
                cx=cx,
                cy=_f(y(p.value)),  # type: ignore[arg-type]
                r=5 if p.css else 4,
                class_=f"pt {p.css}".strip(),
                data_step=p.step,
            )
            parts.append(_linked(p.step, dot))
        parts.append(
            el(
                "text",
                clip_label(p.label, 8),
                x=cx,
                y=top + plot_h + 16,
                class_="tick",
                text_anchor="middle",
            )
        )
    parts.append(
        el("text", "step", x=_f(width / 2), y=height - 6, class_="axis", text_anchor="middle")
    )
    parts.append(
        el(
            "text",
            y_label,
            x=12,
            y=_f(top + plot_h / 2),
            class_="axis",
            text_anchor="middle",
            transform=f"rotate(-90 12 {_f(top + plot_h / 2)})",
        )
    )
    return el(
        "svg",
        *parts,
        id=chart_id,
        class_="chart",
        role="img",
        aria_label=caption,
        viewBox=f"0 0 {_f(width)} {height}",
        width=_f(width),
        height=height,
        xmlns="http://www.w3.org/2000/svg",
    )


def bar_chart(
    rows: Sequence[Point],
    *,
    chart_id: str,
    caption: str,
    x_label: str,
    domain: tuple[float, float] | None = None,
    signed: bool = True,
) -> Safe:
    """Horizontal bars from zero with interval whiskers; one row per :class:`Point`.

    ``domain`` fixes the value axis; by default it spans zero and every interval.
    """
    label_w, plot_w, value_w, top, row_h, bottom = 230, 380, 170, 10, 24, 40
    values = [v for p in rows for v in (p.value, p.low, p.high) if _finite(v)]
    if domain is None:
        domain = nice_domain(values)
    d0, d1 = domain
    span = (d1 - d0) or 1.0
    width = label_w + plot_w + value_w
    height = top + row_h * max(1, len(rows)) + bottom

    def x(v: float) -> float:
        return label_w + (max(d0, min(d1, v)) - d0) / span * plot_w

    parts: list[Safe] = [el("title", caption)]
    ticks = nice_ticks(d0, d1)
    grid = " ".join(f"M{_f(x(t))},{top} V{top + row_h * len(rows)}" for t in ticks)
    parts.append(el("path", d=grid, class_="grid"))
    base = top + row_h * len(rows)
    for t in ticks:
        parts.append(
            el(
                "text",
                number(t, signed=signed and t != 0),
                x=_f(x(t)),
                y=base + 14,
                class_="tick",
                text_anchor="middle",
            )
        )
    if d0 < 0 < d1:
        parts.append(el("path", d=f"M{_f(x(0))},{top - 4} V{base + 2}", class_="zero"))
    for i, p in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        label = el(
            "text",
            el("title", p.title or p.label),
            clip_label(p.label, 34),
            x=label_w - 8,
            y=_f(cy + 4),
            class_="label",
            text_anchor="end",
        )
        parts.append(_linked(p.step, label))
        if _finite(p.value):
            v = float(p.value)  # type: ignore[arg-type]
            x0, x1 = sorted((x(0 if d0 <= 0 <= d1 else d0), x(v)))
            bar = el(
                "rect",
                el("title", p.title or p.label),
                x=_f(x0),
                y=_f(cy - 7),
                width=_f(max(1.0, x1 - x0)),
                height=14,
                class_=f"bar {p.css}".strip(),
                data_step=p.step,
            )
            parts.append(_linked(p.step, bar))
        if _finite(p.low) and _finite(p.high):
            lo, hi = _f(x(p.low)), _f(x(p.high))  # type: ignore[arg-type]
            d = f"M{lo},{_f(cy)} H{hi} M{lo},{_f(cy - 5)} v10 M{hi},{_f(cy - 5)} v10"
            parts.append(el("path", d=d, class_="whisker"))
        text = number(p.value, signed=signed) + " " + interval(p.low, p.high, signed=signed)
        parts.append(
            el("text", text.strip(), x=label_w + plot_w + 10, y=_f(cy + 4), class_="value")
        )
    parts.append(
        el(
            "text",
            x_label,
            x=_f(label_w + plot_w / 2),
            y=height - 6,
            class_="axis",
            text_anchor="middle",
        )
    )
    return el(
        "svg",
        *parts,
        id=chart_id,
        class_="chart",
        role="img",
        aria_label=caption,
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        xmlns="http://www.w3.org/2000/svg",
    )


__all__ = ["Point", "bar_chart", "curve_chart", "interval", "number"]
