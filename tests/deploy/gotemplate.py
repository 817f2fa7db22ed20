"""A small renderer for the subset of Go templates (Helm's dialect) that deploy/helm/gpu-platform uses.

No `helm` binary can be installed here, so the chart's tests render with this; with `helm` on PATH they
use `helm template` as well. The subset, which the chart must stay within (anything else raises):
- actions `{{ pipeline }}`, trim markers `{{-` / `-}}`, comments `{{/* ... */}}`;
- `if` / `else if` / `else` / `end`, `with` / `else` / `end`, `range` (over a list or a map, `.` rebound) / `end`;
- `.Values.a.b`, `.Release.Name`, `.Release.Namespace`, `.Chart.Name`, `.Chart.Version`, `.Chart.AppVersion`,
  `.Template.BasePath`, `.` and `$` (the root), string, number and boolean literals, parenthesised
  sub-pipelines;
- `include NAME DOT` and the `{{ template NAME DOT }}` action, where NAME is another file of the chart
  (`print $.Template.BasePath "/configmap.yaml"`), rendered with DOT as its root;
- functions: default, quote, squote, toYaml, nindent, indent, b64enc, not, eq, ne, and, or, required,
  printf (%s, %d), print, sha256sum, int, lower, upper, replace, trimSuffix, toString, toJson.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


class TemplateError(Exception):
    pass


@dataclass
class Node:
    kind: str  # text, expr, if, with, range
    value: str = ""
    body: list = field(default_factory=list)
    branches: list = field(default_factory=list)  # if: [(condition, body)], else body in `otherwise`
    otherwise: list = field(default_factory=list)


def tokenize(source: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    for m in ACTION.finditer(source):
        text = source[pos:m.start()]
        if m.group(1):
            text = text.rstrip(" \t\r\n")
        if tokens and tokens[-1][0] == "trim-next":
            tokens.pop()
            text = text.lstrip(" \t\r\n")
        tokens.append(("text", text))
        body = m.group(2)
        if not body.startswith("/*"):
            tokens.append(("action", body))
        if m.group(3):
            tokens.append(("trim-next", ""))
        pos = m.end()
    text = source[pos:]
    if tokens and tokens[-1][0] == "trim-next":
        tokens.pop()
        text = text.lstrip(" \t\r\n")
    tokens.append(("text", text))
    return tokens


def parse(tokens: list[tuple[str, str]]) -> list[Node]:
    root: list[Node] = []
    stack: list[tuple[Node | None, list]] = [(None, root)]
    for kind, value in tokens:
        current = stack[-1][1]
        if kind == "text":
            if value:
                current.append(Node("text", value))
            continue
        word = value.split(None, 1)[0] if value else ""
        rest = value[len(word):].strip()
        if word in ("if", "with", "range"):
            node = Node(word, rest)
            if word == "if":
                node.branches.append((rest, []))
                current.append(node)
                stack.append((node, node.branches[-1][1]))
            else:
                current.append(node)
                stack.append((node, node.body))
        elif word == "else":
            node = stack[-1][0]
            if node is None:
                raise TemplateError("else without if")
            stack.pop()
            if rest.startswith("if "):
                node.branches.append((rest[3:].strip(), []))
                stack.append((node, node.branches[-1][1]))
            else:
                stack.append((node, node.otherwise))
        elif word == "end":
            if len(stack) == 1:
                raise TemplateError("end without a block")
            stack.pop()
        elif word == "template":  # the action form of include: `{{ template NAME DOT }}`
            current.append(Node("expr", f"include {rest}"))
        elif word in ("define", "block", "tpl"):
            raise TemplateError(f"{word!r} is outside the supported subset")
        else:
            current.append(Node("expr", value))
    if len(stack) != 1:
        raise TemplateError("unclosed block")
    return root


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and not (isinstance(value, (list, dict)) and not value)


def to_yaml(value: Any) -> str:
    if value is None:
        return "null"
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n").removesuffix("\n...")


def _printf(fmt: str, *args: Any) -> str:
    values = iter(args)
    return re.sub(r"%[sdv]", lambda _: str(next(values)), fmt)


def _required(message: str, value: Any) -> Any:
    if not truthy(value):
        raise TemplateError(message)
    return value


FUNCS = {
    "default": lambda d, v=None: v if truthy(v) else d,
    "quote": lambda v: '"' + _text("" if v is None else v).replace("\\", "\\\\").replace('"', '\\"') + '"',
    "squote": lambda v: "'" + str(v) + "'",
    "toYaml": to_yaml,
    "nindent": lambda n, s: "\n" + "\n".join((" " * n + line) if line else line for line in str(s).split("\n")),
    "indent": lambda n, s: "\n".join((" " * n + line) if line else line for line in str(s).split("\n")),
    "b64enc": lambda s: base64.b64encode(str(s).encode()).decode(),
    "not": lambda v: not truthy(v),
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "and": lambda *a: next((x for x in a if not truthy(x)), a[-1]),
    "or": lambda *a: next((x for x in a if truthy(x)), a[-1]),
    "required": _required,
    "printf": _printf,
    "int": lambda v: int(v),
    "lower": lambda s: str(s).lower(),
    "upper": lambda s: str(s).upper(),
    "replace": lambda old, new, s: str(s).replace(old, new),
    # Go's encoding/json: map keys sorted, no spaces, <, > and & escaped
    "toJson": lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"),
    "trimSuffix": lambda suffix, s: str(s).removesuffix(suffix),
    "toString": lambda v: str(v),
    "print": lambda *a: "".join("" if v is None else _text(v) for v in a),
    "sha256sum": lambda s: hashlib.sha256(str(s).encode()).hexdigest(),
}


class Renderer:
    """`files` maps each template's name (`<chart>/templates/<file>`, as `include` names it) to its source;
    `base_path` is `.Template.BasePath` (`<chart>/templates`)."""

    def __init__(self, values: dict, release: dict, chart: dict, files: dict[str, str] | None = None,
                 base_path: str = "") -> None:
        self.root = {"Values": values, "Release": release, "Chart": chart,
                     "Template": {"BasePath": base_path, "Name": ""}}
        self.files = files or {}
        self._including: list[str] = []

    def render(self, source: str) -> str:
        return self._nodes(parse(tokenize(source)), self.root)

    def include(self, name: str, dot: Any) -> str:
        if name not in self.files:
            raise TemplateError(f"include of {name!r}: no such template")
        if name in self._including:
            raise TemplateError(f"include of {name!r} from itself")
        self._including.append(name)
        try:
            return self._nodes(parse(tokenize(self.files[name])), dot)
        finally:
            self._including.pop()

    def _nodes(self, nodes: list[Node], dot: Any) -> str:
        out = []
        for node in nodes:
            if node.kind == "text":
                out.append(node.value)
            elif node.kind == "expr":
                value = self.pipeline(node.value, dot)
                out.append("" if value is None else _text(value))
            elif node.kind == "if":
                for condition, body in node.branches:
                    if truthy(self.pipeline(condition, dot)):
                        out.append(self._nodes(body, dot))
                        break
                else:
                    out.append(self._nodes(node.otherwise, dot))
            elif node.kind == "with":
                value = self.pipeline(node.value, dot)
                out.append(self._nodes(node.body, value) if truthy(value) else self._nodes(node.otherwise, dot))
            elif node.kind == "range":
                value = self.pipeline(node.value, dot)
                items = list(value.values()) if isinstance(value, dict) else list(value or [])
                for item in items:
                    out.append(self._nodes(node.body, item))
                if not items:
                    out.append(self._nodes(node.otherwise, dot))
        return "".join(out)

    def pipeline(self, text: str, dot: Any) -> Any:
        value: Any = _NOTHING
        for command in _split_pipes(text):
            words = _words(command)
            args = [self.operand(w, dot) for w in words[1:]]
            if value is not _NOTHING:
                args.append(value)
            head = words[0]
            if head == "include":
                value = self.include(*args)
            elif head in FUNCS:
                value = FUNCS[head](*args)
            elif len(words) == 1 and value is _NOTHING:
                value = self.operand(head, dot)
            else:
                raise TemplateError(f"unknown function {head!r} in {text!r}")
        return value

    def operand(self, word: str, dot: Any) -> Any:
        if word.startswith("(") and word.endswith(")"):
            return self.pipeline(word[1:-1], dot)
        if word.startswith('"'):
            return yaml.safe_load(word) if "\\" in word else word[1:-1]
        if word in ("true", "false"):
            return word == "true"
        if re.fullmatch(r"-?\d+", word):
            return int(word)
        if re.fullmatch(r"-?\d+\.\d+", word):
            return float(word)
        if word == ".":
            return dot
        if word.startswith("$"):
            base, path = self.root, word[1:]
        elif word.startswith("."):
            base, path = dot, word
        else:
            raise TemplateError(f"unsupported operand {word!r}")
        for part in [p for p in path.split(".") if p]:
            base = base.get(part) if isinstance(base, dict) else None
        return base


_NOTHING = object()


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise TemplateError(f"cannot print {type(value).__name__} without toYaml")
    return str(value)


def _split_pipes(text: str) -> list[str]:
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == "|":
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _words(command: str) -> list[str]:
    words, depth, current = [], 0, ""
    lexer = shlex.shlex(command, posix=False)
    lexer.whitespace_split = True
    lexer.commenters = ""
    for token in lexer:
        depth += token.count("(") - token.count(")")
        current = f"{current} {token}" if current else token
        if depth == 0:
            words.append(current)
            current = ""
    if current:
        raise TemplateError(f"unbalanced parentheses in {command!r}")
    return words
