"""The offline demo deployment: providers, builder and faults (``python -m memsync.demo``)."""
