"""Package data: the built-in task, agent and suite specs (a package so a wheel ships them as
`a2c.specs`)."""
