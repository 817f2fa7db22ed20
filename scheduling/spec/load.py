"""Safe loading of spec text into plain values plus the position of every key and value.

PyYAML's SafeLoader only composes the node graph here; values are built by hand so that each
keeps its line/column, duplicate keys are caught, and only plain YAML types get through
(no Python or custom tags). Size, alias count, nesting depth and value count are bounded so
that hostile input (alias bombs, deep nesting, huge files) fails fast with a clear message, in the
active language.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.utils.translation import gettext as _
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scheduling.spec.model import SpecError, SpecIssue

MAX_BYTES = 64 * 1024
MAX_ALIASES = 16
MAX_DEPTH = 32
MAX_VALUES = 5000
MAX_INT = 2**63 - 1

Path = tuple[str | int, ...]
Pos = tuple[int, int]

_STD = "tag:yaml.org,2002:"
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass
class Loaded:
    """A document as plain values; positions are 1-based (line, column), empty for JSON input."""

    value: Any
    value_pos: dict[Path, Pos] = field(default_factory=dict)
    key_pos: dict[Path, Pos] = field(default_factory=dict)


def _fail(message: str, pos: Pos | None = None) -> SpecError:
    line, col = pos if pos else (None, None)
    return SpecError([SpecIssue(line, col, None, message)])


def _line_col(text: str | bytes, offset: int) -> Pos:
    newline = "\n" if isinstance(text, str) else b"\n"
    line = text.count(newline, 0, offset) + 1  # type: ignore[arg-type]
    start = text.rfind(newline, 0, offset) + 1  # type: ignore[arg-type]
    return line, offset - start + 1


def decode_text(text: str | bytes) -> str:
    """Bytes or str -> str, refusing oversized, binary, non-UTF-8 or control-character input."""
    if isinstance(text, bytes | bytearray | memoryview):
        data = bytes(text)
        if len(data) > MAX_BYTES:
            raise _fail(_too_big(len(data)))
        if b"\x00" in data:
            raise _fail(_("the spec is binary data (it contains NUL bytes), not YAML text"))
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            pos = _line_col(data, exc.start)
            raise _fail(_("the spec is not UTF-8 text: byte 0x%(byte)s cannot be decoded") % {
                "byte": f"{data[exc.start]:02x}"}, pos) from None
    elif isinstance(text, str):
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise _fail(_("the spec is not valid Unicode text"), _line_col(text, exc.start)) from None
        if size > MAX_BYTES:
            raise _fail(_too_big(size))
        text = text.removeprefix("\ufeff")
    else:
        raise _fail(_("the spec must be YAML text, not %(type)s") % {"type": type(text).__name__})
    if "\x00" in text:
        raise _fail(_("the spec is binary data (it contains NUL characters), not YAML text"))
    bad = _NON_PRINTABLE.search(text)
    if bad:
        raise _fail(_("the spec contains the control character U+%(code)s; it must be plain text") % {
            "code": f"{ord(bad.group()):04X}"}, _line_col(text, bad.start()))
    return text


def _where(path: Path) -> str:
    """A path as the field's name: roles[0].env.A."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _nul_issue(path: Path, pos: Pos | None = None, *, key: bool = False) -> SpecIssue:
    """A decoded string (an escape such as "\\0" or "\\u0000") with a NUL: no process argument, variable or
    database text can hold one."""
    where = _where(path) or _("the spec")
    message = (_("%(where)s: a key contains a NUL character (\\0); remove it") if key
               else _("%(where)s: the value contains a NUL character (\\0); remove it")) % {"where": where}
    line, column = pos if pos else (None, None)
    return SpecIssue(line, column, _where(path) or None, message)


def _too_big(size: int) -> str:
    return _("the spec is %(size)s bytes; the limit is %(most)s bytes (64 KiB)") % {"size": size, "most": MAX_BYTES}


def _too_deep() -> str:
    return _("the spec is nested more than %(most)s levels deep") % {"most": MAX_DEPTH}


def _too_many_values() -> str:
    return _("the spec has more than %(most)s values") % {"most": MAX_VALUES}


class _Limit(Exception):
    def __init__(self, message: str, pos: Pos):
        super().__init__(message)
        self.pos = pos


def _pos(node_or_mark: Any) -> Pos:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return mark.line + 1, mark.column + 1


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts aliases and nesting depth."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.alias_count = 0
        self.depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                raise _Limit(_("the spec uses more than %(most)s aliases (*name)") % {"most": MAX_ALIASES},
                             _pos(event))
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Limit(_too_deep(), _pos(event))
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _clip(text: str) -> str:
    return text if len(text) <= 20 else text[:20] + "..."


def _tag_message(tag: str, plain: str) -> str:
    short = "!!" + tag[len(_STD) :] if tag.startswith(_STD) else tag
    if "python" in tag:
        return _("Python tags are not allowed (%(tag)s)") % {"tag": short}
    return _("the tag %(tag)s is not allowed; use %(plain)s") % {"tag": short, "plain": plain}


class _Converter:
    """Node graph -> plain values, recording positions and collecting problems."""

    def __init__(self, loader: _BoundedLoader):
        self.loader = loader
        self.count = 0
        self.issues: list[SpecIssue] = []
        self.value_pos: dict[Path, Pos] = {}
        self.key_pos: dict[Path, Pos] = {}

    def issue(self, node: Node, message: str) -> None:
        line, col = _pos(node)
        self.issues.append(SpecIssue(line, col, None, message))

    def convert(self, node: Node, path: Path, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:
            raise _Limit(_too_many_values(), _pos(node))
        if depth > MAX_DEPTH:  # aliases can nest deeper than the text does
            raise _Limit(_too_deep(), _pos(node))
        self.value_pos[path] = _pos(node)
        if isinstance(node, ScalarNode):
            value = self.scalar(node)
            if isinstance(value, str) and "\x00" in value:
                self.issues.append(_nul_issue(path, _pos(node)))
                return None
            return value
        if isinstance(node, SequenceNode):
            if node.tag != _STD + "seq":
                self.issue(node, _tag_message(node.tag, _("a plain list")))
                return None
            return [self.convert(child, (*path, i), depth + 1) for i, child in enumerate(node.value)]
        if isinstance(node, MappingNode):
            if node.tag != _STD + "map":
                self.issue(node, _tag_message(node.tag, _("a plain mapping")))
                return None
            return self.mapping(node, path, depth)
        raise AssertionError(f"unexpected YAML node {node!r}")  # pragma: no cover

    def scalar(self, node: ScalarNode) -> Any:
        tag = node.tag
        if tag in (_STD + "str", _STD + "timestamp"):
            return node.value
        if tag == _STD + "null":
            return None
        if tag == _STD + "bool":
            return self.loader.construct_yaml_bool(node)
        if tag in (_STD + "int", _STD + "float"):
            try:
                number = (
                    self.loader.construct_yaml_int(node)
                    if tag.endswith("int")
                    else self.loader.construct_yaml_float(node)
                )
            except ValueError:
                self.issue(node, _("the number %(number)s is too long or malformed") % {"number": _clip(node.value)})
                return None
            if isinstance(number, int) and abs(number) > MAX_INT:
                self.issue(node, _("the number %(number)s is too large") % {"number": _clip(node.value)})
                return None
            return number
        self.issue(node, _tag_message(tag, _("plain values")))
        return None

    def mapping(self, node: MappingNode, path: Path, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _STD + "merge":
                merges.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                self.issue(key_node, _("a key must be plain text, not a list or mapping"))
                continue
            key = key_node.value
            if "\x00" in key:
                self.issues.append(_nul_issue(path, _pos(key_node), key=True))
                continue
            key_path = (*path, key)
            if key in result:
                first_line = self.key_pos[key_path][0]
                self.issue(key_node, _("duplicate key '%(key)s' (first given on line %(line)s)") % {
                    "key": key, "line": first_line})
                continue
            self.key_pos[key_path] = _pos(key_node)
            result[key] = self.convert(value_node, key_path, depth + 1)
        for merge in merges:  # `<<: *defaults`: merged keys never override explicit ones
            sources = merge.value if isinstance(merge, SequenceNode) else [merge]
            for source in sources:
                if not isinstance(source, MappingNode):
                    self.issue(source, _("'<<' must merge a mapping or a list of mappings"))
                    continue
                self.merge(source, path, depth, result)
        return result

    def merge(self, source: MappingNode, path: Path, depth: int, into: dict[str, Any]) -> None:
        outer = self.value_pos, self.key_pos
        self.value_pos, self.key_pos = {}, {}
        try:
            merged = self.mapping(source, path, depth)
            inner = self.value_pos, self.key_pos
        finally:
            self.value_pos, self.key_pos = outer
        for key, value in merged.items():
            if key in into:
                continue
            into[key] = value
            prefix = (*path, key)
            for table, inner_table in zip((self.value_pos, self.key_pos), inner, strict=True):
                table.update({p: v for p, v in inner_table.items() if p[: len(prefix)] == prefix})


_FOUND = re.compile(r"found '(.*)'$")
_CHARACTER = re.compile(r"found character '(.*)' that cannot start any token")
_NAMED = re.compile(r"'([^']*)'")


def syntax_message(exc: yaml.MarkedYAMLError) -> tuple[str, Any]:
    """A YAML parser error as a sentence a person can act on, and the mark to point at (where an
    unclosed bracket or quote was opened, rather than the end of the text where it was noticed)."""
    context, problem = exc.context or "", exc.problem or ""
    here, opened = exc.problem_mark or exc.context_mark, exc.context_mark or exc.problem_mark

    def said(text: str, mark: Any = here) -> tuple[str, Any]:
        return _("YAML syntax: %(problem)s") % {"problem": text}, mark

    if problem == "mapping values are not allowed here":
        return said(_("unexpected ':' here: indent this line like the keys above it, "
                      "or put a value that contains ': ' in quotes"))
    if "expected ',' or ']'" in problem:
        return said(_("the list opened here with '[' is not closed with ']'"), opened)
    if "expected ',' or '}'" in problem:
        return said(_("the mapping opened here with '{' is not closed with '}'"), opened)
    if "quoted scalar" in context and "end of stream" in problem:
        return said(_("the quoted value opened here is not closed"), opened)
    if problem == "could not find expected ':'":
        return said(_("this line is not a 'key: value' pair: add ':' after the key, or indent it as part of "
                      "the value above"), opened)
    if problem.startswith("expected <block end>"):
        found = _FOUND.search(problem)
        token = found.group(1) if found else ""
        if token in ("<block mapping start>", "<block sequence start>", "?", "-", "<scalar>"):
            return said(_("this line's indentation does not match the lines above it"))
        return said(_("unexpected '%(token)s' here: check the brackets and indentation") % {"token": token})
    if (character := _CHARACTER.search(problem)) is not None:
        if character.group(1) == "\\t":
            return said(_("a tab cannot indent YAML: use spaces"))
        return said(_("'%(character)s' cannot start a value: put the value in quotes") % {
            "character": character.group(1)})
    if problem == "but found another document":
        return said(_("the spec must be one YAML document: remove the '---' line and what follows it"))
    if problem.startswith("found undefined alias"):
        name = _NAMED.search(problem)
        return said(_("*%(name)s names no anchor: define &name before it, or quote the value") % {
            "name": name.group(1) if name else ""})
    if "duplicate anchor" in context:
        name = _NAMED.search(context)
        return said(_("the anchor &%(name)s is defined twice") % {"name": name.group(1) if name else ""})
    if problem.startswith("found unknown escape character"):
        return said(_("a backslash escape that YAML does not know: use single quotes, or write \\\\"))
    # Any other: the parser's own words (English) inside a sentence in the reader's language.
    detail = " ".join(p for p in (context, problem) if p)
    if here is None:
        return said(_("the parser stopped here (its words: %(detail)s)") % {"detail": detail})
    return said(_("the parser stopped at line %(line)s, column %(column)s (its words: %(detail)s)") % {
        "line": here.line + 1, "column": here.column + 1, "detail": detail})


def load_yaml(text: str | bytes) -> Loaded:
    """Parse spec text into a mapping with positions, or raise SpecError."""
    source = decode_text(text)
    if not source.strip():
        raise _fail(_("the spec is empty"))
    loader = _BoundedLoader(source)
    try:
        node = loader.get_single_node()
        if node is None:
            raise _fail(_("the spec is empty (only comments)"))
        converter = _Converter(loader)
        value = converter.convert(node, (), 0)
    except _Limit as exc:
        raise _fail(str(exc), exc.pos) from None
    except yaml.MarkedYAMLError as exc:
        message, mark = syntax_message(exc)
        raise _fail(message, _pos(mark) if mark else None) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not accept, at a position in the text
        line, column = _line_col(source, exc.position)
        raise _fail(_("YAML cannot read the character %(character)s at line %(line)s, column %(column)s: "
                      "remove it or write it as an escape in double quotes") % {
            "character": f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character),
            "line": line, "column": column}, (line, column)) from None
    except yaml.YAMLError as exc:
        raise _fail(_("YAML error: the parser stopped (its words: %(error)s)") % {"error": exc}) from None
    except RecursionError:
        raise _fail(_("the spec is nested too deeply")) from None
    finally:
        loader.dispose()
    if converter.issues:
        raise SpecError(converter.issues)
    if not isinstance(value, dict):
        kind = _("a list") if isinstance(value, list) else _("a single value")
        raise _fail(_("the top level must be a mapping of fields (name: ..., roles: ...), not %(kind)s") % {
            "kind": kind}, _pos(node))
    return Loaded(value, converter.value_pos, converter.key_pos)


def load_object(obj: object) -> Loaded:
    """A JSON-style object (dict of str, lists, numbers, bools, None) -> Loaded without positions."""
    issues: list[SpecIssue] = []
    count = 0

    def where(path: Path) -> str:
        return _where(path) or "the spec"

    def said(path: Path) -> str:  # where(path) in a message: the field's name, else "the spec" translated
        return where(path) if path else _("the spec")

    def copy(value: Any, path: Path) -> Any:
        nonlocal count
        count += 1
        if count > MAX_VALUES:
            raise _Limit(_too_many_values(), (0, 0))
        if len(path) > MAX_DEPTH:
            raise _Limit(_too_deep(), (0, 0))
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    issues.append(
                        SpecIssue(None, None, where(path) or None,
                                  _("%(where)s: keys must be text") % {"where": said(path)})
                    )
                    continue
                if "\x00" in key:
                    issues.append(_nul_issue(path, key=True))
                    continue
                out[key] = copy(item, (*path, key))
            return out
        if isinstance(value, list | tuple):
            return [copy(item, (*path, i)) for i, item in enumerate(value)]
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            issues.append(SpecIssue(None, None, where(path),
                                    _("%(where)s: the number is too large") % {"where": said(path)}))
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return value  # rejected with its field name by the reader
        if isinstance(value, str) and "\x00" in value:
            issues.append(_nul_issue(path))
            return None
        if value is None or isinstance(value, str | int | float | bool):
            return value
        issues.append(
            SpecIssue(None, None, where(path), _("%(where)s: %(type)s is not a JSON value") % {
                "where": said(path), "type": type(value).__name__})
        )
        return None

    if not isinstance(obj, Mapping):
        raise _fail(_("the spec must be a JSON object of fields, not %(type)s") % {"type": type(obj).__name__})
    try:
        value = copy(obj, ())
    except _Limit as exc:
        raise _fail(str(exc)) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH stops well before
        raise _fail(_("the spec is nested too deeply")) from None
    if issues:
        raise SpecError(issues)
    return Loaded(value)
