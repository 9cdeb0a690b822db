"""Typed records passed between the compiler, the runtime and the analysis (stdlib only)."""
