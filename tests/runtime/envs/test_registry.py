"""The environment-kind registry: every kind folder registers one EnvKind, the task schema's enum
names exactly the registered kinds, and the kinds' data generators are the data layer's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2c.runtime.data import generators
from a2c.runtime.envs import registry
from a2c.runtime.envs.prompts import PromptFormat, get_format

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "compiler" / "schemas" / "task.schema.json").read_text())


def _enums(node, path=""):
    """Every `enum` in a JSON Schema, by its JSON pointer."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "enum":
                yield path, value
            yield from _enums(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _enums(value, f"{path}/{i}")


def test_schema_env_kinds_are_the_registered_kinds():
    env_kind = SCHEMA["properties"]["grader"]["properties"]["env"]["properties"]["kind"]
    assert sorted(env_kind["enum"]) == registry.names()


def test_data_generators_match_the_schema_and_the_kinds():
    source = SCHEMA["properties"]["data"]["properties"]["source"]
    gen_enums = [v for p, v in _enums(source) if p.endswith("/generator/enum")]
    kinds_generators = {k.generator for k in registry.kinds().values() if k.generator}
    assert kinds_generators <= set(generators.names())
    assert set(generators.names()) == kinds_generators | set(generators._REGISTRY)
    if gen_enums:                                  # the schema lists generators: the same ones
        assert all(sorted(e) == generators.names() for e in gen_enums)


@pytest.mark.parametrize("name", registry.names())
def test_each_kind_is_complete(name):
    kind = registry.get_kind(name)
    assert kind.name == name and kind.score_key in ("success", "reward")
    fmt = get_format(name)
    assert isinstance(fmt, PromptFormat) and fmt.kind == name
    assert type(fmt) is kind.prompt_format()
    if kind.generator:
        assert callable(generators.get_generator(kind.generator))
    rule = kind.agent_path_filter()
    assert rule is None or callable(rule)


def test_unknown_kind_and_registering_twice():
    with pytest.raises(ValueError, match=r"unknown environment kind 'nope' \(known: alfworld, "):
        registry.get_kind("nope")
    with pytest.raises(ValueError, match="no prompt format for environment kind 'nope'"):
        get_format("nope")
    with pytest.raises(ValueError, match="registered twice"):
        @registry.env_kind
        class Other(registry.EnvKind):
            name = "textworld"


def test_the_registry_imports_light():
    """The compiler renders PROMPT_FORMAT.md through the registry: no engines, no torch."""
    code = ("import sys; from a2c.runtime.envs import registry; "
            "assert not [m for m in sys.modules if m.startswith('a2c.runtime.envs.')"
            " and m != 'a2c.runtime.envs.registry'], sys.modules; "
            "names = registry.names(); "
            "from a2c.runtime.envs.prompts import describe; [describe(n) for n in names]; "
            "heavy = {'torch', 'textworld', 'alfworld', 'bm25s', 'transformers'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)
