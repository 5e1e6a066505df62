"""Command-line interface (typer + rich). Each area registers its commands in :mod:`app`."""
