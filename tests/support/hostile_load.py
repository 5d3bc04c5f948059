"""Hostile API traffic for isolation tests, run as a process of its own (so that its work
never shares a GIL with the measuring test): threads that hammer the registry with
oversized and token-heavy GraphQL documents, the largest pages and domain creations.

    python -m tests.support.hostile_load REGISTRY_URL API_KEY SECONDS THREADS

Prints one JSON line: how many answers of each status it got.
"""

from __future__ import annotations

import collections
import json
import sys
import threading
import time

import httpx


def attack(base: str, key: str, until: float, counts: collections.Counter[str]) -> None:
    heavy_graphql = "{ " + " ".join(f"a{i}: __typename" for i in range(3000)) + " }"
    huge = {"query": "{ __typename " + "x" * 1_000_000 + " }"}
    page = "{ entities(first: 500) { nodes { id type controller metadata } totalCount } }"
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        round_ = 0
        while time.monotonic() < until:
            round_ += 1
            name = f"Hostile {threading.get_ident()} {round_}"
            requests = [
                lambda: client.post("/graphql", json={"query": heavy_graphql}),
                lambda: client.post("/graphql", json=huge),
                lambda: client.post("/graphql", json={"query": page}),
                lambda: client.get("/v1/domains", params={"limit": 500}),
                lambda name=name: client.post(
                    "/v1/domains",
                    json={
                        "type": "Organisation",
                        "protocol": "did:ixo:protocol/organisation",
                        "metadata": {"name": name},
                    },
                ),
            ]
            for send in requests:
                try:
                    counts[str(send().status_code)] += 1
                except httpx.HTTPError as error:
                    counts[type(error).__name__] += 1


def main() -> None:
    base, key, seconds, threads = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    until = time.monotonic() + seconds
    counts: collections.Counter[str] = collections.Counter()
    workers = [
        threading.Thread(target=attack, args=(base, key, until, counts)) for _ in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
