"""Hostile text for the escaping tests of the HTML report and the console."""

from __future__ import annotations


def payload(tag: str) -> str:
    """Markup that would run script, load an image or add elements if it were not escaped."""
    return (
        f"{tag}</script><script>document.title='PWNED';window.__pwned=1</script>"
        f"<img src=x onerror=\"window.__pwned=1\"><svg onload='window.__pwned=1'></svg>"
        f'<!--<b id="pwned">x</b>--><iframe srcdoc="<script>parent.__pwned=1</script>">'
        f'</iframe>"\'><a href="javascript:window.__pwned=1" id="pwned-link">x</a>]]>'
        "\u2028&amp;"
    )
