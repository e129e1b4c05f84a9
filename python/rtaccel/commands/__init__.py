"""The rtaccel command's families, one module each (see rtaccel/cli.py)."""
