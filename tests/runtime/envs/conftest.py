"""Shared fixtures of the level-3 tests: TextWorld games made offline, scripted policies."""

from __future__ import annotations

import re
import threading

import pytest


@pytest.fixture(scope="session")
def tw_games(tmp_path_factory):
    """Three training and three held-out TextWorld games (real engine, ~2 s)."""
    from a2c.runtime.envs.textworld.games import generate

    root = tmp_path_factory.mktemp("twgames")
    splits = generate({"splits": {"train": 3, "test": 3}}, 11, root)
    return root, splits


class OraclePolicy:
    """Plays each game's walkthrough: finds the goal in the prompt, acts by turn number."""

    def __init__(self, records, bad_ids=()):
        self.by_goal = {r["prompt"].strip(): r for r in records}
        self.bad_ids = set(bad_ids)
        self.batch_sizes: list[int] = []

    def __call__(self, prompts):
        self.batch_sizes.append(len(prompts))
        outs = []
        for msgs in prompts:
            first = msgs[1]["content"]
            m = re.search(r"Goal: (.*?)\n\nObservation:", first, re.S)
            rec = self.by_goal[m.group(1).strip()]
            if rec["id"] in self.bad_ids:
                outs.append("   ")
                continue
            n = sum(1 for x in msgs if x["role"] == "assistant")
            walk = rec["walkthrough"]
            outs.append(walk[n] if n < len(walk) else "look")
        return outs


@pytest.fixture
def oracle():
    return OraclePolicy


@pytest.fixture(scope="module")
def webshop_url():
    """The project's WebShop-compatible fixture server on a free loopback port."""
    from l3_webshop_helpers import webshop_fixture as fx

    srv = fx.make_server(0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()
