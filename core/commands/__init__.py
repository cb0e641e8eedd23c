"""raycrawl.commands: one module per CLI command (core/commands/)."""
