"""raycrawl/commands."""
