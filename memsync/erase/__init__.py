"""Erasure: remove a memory from every place it lives, and keep the ledger of erased ids.

``apply`` erases through a route and proves it (``proof``); ``copies``, ``versions`` and
``old_store`` purge the set-aside copies and old object versions that still hold it (``holding``
finds them; ``memsync.snapshot.purge_memory`` rewrites snapshots); ``ledger`` keeps the erased
memory ids (never their text).
"""
