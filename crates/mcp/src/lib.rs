//! glassbox-mcp
