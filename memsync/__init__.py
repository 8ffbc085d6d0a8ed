"""memsync: keep a self-hosted mem0 deployment's vectors and history honest."""

__version__ = "0.3.0.dev0"  # 0.2.0 released; CHANGELOG.md [Unreleased] is what follows it
