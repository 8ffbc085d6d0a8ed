"""``forget`` and ``prune``: deletes that always go through mem0, then are proven.

``select_targets`` and ``select_expired`` are pure (``memsync.forget.select``). ``run_forget``
and ``run_expiry_prune`` (``memsync.forget.apply``) delete through the writer of a route
(``memsync.routes``: the app's agent, directly, or in a maintenance window; the entity store is
initialised first, so entity links go too), re-read the stores and require every target gone
with its DELETE recorded and no entity link left. ``--erase`` (``erase_texts``) then removes
the memory's text from every place memsync controls. With no route the request (an ``Ask``:
ids or a scope, never the ids a scope resolved to) is queued (``memsync.routes.queue``), and
``apply_pending`` (``memsync.forget.queued``) applies the queue later.
"""

from __future__ import annotations

from memsync.forget.apply import (
    INTENT,
    Deleted,
    clear_intent,
    delete_through,
    delete_with,
    finish,
    load_intent,
    look,
    queue,
    reread,
    run_ask,
    run_expiry_prune,
    run_forget,
    save_intent,
    unlink_entities,
)
from memsync.forget.queued import Applied, QueueRun, apply_pending
from memsync.forget.select import (
    Ask,
    Forgotten,
    Targets,
    prove_gone,
    refuse_bad_mem0,
    select_expired,
    select_targets,
)

__all__ = [
    "INTENT", "Applied", "QueueRun", "Ask", "Deleted", "Forgotten", "Targets", "apply_pending", "clear_intent",
    "delete_through", "delete_with", "finish", "load_intent", "look", "prove_gone", "queue",
    "refuse_bad_mem0", "reread", "run_ask", "run_forget", "run_expiry_prune", "save_intent",
    "select_expired", "select_targets", "unlink_entities",
]  # fmt: skip
