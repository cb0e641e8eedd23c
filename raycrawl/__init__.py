"""raycrawl."""
