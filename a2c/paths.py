"""Where the project's resources live, both in a source checkout and in an installed wheel.

The repository keeps `compiler/`, `templates/`, `specs/` at its top level and the package maps them
to `a2c.compiler`, `a2c.templates`, `a2c.specs`. In both layouts the resource folders sit next to
the `compiler` package, so one rule finds them.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from a2c.settings import get_path

# Located, not imported: the runtime uses these paths and must not import the compiler.
_COMPILER_DIR = Path(next(iter(importlib.util.find_spec("a2c.compiler").submodule_search_locations)))
PACKAGE_ROOT = _COMPILER_DIR.resolve().parent
TEMPLATES_DIR = PACKAGE_ROOT / "templates"
SPECS_DIR = PACKAGE_ROOT / "specs"
SCHEMAS_DIR = _COMPILER_DIR.resolve() / "schemas"


def project_root() -> Path:
    """The checkout the user works in: $A2C_PROJECT_ROOT, else the nearest parent with specs/."""
    env = get_path("A2C_PROJECT_ROOT")
    if env:
        return env.resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "specs").is_dir() and (candidate / "pyproject.toml").is_file():
            return candidate
    return here


def cache_dir() -> Path:
    """Models, data and baselines prepared once and reused: $A2C_CACHE, else ~/.cache/a2c."""
    path = get_path("A2C_CACHE") or Path.home() / ".cache" / "a2c"
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir() -> Path:
    """The operator's a2c configuration: $XDG_CONFIG_HOME/a2c, else ~/.config/a2c (not created)."""
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else Path.home() / ".config") / "a2c"


def record_key_file() -> Path:
    """The legacy HMAC record key's place (records made before Ed25519 signing; read only with
    `a2c verify --key-file`): $A2C_RECORD_KEY_FILE, else config_dir()/record.key. It never
    enters a run directory, a bundle or a sandbox."""
    return get_path("A2C_RECORD_KEY_FILE") or config_dir() / "record.key"
