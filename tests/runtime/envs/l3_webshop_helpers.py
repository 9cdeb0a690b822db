"""The tests' WebShop-compatible server (tests/fixtures/l3/webshop/fixture_server.py): the module,
imported by path once, and the shell command that runs it as a declared service.

(A uniquely named module: pytest puts each test folder on sys.path.)"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

FIXTURE_SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "l3" / "webshop" / "fixture_server.py"
# the command a service spec runs; append `--port {port}`
FIXTURE_COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURE_SERVER))}"


def _load():
    name = "a2c_tests_webshop_fixture_server"
    if name not in sys.modules:
        if str(FIXTURE_SERVER.parent) not in sys.path:      # its catalogue module lies beside it
            sys.path.insert(0, str(FIXTURE_SERVER.parent))
        spec = importlib.util.spec_from_file_location(name, FIXTURE_SERVER)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


webshop_fixture = _load()
