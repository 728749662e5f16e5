"""The page shell shared by every HTML report: one self-contained file.

Inline CSS, one inline script (allowed by its SHA-256 in the page's Content-Security-Policy,
which also forbids every network request, inline event handler and foreign script), the
result embedded as JSON in ``<script type="application/json" id="otelcar-data">``.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from otelcar.report.markup import Safe, el, esc, script_json
from otelcar.version import __version__

CSS = """
.ctl { color: #b00; background: #fee; border-radius: 2px; font-family: monospace; }
:root{--fg:#1d2330;--muted:#5d6677;--line:#d8dde6;--bg:#fff;--soft:#f5f7fa;--red:#c62828;
--orange:#e08a00;--green:#2e7d32;--blue:#1f5fbf;--mark:#ffe08a}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
main{max-width:1180px;margin:0 auto;padding:20px 24px 60px}
header.top{display:flex;gap:16px;align-items:baseline;flex-wrap:wrap;color:var(--muted);
border-bottom:1px solid var(--line);padding-bottom:8px}
header.top b{color:var(--fg);font-size:16px}
nav.toc{margin:10px 0 0;display:flex;gap:14px;flex-wrap:wrap}
nav.toc a{color:var(--blue);text-decoration:none}
h2{font-size:18px;margin:30px 0 6px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
p.explain{color:var(--muted);margin:4px 0 10px;max-width:900px}
.verdict{margin:16px 0;padding:16px 20px;border-radius:8px;border:1px solid var(--line);
border-left:8px solid var(--muted);background:var(--soft)}
.verdict.culprit{border-left-color:var(--red)}
.verdict.locked-in{border-left-color:var(--orange)}
.verdict.design-flaw{border-left-color:var(--red)}
.verdict h1{font-size:22px;margin:4px 0 10px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;
background:#e3e7ee;color:var(--fg);text-transform:uppercase;letter-spacing:.03em}
.badge.culprit,.badge.failed,.badge.design-flaw{background:#fbe3e3;color:var(--red)}
.badge.locked-in,.badge.suspect{background:#fdf0d7;color:#8a5600}
.badge.passed,.badge.held{background:#e2f3e4;color:var(--green)}
.badge.llm{background:#e0ecfb;color:var(--blue)}
.badge.tool{background:#e2f3e4;color:var(--green)}
.badge.agent{background:#efe4f7;color:#6a2f8f}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(230px,1fr));gap:10px 22px;
margin:0}
.facts .fact{padding:0;min-width:0}
.facts dd,.gist,.alt li,.headline,pre{overflow-wrap:anywhere}
table.data td{overflow-wrap:break-word}
.facts dt{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.facts dd{margin:2px 0 0;font-size:15px}
.headline{margin:12px 0 0;color:var(--muted)}
.notes{color:#8a5600;margin:8px 0 0;padding-left:18px}
.chartbox{overflow-x:auto;border:1px solid var(--line);border-radius:6px;padding:8px;
background:#fff}
svg.chart{display:block;font:11px system-ui,sans-serif}
svg .grid{stroke:#e6e9ef;stroke-width:1;fill:none}
svg .zero{stroke:#8b93a3;stroke-width:1.2;fill:none}
svg .band{fill:#1f5fbf;fill-opacity:.13;stroke:none}
svg .line{stroke:var(--blue);stroke-width:2;fill:none}
svg .marker{stroke:var(--orange);stroke-width:1.5;stroke-dasharray:4 3;fill:none}
svg .whisker{stroke:#394150;stroke-width:1.2;fill:none}
svg .whisker.culprit{stroke:var(--red)}
svg .pt{fill:var(--blue);stroke:#fff;stroke-width:1.5}
svg .pt.culprit{fill:var(--red)}
svg .pt.significant,svg .pt.tie{fill:var(--orange)}
svg .bar{fill:#9aa6b8}
svg .bar.culprit,svg .bar.design-flaw{fill:var(--red)}
svg .bar.significant,svg .bar.tie,svg .bar.suspect{fill:var(--orange)}
svg .bar.positive{fill:#6d8fc7}
svg .tick,svg .value{fill:var(--muted)}
svg .label{fill:var(--fg)}
svg .axis{fill:var(--muted);font-weight:600}
svg a{cursor:pointer}
table.data{border-collapse:collapse;width:100%;margin:8px 0;font-size:13px}
table.data th,table.data td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;
vertical-align:top}
table.data th{background:var(--soft);font-weight:600}
table.data td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.data tr.culprit td,table.data tr.design-flaw td{background:#fff4f4}
.toolbar{margin:6px 0;display:flex;gap:8px}
button{font:inherit;padding:3px 10px;border:1px solid var(--line);border-radius:4px;
background:var(--soft);cursor:pointer}
details.step{border:1px solid var(--line);border-radius:6px;margin:4px 0;background:#fff}
details.step.culprit{border-color:var(--red);box-shadow:0 0 0 1px var(--red)}
details.step.why{border-color:#b58900}
details.step>summary{list-style:none;cursor:pointer;padding:6px 10px;display:grid;
grid-template-columns:42px 62px minmax(120px,220px) 120px 70px 110px 1fr;gap:8px;align-items:center}
details.step>summary::-webkit-details-marker{display:none}
details.step>summary>*{min-width:0}
details.step>summary .num{font-variant-numeric:tabular-nums;color:var(--muted);text-align:right}
details.step>summary .gist{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
details.step[open]>summary{border-bottom:1px solid var(--line);background:var(--soft)}
.gantt{position:relative;height:6px;background:#eef1f5;border-radius:3px;margin-top:3px}
.gantt span{position:absolute;top:0;height:6px;border-radius:3px;background:#8da4c9}
.effect{font-size:12px;color:var(--muted)}
.effect.culprit{color:var(--red);font-weight:600}
.stepbody{padding:8px 12px 12px}
.msg{border-left:3px solid var(--line);margin:6px 0;padding:2px 10px}
.msg .role{font-size:12px;font-weight:600;color:var(--muted)}
.msg.assistant{border-left-color:var(--blue)}
.msg.tool{border-left-color:var(--green)}
.msg.system{border-left-color:#6a2f8f}
.msg.output{border-left-color:var(--red);background:#fffafa}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:12.5px/1.4 ui-monospace,
SFMono-Regular,Menlo,Consolas,monospace}
mark.cause{background:var(--mark);outline:2px solid #e0a800;border-radius:2px}
mark.prereq{background:#e3eefc;border-radius:2px}
.shared{color:var(--muted);font-style:italic}
.alt{border:1px solid var(--line);border-radius:6px;padding:8px 12px;margin:8px 0}
.alt ol{margin:4px 0;padding-left:22px}
.alt li.changed{background:#fff8e1}
.muted{color:var(--muted)}
footer{margin-top:40px;color:var(--muted);font-size:12px;border-top:1px solid var(--line);
padding-top:8px}
@media print{details.step{break-inside:avoid}nav.toc,.toolbar{display:none}}
"""

SCRIPT = """(function(){
var steps=document.querySelectorAll('details.step');
function setAll(open){for(var i=0;i<steps.length;i++){steps[i].open=open;}}
function onClick(id,f){var b=document.getElementById(id);if(b){b.addEventListener('click',f);}}
onClick('expand-all',function(){setAll(true);});
onClick('collapse-all',function(){setAll(false);});
function openTarget(){var id=decodeURIComponent(location.hash.slice(1));if(!id){return;}
var t=document.getElementById(id);if(t&&t.tagName==='DETAILS'){t.open=true;}}
window.addEventListener('hashchange',openTarget);openTarget();
document.documentElement.setAttribute('data-ready','1');
})();"""


def _script_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    f"script-src '{_script_hash(SCRIPT)}'; base-uri 'none'; form-action 'none'"
)


def toolbar() -> Safe:
    """The "expand all" / "collapse all" buttons the page script wires to every step."""
    return el(
        "div",
        el("button", "expand all", id="expand-all", type="button"),
        el("button", "collapse all", id="collapse-all", type="button"),
        class_="toolbar",
    )


def page(*, title: str, header: Safe, body: Safe, data: Any) -> str:
    """A whole HTML document: ``header`` and ``body`` are built markup, ``data`` is embedded
    as JSON for tools (``document.getElementById('otelcar-data')``)."""
    head = Safe(
        '<meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="otelcar ' + esc(__version__) + '">'
    )
    footer = el(
        "footer",
        f"Generated by otelcar {__version__}. This file is self-contained: it loads nothing "
        "from the network and opens offline. Every value taken from the trace is shown as "
        "text. The result it shows is embedded as JSON (element #otelcar-data).",
    )
    document = el(
        "html",
        el("head", head, el("title", title), el("style", Safe(CSS))),
        el(
            "body",
            el("main", header, body, footer),
            el("script", script_json(data), type="application/json", id="otelcar-data"),
            el("script", Safe(SCRIPT)),
        ),
        lang="en",
    )
    return "<!DOCTYPE html>\n" + document + "\n"
