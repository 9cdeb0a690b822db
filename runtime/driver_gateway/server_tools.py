"""Provider-side tools a generation request may not ask for.

Each wire lets a request name tools the *provider* runs: web search and fetch, code execution in
the provider's container, remote MCP servers, file search, image generation, Google Search
grounding. Their work is billed apart from tokens (per search, per container hour, per image),
so the gateway cannot meter or budget it, and it reaches the network on the agent's behalf from
a sandbox that has none (a held-out answer is one web search away). A request that names one is
refused (400 in the wire's shape, never forwarded). Tools the *client* runs (functions, custom
tools, Anthropic's bash/text editor/computer use, OpenAI's local shell, Codex's namespaces) are
ordinary tokens and pass.
"""

from __future__ import annotations

ANTHROPIC_PREFIXES = ("web_search_", "web_fetch_", "code_execution_", "mcp_toolset",
                      "advisor_")
ANTHROPIC_FIELDS = ("mcp_servers", "container")
OPENAI_TYPES = frozenset({"web_search", "web_search_preview", "web_search_preview_2025_03_11",
                          "web_search_2025_08_26", "file_search", "code_interpreter", "mcp",
                          "image_generation"})
OPENAI_FIELDS = ("web_search_options",)
GEMINI_KEYS = frozenset({"googleSearch", "google_search", "googleSearchRetrieval",
                         "google_search_retrieval", "urlContext", "url_context",
                         "codeExecution", "code_execution", "googleMaps", "google_maps",
                         "fileSearch", "file_search", "enterpriseWebSearch",
                         "enterprise_web_search", "retrieval"})


def _types(tools) -> list[str]:
    return [t.get("type") for t in tools if isinstance(t, dict) and
            isinstance(t.get("type"), str)] if isinstance(tools, list) else []


def provider_tools(wire: str, body: dict) -> list[str]:
    """The provider-side tools (or fields asking for them) a request names; [] when none."""
    found: list[str] = []
    if wire == "anthropic":
        found += [t for t in _types(body.get("tools")) if t.startswith(ANTHROPIC_PREFIXES)]
        found += [f for f in ANTHROPIC_FIELDS if body.get(f)]
    elif wire in ("openai-chat", "openai-responses"):
        found += [t for t in _types(body.get("tools")) if t in OPENAI_TYPES]
        found += [f for f in OPENAI_FIELDS if f in body]
    elif wire == "gemini":
        tools = body.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict):
                found += [k for k in tool if k in GEMINI_KEYS]
    return found
