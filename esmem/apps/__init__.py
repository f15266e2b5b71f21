"""Applications built on the domain layer: evaluation, benchmarks, statistics, the context block,
dialogue import, plots, and the agent integrations (MCP, LangChain, LangGraph)."""
