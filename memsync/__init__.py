"""memsync: keep a self-hosted mem0 deployment's vectors and history honest."""

__version__ = "0.2.0"
