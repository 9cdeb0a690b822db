"""Build hook: an editable install that maps the checkout's folders into the `a2c` package.

A wheel needs nothing from here: `[tool.hatch.build.targets.wheel.sources]` in pyproject.toml
remaps the folders. hatchling's own editable mode cannot add a prefix to a folder (`compiler` ->
`a2c/compiler`; see pfmoore/editables#20), so for `pip install -e .` this hook adds one small
import hook to the editable wheel, built from the same `only-include` and `sources` settings:
`a2c.compiler` is loaded from ./compiler, `a2c.runtime` from ./runtime and so on, and their
subpackages and data files come straight from the checkout.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

FINDER = "_a2c_editable"

FINDER_SOURCE = '''"""a2c editable install (written by hatch_build.py): top-level a2c packages from the checkout."""

import importlib.machinery
import importlib.util
import os
import sys

MAPPING = {mapping!r}


class A2CEditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = MAPPING.get(fullname)
        if folder is None:
            return None
        init = os.path.join(folder, "__init__.py")
        if not os.path.isfile(init):  # a folder without __init__.py: a namespace package
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [folder]
            return spec
        return importlib.util.spec_from_file_location(
            fullname, init, submodule_search_locations=[folder])


def install():
    if not any(finder is A2CEditableFinder for finder in sys.meta_path):
        sys.meta_path.append(A2CEditableFinder)


install()
'''


def package_mapping(root: str, folders: list[str], sources: dict[str, str]) -> dict[str, str]:
    """{import name: absolute folder} for each top-level folder the wheel includes."""
    root = os.path.abspath(root)
    mapping = {}
    for folder in folders:
        relative = os.path.relpath(os.path.join(root, folder), root)
        target = sources.get(relative + os.sep, relative + os.sep).strip(os.sep)
        mapping[target.replace(os.sep, ".")] = os.path.join(root, relative)
    return dict(sorted(mapping.items()))


class CustomBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if version != "editable":
            return
        mapping = package_mapping(self.root, list(self.build_config.only_include),
                                  dict(self.build_config.sources))
        self._tmp = tempfile.mkdtemp(prefix="a2c-editable-")
        module = os.path.join(self._tmp, f"{FINDER}.py")
        with open(module, "w", encoding="utf-8") as handle:
            handle.write(FINDER_SOURCE.format(mapping=mapping))
        pth = os.path.join(self._tmp, f"{FINDER}.pth")
        with open(pth, "w", encoding="utf-8") as handle:
            handle.write(f"import {FINDER}\n")
        build_data["force_include_editable"][module] = f"{FINDER}.py"
        build_data["force_include_editable"][pth] = f"{FINDER}.pth"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if getattr(self, "_tmp", None):
            shutil.rmtree(self._tmp, ignore_errors=True)
