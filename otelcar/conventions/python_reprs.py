"""Tool calls that a producer wrote as the Python ``repr`` of an SDK object.

Some instrumentations ``str()`` an object they do not know into a text part: the OpenAI
Agents SDK's GenAI processor records a Responses-API function call as the text
``ResponseFunctionToolCall(arguments='{"city": "Paris"}', call_id='call_1',
name='get_weather', …)``, and Chat Completions objects read
``ChatCompletionMessageToolCall(id='call_1', function=Function(arguments='…',
name='…'), type='function')``. :func:`tool_call_from_repr` reads such a text back, with
:mod:`ast` (parsed, never evaluated): a call of a class whose name says it is a tool or
function call, with literal keyword values (nested calls become dicts).
:func:`object_from_repr` reads the repr of any such object the same way (the message
classes of LangChain — ``ToolMessage(content='18 degrees', tool_call_id='call_1')`` — among
them), for :mod:`otelcar.conventions.normalize`.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from otelcar.messages import ToolCall, parse_arguments, text_of

#: Longest text looked at (a repr longer than this is left as text).
MAX_CHARS = 200_000
_ANY_CLASS = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*([A-Z]\w*)\(")
_CLASS = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:ToolCall|FunctionCall|ToolUse)\w*)\(")


def repr_class(text: Any) -> str | None:
    """The class name when ``text`` starts like the repr of a tool-call object."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    match = _CLASS.match(text)
    return match.group(1) if match else None


def tool_call_from_repr(text: Any) -> ToolCall | None:
    """The tool call ``text`` is the repr of (see the module docstring), else ``None``."""
    if repr_class(text) is None:
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
        fields = _fields(node)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(fields, dict):
        return None
    function = fields.get("function") if isinstance(fields.get("function"), dict) else {}
    name = fields.get("name") or function.get("name")
    if not isinstance(name, str) or not name:
        return None
    arguments = next(
        (
            v
            for v in (fields.get("arguments"), function.get("arguments"), fields.get("input"))
            if v is not None
        ),
        None,
    )
    call_id = fields.get("call_id") or fields.get("id")
    return ToolCall(name=name, arguments=parse_arguments(arguments), id=text_of(call_id))


def _fields(node: ast.AST) -> Any:
    """A repr's value: a call's keywords as a dict (recursively), a literal as itself."""
    if isinstance(node, ast.Call):
        if node.args:
            raise ValueError("positional arguments in a repr")
        return {kw.arg: _fields(kw.value) for kw in node.keywords if kw.arg is not None}
    return ast.literal_eval(node)


def object_from_repr(text: Any) -> tuple[str, dict[str, Any]] | None:
    """``(class name, keyword fields)`` when ``text`` is the repr of an object called with
    keywords only (``ToolMessage(content='x', tool_call_id='c1')``), else ``None``. Parsed
    with :mod:`ast`, never evaluated; a field whose value is not a literal (nor such a call)
    is left out rather than failing the whole text."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    match = _ANY_CLASS.match(text)
    if match is None:
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.Call) or node.args:
        return None
    fields: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            continue
        try:
            fields[keyword.arg] = _fields(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
    return match.group(1), fields
