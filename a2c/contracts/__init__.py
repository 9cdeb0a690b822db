"""Typed, versioned records passed between the compiler, the runtime and the analysis."""
