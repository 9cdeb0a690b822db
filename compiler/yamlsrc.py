"""Position-aware YAML reading: every value keeps the file:line:col it came from.

PyYAML's composer gives a node tree with marks; we convert it to plain Python data ourselves so
that we can refuse what the plain loader silently accepts (duplicate keys, tab indentation, alias
bombs, merge keys) and remember where each value was written, for error messages.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from a2c.errors import SpecError

MAX_NODES = 100_000        # total values after alias expansion (billion-laughs guard)
MAX_ALIAS_EXPANSIONS = 1_000
MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32             # nesting of mappings and lists; shipped specs use fewer than 8
_CORE = "tag:yaml.org,2002:"
# The tags a spec may carry, per kind of node (the ones YAML gives plain values implicitly, and
# `!!str` and friends written out). Anything else (`!!python/object:...`, `!!binary`, `!!set`,
# `!local`) would mean something to some loader and is refused rather than guessed at.
_TAGS = {ScalarNode: {f"{_CORE}{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")},
         SequenceNode: {f"{_CORE}seq"}, MappingNode: {f"{_CORE}map"}}
_NODE_NAMES = {ScalarNode: "a plain value", SequenceNode: "a list", MappingNode: "a mapping"}


@dataclass
class Source:
    """Parsed YAML plus where each value (and each mapping key) was written."""

    file: str
    data: Any
    values: dict[tuple, str] = field(default_factory=dict)   # path -> "file:line:col"
    keys: dict[tuple, str] = field(default_factory=dict)

    def where(self, path: tuple, key: bool = False) -> str:
        """`file:line:col` of the value at `path` (or of its key), else of its nearest parent."""
        probe = tuple(path)
        while True:
            if key and probe in self.keys:
                return self.keys[probe]
            if probe in self.values:
                return self.values[probe]
            if not probe:
                return f"{self.file}:1:1"
            probe = probe[:-1]


def _pos(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _problem(file: str, line: int, col: int, what: str, path: str = "") -> str:
    return f"{file}:{line}:{col}: {path or '(document)'}: {what}"


def _check_tabs(file: str, text: str) -> list[str]:
    problems = []
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip(" ")
        if stripped.startswith("\t"):
            col = len(line) - len(stripped) + 1
            problems.append(_problem(file, number, col,
                                     "tab character in indentation; YAML indents with spaces"))
    return problems


def decode(file: str, raw: bytes) -> str:
    if len(raw) > MAX_BYTES:
        raise SpecError(_problem(file, 1, 1, f"file is larger than {MAX_BYTES} bytes"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise SpecError(_problem(file, line, col,
                                 f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}); "
                                 "save the file as UTF-8")) from None
    text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n")


def parse(file: str | Path, text: str | None = None) -> Source:
    """Read one YAML document from `file` (or `text`) into a `Source`; raise SpecError."""
    file = str(file)
    if text is None:
        try:
            raw = Path(file).read_bytes()
        except FileNotFoundError:
            raise SpecError(_problem(file, 1, 1, "file not found")) from None
        except IsADirectoryError:
            raise SpecError(f"{file}: is a directory, not a spec file") from None
        except OSError as exc:
            raise SpecError(f"{file}: cannot read: {exc.strerror}") from None
        text = decode(file, raw)
    problems = _check_tabs(file, text)
    if problems:
        raise SpecError(problems)
    if not text.strip() or all(not ln.strip() or ln.lstrip().startswith("#")
                               for ln in text.split("\n")):
        raise SpecError(_problem(file, 1, 1, "file is empty; a spec needs at least "
                                             "apiVersion, kind and id"))
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except RecursionError:
        raise SpecError(_problem(file, 1, 1, f"nested more than {MAX_DEPTH} levels deep "
                                             "(mappings and lists); a spec is much flatter")) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise SpecError(_problem(file, line, col, f"malformed YAML: {what}")) from None
    except yaml.YAMLError as exc:
        raise SpecError(_problem(file, 1, 1, f"malformed YAML: {exc}")) from None
    if len(nodes) != 1:
        if not nodes:
            raise SpecError(_problem(file, 1, 1, "file is empty"))
        line, col = _pos(nodes[1])
        raise SpecError(_problem(file, line, col,
                                 "several YAML documents in one file; write one spec per file"))
    source = Source(file=file, data=None)
    converter = _Converter(source)
    source.data = converter.convert(nodes[0], ())
    if converter.problems:
        raise SpecError(converter.problems)
    return source


def _tag_name(tag: str) -> str:
    return "!!" + tag[len(_CORE):] if tag.startswith(_CORE) else tag


def dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Converter:
    def __init__(self, source: Source):
        self.source = source
        self.problems: list[str] = []
        self.nodes = 0
        self.seen: set[int] = set()
        self.expansions = 0
        self.open: set[int] = set()       # the nodes being converted now (cycle guard)
        self.constructor = SafeConstructor()

    def _refuse(self, node: Node, path: tuple, what: str) -> SpecError:
        return SpecError(_problem(self.source.file, *_pos(node), what, dotted(path)))

    def _budget(self, node: Node, path: tuple) -> None:
        self.nodes += 1
        if id(node) in self.seen and not isinstance(node, ScalarNode):
            self.expansions += 1
        self.seen.add(id(node))
        if self.nodes > MAX_NODES or self.expansions > MAX_ALIAS_EXPANSIONS:
            line, col = _pos(node)
            raise SpecError(_problem(
                self.source.file, line, col,
                f"aliases expand to more than {MAX_NODES} values or {MAX_ALIAS_EXPANSIONS} "
                "alias expansions (an alias bomb?); refusing to expand", dotted(path)))

    def convert(self, node: Node, path: tuple) -> Any:
        self._budget(node, path)
        line, col = _pos(node)
        self.source.values.setdefault(path, f"{self.source.file}:{line}:{col}")
        if node.tag not in _TAGS.get(type(node), ()):
            raise self._refuse(node, path, f"YAML tag '{_tag_name(node.tag)}' is not allowed "
                                           f"on {_NODE_NAMES.get(type(node), 'a value')} in a "
                                           "spec; write plain values, lists and mappings")
        if isinstance(node, ScalarNode):
            return self._scalar(node, path)
        if id(node) in self.open:
            raise self._refuse(node, path, "this alias refers to a value that contains it "
                                           "(a cycle); refusing to expand it")
        if len(path) >= MAX_DEPTH:
            raise self._refuse(node, path, f"nested more than {MAX_DEPTH} levels deep "
                                           "(mappings and lists); a spec is much flatter")
        self.open.add(id(node))
        try:
            return self._collection(node, path)
        finally:
            self.open.discard(id(node))

    def _scalar(self, node: ScalarNode, path: tuple) -> Any:
        try:
            value = self.constructor.construct_object(node, deep=True)
        except (ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError):
            raise self._refuse(node, path, f"cannot read {node.value!r} as "
                                           f"{_tag_name(node.tag)}") from None
        if isinstance(value, (_dt.date, _dt.datetime, bytes)):
            value = node.value
        if isinstance(value, float) and value - value != 0:     # inf, -inf, nan
            raise self._refuse(node, path, f"{node.value!r} is not a finite number; "
                                           "write a number of a usable size")
        return value

    def _collection(self, node: Node, path: tuple) -> Any:
        if isinstance(node, SequenceNode):
            return [self.convert(item, path + (i,)) for i, item in enumerate(node.value)]
        if isinstance(node, MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                line, col = _pos(key_node)
                if key_node.tag == "tag:yaml.org,2002:merge":
                    self.problems.append(_problem(
                        self.source.file, line, col,
                        "merge keys (<<) are not supported; use `extends:` for shared defaults",
                        dotted(path)))
                    continue
                if not isinstance(key_node, ScalarNode):
                    self.problems.append(_problem(self.source.file, line, col,
                                                  "a mapping key must be a plain string",
                                                  dotted(path)))
                    continue
                key = key_node.value
                if key in out:
                    first = self.source.keys.get(path + (key,), "?:?").split(":")[-2]
                    self.problems.append(_problem(
                        self.source.file, line, col,
                        f"duplicate key '{key}' (first written at line {first})",
                        dotted(path + (key,))))
                    continue
                self.source.keys[path + (key,)] = f"{self.source.file}:{line}:{col}"
                out[key] = self.convert(value_node, path + (key,))
            return out
        raise SpecError(_problem(self.source.file, *_pos(node), "unsupported YAML node",
                                 dotted(path)))  # pragma: no cover
