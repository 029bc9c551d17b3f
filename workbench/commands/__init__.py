"""CLI commands: each module defines `register(subparsers)`; `cli.py` discovers them all."""
