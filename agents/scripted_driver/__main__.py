"""`python -m a2c.agents.scripted_driver --script PATH --port-file F --log F`: serve a script.

The port is written to --port-file (atomically, after the socket is bound), so the process that
started this one can wait for the file and connect; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from a2c.agents.scripted_driver.script import ScriptError, load, shipped
from a2c.agents.scripted_driver.server import DEFAULT_MODEL, ScriptedDriver


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m a2c.agents.scripted_driver",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True,
                        help="a script file, or the name of a shipped one (specs/drivers/NAME.yaml)")
    parser.add_argument("--port-file", help="write the bound port here")
    parser.add_argument("--log", help="append one JSON line per reply served here")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="the model name it impersonates (when a request names none)")
    parser.add_argument("--check", action="store_true", help="only check the script and exit")
    args = parser.parse_args(argv)
    try:
        script = load(shipped(args.script))
    except ScriptError as exc:
        print(f"scripted driver: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(f"{script.file}: {len(script.turns)} turns, ok")
        return 0
    driver = ScriptedDriver(script, host=args.host, port=args.port, log=args.log,
                            model=args.model)
    port = driver.bind()
    if args.port_file:
        target = Path(args.port_file)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(f"{port}\n", encoding="utf-8")
        os.replace(tmp, target)
    print(f"scripted driver {script.id} on http://{args.host}:{port}", flush=True)

    def _stop(*_):
        threading.Thread(target=driver.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    driver.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
