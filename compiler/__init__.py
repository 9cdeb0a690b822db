"""The compiler (`a2c.compiler`): specs (YAML) to bundles. Imports the contracts and shared helpers,
never the analysis, and the runtime once (docs/architecture.md, "The one exception")."""
