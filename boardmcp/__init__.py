"""The board as an MCP server: the tools agents call to read and change their team's
board, over Streamable HTTP at ``/mcp/`` and over stdio (``clawboo mcp --agent A``)."""
