"""Reading a driver script: YAML with positions, checked against its JSON Schema.

The schema (compiler/schemas/driver-script.schema.json) is the single source of truth for the
script's shape; it is read here as a file, located through `a2c.paths`, because the runtime must
not import the compiler. Errors name `file:line:col`, the field, and what is wrong, like spec
errors do (the approach of compiler/yamlsrc.py, reduced to what a script needs).

A side reply can be computed from the request (`side.template`, `Script.side_answer`): a Jinja
template rendered in Jinja's sandbox with

- `prompt`: the request's text (the system text and the first user message);
- `search(pattern, text=prompt)`: the first match of a regular expression as a dict of its
  named groups plus `match` (the whole match), or None. `pattern` names one of the script's
  `side.patterns` (plain YAML strings, compiled when the script loads, so a bad one is an error
  with its position), else it is a regular expression itself. Matching is multiline;
- `findall(pattern, text=prompt)`: every match, as such dicts;
- `escape(text)`: `text` with regular-expression characters escaped;
- the filters `json` (a JSON value, UTF-8 kept) and `fromjson`; the `do` and loop controls
  extensions; an undefined name is an error.

A string literal inside a template is read as Jinja reads it (like a Python string that is not
raw: `'\\d'`), which is why patterns with backslashes belong in `side.patterns`. Rendering is
deterministic: the same request always gets the same reply, as every scripted reply. The shipped
`narrator` and `reviewer` scripts answer `a2c report --narrate` and `a2c review` this way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jsonschema
import yaml
from jinja2.sandbox import SandboxedEnvironment
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from a2c import paths
from a2c.wires import Usage

SCHEMA_FILE = "driver-script.schema.json"
MAX_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_REPEATS = 100
DEFAULT_SIDE_TEXT = "Scripted session"
MAX_TEMPLATE_TEXT = 2_000_000   # characters a side.template pattern is searched in
_CORE = "tag:yaml.org,2002:"
# Only the tags plain YAML values get (or `!!str` written out); anything else means something to
# some loader and is refused, as in spec files.
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null", "timestamp")}


class ScriptError(ValueError):
    """A script that cannot be used; the message lists every problem found, one per line."""


class TemplateProblem(ValueError):
    """A side.template or pattern that does not compile, or a template that failed rendering."""


@dataclass(frozen=True)
class Turn:
    """One model turn. `kind` is run, write or say; `until` is compiled."""

    index: int
    kind: str
    usage: Usage
    command: str = ""
    timeout: float | None = None
    until: re.Pattern | None = None
    max_repeats: int = DEFAULT_MAX_REPEATS
    path: str = ""
    content: str = ""
    text: str = ""
    name: str = ""


@dataclass(frozen=True)
class Script:
    id: str
    file: str
    turns: tuple[Turn, ...]
    side_text: str = DEFAULT_SIDE_TEXT
    side_usage: Usage = field(default_factory=Usage)
    side_template: Any = None       # side.template compiled, or None
    side_patterns: dict = field(default_factory=dict)   # side.patterns compiled

    def side_answer(self, prompt: str) -> str:
        """The side reply to a request whose text is `prompt`: side.template rendered (raises
        TemplateProblem when it fails), else side.text."""
        if self.side_template is None:
            return self.side_text
        return render_template(self.side_template, prompt, self.side_patterns)


def _groups(m: re.Match) -> dict[str, Any]:
    return {"match": m.group(0), **m.groupdict()}


@lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise TemplateProblem(f"not a valid regular expression: {exc}") from None


@lru_cache(maxsize=1)
def _template_env() -> SandboxedEnvironment:
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                               keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                               extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
    env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False)
    env.filters["fromjson"] = json.loads
    return env


def compile_template(source: str) -> jinja2.Template:
    """The compiled side.template; TemplateProblem names the template line of a syntax error."""
    try:
        return _template_env().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(f"template line {exc.lineno}: {exc.message}") from None


def render_template(template: jinja2.Template, prompt: str,
                    patterns: dict[str, re.Pattern] | None = None) -> str:
    """What `template` answers a request whose text is `prompt` (see the module doc)."""
    prompt = prompt[:MAX_TEMPLATE_TEXT]
    named = dict(patterns or {})

    def _compiled(pattern: str) -> re.Pattern:
        return named[pattern] if pattern in named else compile_pattern(str(pattern))

    def _text(text: Any) -> str:
        return prompt if text is None else str(text)[:MAX_TEMPLATE_TEXT]

    def search(pattern: str, text: Any = None) -> dict[str, Any] | None:
        m = _compiled(pattern).search(_text(text))
        return _groups(m) if m else None

    def findall(pattern: str, text: Any = None) -> list[dict[str, Any]]:
        return [_groups(m) for m in _compiled(pattern).finditer(_text(text))]

    try:
        return template.render(prompt=prompt, search=search, findall=findall, escape=re.escape)
    except TemplateProblem:
        raise
    except Exception as exc:                # a template's own error: said, never a crash
        raise TemplateProblem(f"{type(exc).__name__}: {exc}{_template_line(exc)}") from None


def _template_line(exc: BaseException) -> str:
    """The innermost template line of a rendering error, as " (template line N)"."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (template line {line})" if line else ""


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads((paths.SCHEMAS_DIR / SCHEMA_FILE).read_text(encoding="utf-8"))


def _compose(file: str, text: str) -> tuple[Any, dict]:
    """Plain data plus a map path -> (line, col); duplicate keys and non-core tags refused."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1:1"
        raise ScriptError(f"{file}:{where}: malformed YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise ScriptError(f"{file}:1:1: malformed YAML: {exc}") from None
    if node is None:
        raise ScriptError(f"{file}:1:1: the script is empty; it needs apiVersion, kind, id, turns")
    marks: dict[tuple, tuple[int, int]] = {}
    problems: list[str] = []
    constructor = yaml.constructor.SafeConstructor()

    def convert(n: Node, path: tuple, depth: int = 0) -> Any:
        marks.setdefault(path, (n.start_mark.line + 1, n.start_mark.column + 1))
        if depth > 32:
            raise ScriptError(f"{file}:{marks[path][0]}:{marks[path][1]}: nested too deeply")
        if isinstance(n, ScalarNode):
            if n.tag not in _SCALAR_TAGS:
                problems.append(f"{file}:{marks[path][0]}:{marks[path][1]}: {_dotted(path)}: "
                                f"YAML tag {n.tag!r} is not allowed; write plain values")
                return None
            value = constructor.construct_object(n, deep=True)
            return n.value if not isinstance(value, (str, int, float, bool, type(None))) else value
        if n.tag not in (_CORE + "seq", _CORE + "map"):
            problems.append(f"{file}:{marks[path][0]}:{marks[path][1]}: {_dotted(path)}: "
                            f"YAML tag {n.tag!r} is not allowed; write plain values")
            return None
        if isinstance(n, SequenceNode):
            return [convert(item, path + (i,), depth + 1) for i, item in enumerate(n.value)]
        if isinstance(n, MappingNode):
            out: dict = {}
            for key_node, value_node in n.value:
                key = key_node.value if isinstance(key_node, ScalarNode) else None
                line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
                if key is None or key_node.tag.endswith("merge"):
                    problems.append(f"{file}:{line}:{col}: {_dotted(path)}: a key must be a "
                                    "plain string (no merge keys)")
                    continue
                if key in out:
                    problems.append(f"{file}:{line}:{col}: {_dotted(path + (key,))}: "
                                    f"duplicate key '{key}'")
                    continue
                out[key] = convert(value_node, path + (key,), depth + 1)
            return out
        return None  # pragma: no cover - yaml has no other node kinds

    data = convert(node, ())
    if problems:
        raise ScriptError("\n".join(problems))
    return data, marks


def _dotted(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(script)"


def _where(file: str, marks: dict, path: tuple) -> str:
    probe = tuple(path)
    while probe and probe not in marks:
        probe = probe[:-1]
    line, col = marks.get(probe, (1, 1))
    return f"{file}:{line}:{col}"


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        kinds = [k for k in ("run", "write", "say") if k in error.instance]
        return ("a turn needs exactly one of run, write, say"
                + (f" (found {', '.join(kinds)})" if kinds else " (found none)"))
    if error.validator == "not" and isinstance(error.instance, dict) \
            and {"text", "template"} <= set(error.instance):
        return "give side.text or side.template, not both"
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed",
                                     "unknown field(s); not allowed")
    return error.message


def validate(data: Any, file: str, marks: dict) -> None:
    validator = jsonschema.Draft202012Validator(schema())
    problems = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.path))):
        path = tuple(error.absolute_path)
        problems.append(f"{_where(file, marks, path)}: {_dotted(path)}: {_message(error)}")
    for i, turn in enumerate(data.get("turns") or [] if isinstance(data, dict) else []):
        if isinstance(turn, dict) and isinstance(turn.get("until"), str):
            path = ("turns", i, "until")
            try:
                pattern = re.compile(turn["until"])
            except re.error as exc:
                problems.append(f"{_where(file, marks, path)}: {_dotted(path)}: "
                                f"not a valid regular expression: {exc}")
                continue
            # Scaffolds echo the command back (Gemini CLI's loop warning quotes it): a pattern
            # the command itself matches would end the hold before the awaited output.
            if isinstance(turn.get("run"), str) and pattern.search(turn["run"]):
                problems.append(f"{_where(file, marks, path)}: {_dotted(path)}: the pattern "
                                "matches the command itself, so an echo of the command ends "
                                "the hold; split the literal in the command (\"DO\"\"NE\")")
    side = data.get("side") if isinstance(data, dict) else None
    if isinstance(side, dict) and isinstance(side.get("template"), str):
        try:
            compile_template(side["template"])
        except TemplateProblem as exc:
            problems.append(f"{_where(file, marks, ('side', 'template'))}: side.template: {exc}")
        patterns = side.get("patterns") if isinstance(side.get("patterns"), dict) else {}
        for name, pattern in patterns.items():
            path = ("side", "patterns", name)
            try:
                compile_pattern(pattern) if isinstance(pattern, str) else None
            except TemplateProblem as exc:
                problems.append(f"{_where(file, marks, path)}: {_dotted(path)}: {exc}")
    if problems:
        raise ScriptError("\n".join(problems))


def parse(text: str, file: str = "<script>") -> Script:
    """A checked Script from YAML text; ScriptError lists every problem with its position."""
    data, marks = _compose(file, text.removeprefix("\ufeff"))
    validate(data, file, marks)
    default = Usage.of(data.get("usage"))
    turns = []
    for i, raw in enumerate(data["turns"]):
        usage = Usage.of(raw.get("usage"), default)
        common = {"index": i, "usage": usage, "text": raw.get("text", ""),
                  "name": raw.get("id", "")}
        if "run" in raw:
            until = re.compile(raw["until"]) if raw.get("until") else None
            turns.append(Turn(kind="run", command=raw["run"], timeout=raw.get("timeout"),
                              until=until, max_repeats=raw.get("max_repeats",
                                                               DEFAULT_MAX_REPEATS), **common))
        elif "write" in raw:
            turns.append(Turn(kind="write", path=raw["write"]["path"],
                              content=raw["write"]["content"], **common))
        else:
            turns.append(Turn(kind="say", text=raw["say"], name=common["name"], index=i,
                              usage=usage))
    side = data.get("side") or {}
    template, patterns = None, {}
    if side.get("template"):
        template = compile_template(side["template"])
        patterns = {k: compile_pattern(v) for k, v in (side.get("patterns") or {}).items()}
    return Script(id=data["id"], file=file, turns=tuple(turns),
                  side_text=side.get("text", DEFAULT_SIDE_TEXT),
                  side_usage=Usage.of(side.get("usage")), side_template=template,
                  side_patterns=patterns)


def load(path: str | Path) -> Script:
    """Read and check the script at `path`."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read the script: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ScriptError(f"{path}:1:1: the script is larger than {MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScriptError(f"{path}: not valid UTF-8 at byte {exc.start}") from None
    return parse(text.replace("\r\n", "\n"), str(path))


def shipped(name: str) -> Path:
    """The shipped script `specs/drivers/NAME.yaml`, or NAME itself when it is a path."""
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") or "/" in name:
        return candidate
    return paths.SPECS_DIR / "drivers" / f"{name}.yaml"
