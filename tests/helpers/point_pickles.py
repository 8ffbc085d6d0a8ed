"""Stored points as each app environment's qdrant-client writes them, for the unit tier.

``python -m tests.helpers.point_pickles`` runs ``_MAKE`` in the interpreter of every app
environment (``tests/helpers/app_envs.py``): a real ``QdrantClient(path=...)`` upserts points of
every shape memsync meets (mem0's unnamed vector, alone or with the ``bm25`` sparse vector, a
bare list, named vectors, an int id, vectors of 1, 1,000 and 1,001 floats, a payload holding a
list of floats) and the blobs are read back from its ``storage.sqlite``; plus the same point
pickled with protocols 2 and 5. It writes them to ``POINT_PICKLES`` (base64), which
``tests/unit/test_point_decode.py`` reads. Rerun it when an app environment's pins change.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers import app_envs

POINT_PICKLES = Path(__file__).resolve().parents[1] / "unit" / "point_pickles.json"

_MAKE = r"""
import base64, json, pickle, random, sqlite3, sys, tempfile, uuid
from pathlib import Path
import qdrant_client
from qdrant_client import QdrantClient, models

rng = random.Random(26)
def floats(n):
    return [rng.uniform(-1, 1) for _ in range(n)]
def pid(i):
    return str(uuid.UUID(int=rng.getrandbits(128)))

cases = []
root = Path(tempfile.mkdtemp())
client = QdrantClient(path=str(root))
def add(case, name, config, points, sparse=None):
    client.create_collection(name, vectors_config=config, sparse_vectors_config=sparse)
    client.upsert(name, points=points)
    db = sqlite3.connect(root / "collection" / name / "storage.sqlite")
    for (blob,) in db.execute("SELECT point FROM points ORDER BY rowid"):
        cases.append({"case": case, "blob": base64.b64encode(blob).decode()})
    db.close()

payload = {"data": "likes tea", "user_id": "alice", "hash": "h", "scores": [0.25, 0.5, 0.75]}
add("bare list, 384", "bare", models.VectorParams(size=384, distance="Cosine"),
    [models.PointStruct(id=pid(0), vector=floats(384), payload=payload)])
add("unnamed, 384", "unnamed", {"": models.VectorParams(size=384, distance="Cosine")},
    [models.PointStruct(id=pid(0), vector={"": floats(384)}, payload=payload)])
add("unnamed with bm25, 384", "hybrid", {"": models.VectorParams(size=384, distance="Cosine")},
    [models.PointStruct(id=pid(0), payload=payload, vector={
        "": floats(384),
        "bm25": models.SparseVector(indices=[3, 9], values=[0.5, 1.5])})],
    sparse={"bm25": models.SparseVectorParams()})
add("named only", "named", {"dense": models.VectorParams(size=8, distance="Cosine")},
    [models.PointStruct(id=pid(0), vector={"dense": floats(8)}, payload=payload)])
add("int id", "intid", models.VectorParams(size=16, distance="Dot"),
    [models.PointStruct(id=7, vector=floats(16), payload=payload)])
for size in (1, 1000, 1001):
    add(f"{size} floats", f"size{size}", models.VectorParams(size=size, distance="Dot"),
        [models.PointStruct(id=pid(0), vector=floats(size), payload={"data": "x"})])
client.close()
point = models.PointStruct(id=pid(0), vector={"": floats(384)}, payload=payload)
for protocol in (2, 5):
    blob = pickle.dumps(point, protocol=protocol)
    cases.append({"case": f"protocol {protocol}", "blob": base64.b64encode(blob).decode()})
print(json.dumps({"qdrant_client": __import__("importlib.metadata").metadata.version(
    "qdrant-client"), "cases": cases}))
"""


def make() -> dict[str, object]:
    """The stored points of every app environment, by mem0ai version."""
    made: dict[str, object] = {}
    for version in app_envs.APP_ENVS:
        app_envs.build(version)
        out = subprocess.run(
            [str(app_envs.python_of(version)), "-c", _MAKE],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        made[version] = json.loads(out)
    return made


if __name__ == "__main__":
    POINT_PICKLES.write_text(json.dumps(make(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {POINT_PICKLES}")
