"""Priorities in the live frontier (issue 18): the sieve's front queues, the focused distributor, and a
URL's level through the workbench, the virtualizer, a crash (recover) and a process kill."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import redis

from raycrawl.actors.frontier.distributor import Distributor
from raycrawl.actors.frontier.sieve import Sieve
from raycrawl.actors.frontier.sieve_shards import SieveShards
from raycrawl.actors.frontier.virtualizer import Virtualizer
from raycrawl.actors.frontier.workbench import Release, Workbench, is_robots
from raycrawl.policies.assignment import SHARDS
from raycrawl.policies.focus import FocusPolicy, LinearClassifier, TermQuery
from raycrawl.policies.front_queues import split_level
from raycrawl.policies.politeness import Politeness
from raycrawl.servers import url_of


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def read_all(shards: SieveShards, levels: int, bias: float, n: int = 7) -> list[tuple[str, int]]:
    offsets: dict[int, int] = {}
    out = []
    while True:
        urls, lvls, qids, ends = shards.read_front(offsets, n, levels, bias)
        if not urls:
            assert shards.exhausted(offsets)
            return out
        offsets.update(zip(qids, ends, strict=True))
        out += zip(urls, lvls, strict=True)


def test_a_url_keeps_the_level_of_its_first_enqueueing_across_a_kill(tmp_path: Path) -> None:
    sieve = Sieve(tmp_path, batch_size=10_000)
    sieve.enqueue(["http://a.test/1", "http://a.test/2"], [3, 0])
    sieve.flush()
    sieve.enqueue(["http://a.test/2", "http://a.test/3", "http://a.test/1"], [5, 2, 0])  # repeats: levels ignored
    sieve.enqueue(["http://a.test/4"], [7])
    # no flush, no close: the process "died" with /3 and /4 in the pending log only
    with open(tmp_path / "queue.2", "ab") as f:
        f.write(b"http://ghost.test/uncommitted\n")
    again = Sieve(tmp_path, batch_size=10_000)
    again.flush()
    got = {lvl: again.store.read_queue(0, 100, lvl)[0] for lvl in range(8)}
    assert got == {0: ["http://a.test/2"], 1: [], 2: ["http://a.test/3"], 3: ["http://a.test/1"], 4: [], 5: [], 6: [],
                   7: ["http://a.test/4"]}


KILLED = r"""
import sys
from raycrawl.actors.frontier.sieve_shards import SieveShards
from raycrawl.policies.assignment import SHARDS
s = SieveShards(sys.argv[1], range(SHARDS), batch_size=300)
i = 0
while True:
    urls = [f"http://k{j % 17}.test/{j}" for j in range(i, i + 40)]
    s.enqueue(urls, [j % 4 for j in range(i, i + 40)])
    print(i + 40, flush=True)  # everything below this index is durably enqueued
    i += 40
"""


def test_levels_survive_kill9_of_the_sieve(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], stdout=subprocess.PIPE, cwd=root,
                            env={**os.environ, "PYTHONPATH": str(root)})
    acked, deadline = 0, time.monotonic() + 60
    while acked < 1000 and time.monotonic() < deadline:  # several flushes (batch 300)
        acked = int(proc.stdout.readline() or 0)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    acked = max([acked] + [int(x) for x in out.split()])
    got = read_all(SieveShards(tmp_path, range(SHARDS)), 4, 2.0, n=50)
    urls = [u for u, _ in got]
    assert len(urls) == len(set(urls)), "a URL came out twice"
    level = dict(got)
    for j in range(acked):
        assert level[f"http://k{j % 17}.test/{j}"] == j % 4


def test_read_front_draws_levels_with_a_bias_and_offsets_resume_exactly(tmp_path: Path) -> None:
    shards = SieveShards(tmp_path, range(SHARDS), batch_size=10**6)
    rng = random.Random(3)
    urls = [f"http://h{i % 23}.test/{i}" for i in range(2000)]
    levels = [rng.randrange(4) for _ in urls]
    shards.enqueue(urls, levels)
    got = read_all(shards, 4, 3.0)
    assert sorted(got) == sorted(zip(urls, levels, strict=True))  # every URL once, with its level
    order = np.array([lvl for _, lvl in got])
    assert not np.all(np.diff(order) <= 0), "randomised: lower levels are not starved"
    first = order[:500]
    assert first.mean() > max(2.4, np.mean(levels) + 0.8)  # but higher ones come first
    # A higher-level link waiting in the batch is merged before a lower-level backlog is read.
    shards.enqueue([f"http://late.test/{i}" for i in range(5)], [3] * 5)
    offsets: dict[int, int] = {}
    shards.enqueue(["http://z.test/0"], [0])
    shards.flush()
    shards.enqueue(["http://z.test/hot"], [2])
    seen = []
    while True:
        urls_, lvls, qids, ends = shards.read_front(offsets, 1, 4, 1e9)
        if not urls_:
            break
        offsets.update(zip(qids, ends, strict=True))
        seen += urls_
    assert seen.index("http://z.test/hot") < seen.index("http://z.test/0")


def test_focused_distributor_keeps_the_front_and_levels_survive_virtualizer_and_recover(client, tmp_path) -> None:
    hosts = [f"http://f{i}.test" for i in range(30)]
    shards = SieveShards(tmp_path / "sieve", range(SHARDS), batch_size=10**6)
    want: dict[str, int] = {}
    for j in range(12):
        for i, h in enumerate(hosts):
            want[f"{h}/p{j}"] = (i + j) % 3
    shards.enqueue(list(want), list(want.values()))
    wb = Workbench(client, "fq:", Politeness(host_delay=0, ip_delay=0))
    virt = Virtualizer(tmp_path / "virt", wb.frontier, budget=4)  # most URLs go through disk
    dist = Distributor(wb, virt, front_size=5, batch=64, levels=3, bias=2.0, focused=True)
    resolve = lambda names: dict.fromkeys(names, "127.0.0.9")  # noqa: E731
    fetched: dict[str, int] = {}
    crashed = False
    now = 1000.0
    while True:
        dist.step(shards.read_front, resolve)
        dist.fetchers_waited()  # a focused front does not grow
        assert wb.frontier.front_size() <= 5 and dist.required_front == 5
        got, _ = wb.acquire(now, 3)
        if not got and shards.exhausted(wb.frontier.sieve_offsets(dist.queues)) and not wb.frontier.front_size():
            break
        if got and not crashed:  # a crash with these in flight: recover() puts the entries back
            crashed = True
            assert wb.recover(now) == len(got)
            continue
        for host, ip, entry in got:
            if not is_robots(entry):
                path, level = split_level(entry)
                assert url_of(host, path) not in fetched
                fetched[url_of(host, path)] = level
            wb.release([Release(host, ip, end=now)])
        now += 1
    assert crashed and virt.spilled > 0 and virt.refilled > 0
    assert fetched == want


def test_naive_bayes_as_a_linear_classifier_is_sklearns_predict_proba(tmp_path: Path) -> None:
    from scipy.sparse import csr_matrix
    from sklearn.naive_bayes import MultinomialNB

    rng = np.random.default_rng(5)
    terms = [f"t{i}" for i in range(40)]
    x = rng.poisson(rng.uniform(0.1, 2, 40), size=(300, 40))
    y = x[:, :5].sum(1) > x[:, 5:10].sum(1)
    nb = MultinomialNB(alpha=0.1).fit(x, y)
    clf = LinearClassifier.from_naive_bayes(nb, terms)
    want = nb.predict_proba(x)[:, list(nb.classes_).index(True)]
    assert np.allclose(clf.score_matrix(csr_matrix(x.astype(np.float32)), terms), want, atol=1e-6)
    for row, p in zip(x[:20], want[:20], strict=True):
        assert clf.score_counts({t: int(c) for t, c in zip(terms, row, strict=True) if c}) == pytest.approx(p, abs=1e-9)
    policy = FocusPolicy("best-first", 10, clf, "topic:x")
    policy.save(tmp_path / "m.focus.json")
    again = FocusPolicy.load(tmp_path / "m.focus.json")
    assert again.to_dict() == policy.to_dict()
    scores = np.linspace(0, 1, 101)
    assert again.link_levels(scores).tolist() == [again.link_level(s) for s in scores]
    assert again.link_level(1.0) == again.seed_level == 9 and again.link_level(0.0) == 0
    q = TermQuery(["garden"], 2)
    assert q.score_counts({"garden": 2}) == 0.5 and q.score_counts({}) == 0.0
    assert FocusPolicy("bfs", 10, q).levels == 1


@pytest.mark.parametrize("content", [None, b"\x00\x01", b"{}", b'{"format": "raycrawl-focus-1", "policy": "x"}'])
def test_a_bad_focus_model_is_one_line(tmp_path: Path, capsys, content) -> None:
    from raycrawl.cli import main

    model = tmp_path / "m.focus.json"
    if content is not None:
        model.write_bytes(content)
    seeds = tmp_path / "seeds"
    seeds.write_text("http://127.0.0.1:9/\n")
    assert main(["crawl", "--seeds", str(seeds), "--out", str(tmp_path / "o"), "--focus", str(model)]) == 2
    err = capsys.readouterr().err
    assert "focus model" in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()
