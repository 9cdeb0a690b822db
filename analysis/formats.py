"""The output formats the analysis writes, named once for its writers and the CLI's choices."""

LEADERBOARD_FORMATS = ("md", "csv", "html")
