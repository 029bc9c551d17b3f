"""Provenance Workbench: which documents did an answer really come from?

Data flows one way (docs/design.md §6): corpus → retrieval → tools → providers/agent →
provenance → faithfulness → trace store → app / notebooks / CLI.
"""

__version__ = "0.1.0"
