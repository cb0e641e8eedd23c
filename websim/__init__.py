"""websim."""
