"""Two-phase index updates (hashes → bit vector → missing fragments) through a real Ray actor."""

from __future__ import annotations

import pytest
from test_index_fragments import _synthetic_pages

from raycrawl.tasks.index_build import build_index
from raycrawl.tasks.index_update import IndexUpdater, UpdateClient, actor_class
from raycrawl.winnowing import fragment_hash, fragments


def test_updates_send_only_new_fragments_and_merge_equals_batch_build():
    pages = _synthetic_pages(3)
    up, client = IndexUpdater(w=30), UpdateClient(w=30)
    sent_per_epoch = []
    for epoch in range(4):
        before = client.bytes_sent
        for url in sorted(pages):
            client.push(up, url, epoch, pages[url][epoch])
        sent_per_epoch.append(client.bytes_sent - before)
    # Later epochs repeat most fragments: far less travels than for the first one.
    assert max(sent_per_epoch[1:]) < 0.5 * sent_per_epoch[0]
    assert client.bytes_sent < 0.5 * client.bytes_full
    assert up.versions() == pages
    assert up.index("global").stats == build_index(pages, "global", w=30).stats


def test_replace_and_remove_delete_unused_fragments():
    pages = _synthetic_pages(4)
    up, client = IndexUpdater(w=30), UpdateClient(w=30)
    url = sorted(pages)[1]
    client.push(up, url, 0, pages[url][0])
    n0 = len(up.fragments)
    client.push(up, url, 0, pages[sorted(pages)[2]][0])  # replace: the old fragments are unused now
    assert up.versions() == {url: {0: pages[sorted(pages)[2]][0]}}

    assert n0 > 0
    assert set(up.fragments) == {fragment_hash(f) for f in fragments(pages[sorted(pages)[2]][0], w=30)}
    assert up.remove_version(url, 0) > 0 and not up.fragments and not up.pages
    with pytest.raises(KeyError, match="neither indexed nor sent"):
        up.add_version(url, 1, [12345], {})


@pytest.mark.slow
def test_remote_index_actor(ray_local):
    pages = _synthetic_pages(5)
    actor = actor_class().remote(w=30)
    client = UpdateClient(w=30)
    for epoch in range(2):
        for url in sorted(pages)[:10]:
            client.push(actor, url, epoch, pages[url][epoch], remote=True)
    import ray

    got = ray.get(actor.versions.remote())
    assert got == {u: {e: pages[u][e] for e in range(2)} for u in sorted(pages)[:10]}
