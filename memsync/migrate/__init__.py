"""``memsync migrate``: carry a deployment to a new embedder or a new vector store.

The first slice (issue 14): ``plan`` (pure: what differs, what is refused, the work),
``copy`` (batches through mem0's own vector store objects on the new config, re-embedding
with retries when the embedder changes), ``journal`` (``<state_dir>/migrate.json``: a killed
migration resumes), ``verify`` (ids, payloads, dimensions, entity links, a search sample),
and ``run`` (the I/O half: capture, copy, verify, check). Memory ids are kept, so history.db
stays valid as it is. The second slice: ``switch`` (``--switch``: a pinned snapshot of the
source, the app's writes stopped through the maintenance window, a final catch-up, the app's
new mem0 config written by ``app_config``, the app started on the target) and
``source_record`` (the old deployment's config, kept for the cleanup).
"""
