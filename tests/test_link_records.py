from raycrawl.storage.link_records import LinkRecordWriter, iter_link_records


def _rec(i):
    return {"url": f"http://h{i % 3}.test/p{i}", "status": 200, "links": [f"http://h.test/{i + 1}"], "digest": bytes(16)}


def test_round_trip_and_rotation(tmp_path):
    w = LinkRecordWriter(tmp_path, records_per_file=10)
    for start in range(0, 35, 7):
        w.write_batch(_rec(i) for i in range(start, start + 7))
    assert len(list((tmp_path / "links").glob("*.rec.gz"))) == 3  # rotation happens between batches, never inside one
    assert [r["url"] for r in iter_link_records(tmp_path)] == [_rec(i)["url"] for i in range(35)]


def test_truncated_tail_loses_only_last_batch(tmp_path):
    w = LinkRecordWriter(tmp_path)
    w.write_batch(_rec(i) for i in range(5))
    w.write_batch(_rec(i) for i in range(5, 10))
    data = w.path.read_bytes()
    w.path.write_bytes(data[:-7])  # torn write at kill -9
    assert [r["url"] for r in iter_link_records(tmp_path)] == [_rec(i)["url"] for i in range(5)]
    # A resumed writer starts a fresh file and nothing earlier is lost.
    w2 = LinkRecordWriter(tmp_path)
    w2.write_batch([_rec(99)])
    assert [r["url"] for r in iter_link_records(tmp_path)][-1] == _rec(99)["url"]
