"""A driver model that plays the LLM from a YAML script, so real agent CLIs run here with no
provider key: the CLI parses the reply, runs the tool in its sandbox and sends the result back.
See docs/scripted-driver.md."""

from a2c.agents.scripted_driver.script import Script, ScriptError, load, parse, shipped
from a2c.agents.scripted_driver.server import ScriptedDriver
from a2c.wires import Usage

__all__ = ["Script", "ScriptError", "ScriptedDriver", "Usage", "load", "parse", "shipped"]
