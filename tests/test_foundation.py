"""Foundation: CLI contract, embedded Redis, URL canonicalisation, text pipeline."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis

from raycrawl import text
from raycrawl.cli import main
from raycrawl.errors import UserError
from raycrawl.redis_server import EmbeddedRedis
from raycrawl.urls import canonicalize


def test_cli_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "crawl" in capsys.readouterr().out


def test_cli_bad_arguments_exit_2_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "raycrawl", "no-such-command"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_embedded_redis_survives_kill_with_aof(tmp_path):
    server = EmbeddedRedis(tmp_path).start()
    client = redis.Redis.from_url(server.url)
    client.set("frontier", "kept")
    client.execute_command("BGREWRITEAOF")
    client.rpush("queue", *range(100))
    import time

    time.sleep(1.2)  # appendfsync everysec
    server.kill()
    again = EmbeddedRedis(tmp_path).start()
    client = redis.Redis.from_url(again.url)
    assert client.get("frontier") == b"kept"
    assert client.llen("queue") == 100
    again.stop()


@pytest.mark.parametrize("squatter", ["http", "redis"])
def test_embedded_redis_port_taken_before_it_binds(tmp_path, monkeypatch, squatter):
    """The port free_port() chose is taken by another process before the server binds it (a run
    once met an HTTP server there, "Protocol error, got '<'"): the server moves to another port and
    never takes a foreign server, of another kind or another Redis, for its own; a port the caller
    chose is an error."""
    import socket
    import threading
    from http.server import HTTPServer, SimpleHTTPRequestHandler

    from raycrawl import redis_server

    if squatter == "http":
        foreign = HTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
        threading.Thread(target=foreign.serve_forever, daemon=True).start()
        port, stop = foreign.server_address[1], lambda: (foreign.shutdown(), foreign.server_close())
    else:
        other = EmbeddedRedis(tmp_path / "other").start()
        redis.Redis.from_url(other.url).set("whose", "other")
        port, stop = other.port, other.stop
    picks = iter([port])
    real = redis_server.free_port
    monkeypatch.setattr(redis_server, "free_port", lambda: next(picks, None) or real())
    try:
        server = EmbeddedRedis(tmp_path / "ours").start()
        try:
            assert server.port != port
            client = redis.Redis.from_url(server.url)
            assert client.get("whose") is None and client.info("server")["process_id"] == server.proc.pid
        finally:
            server.stop()
        with pytest.raises(UserError, match=f"could not listen on port {port}"):
            EmbeddedRedis(tmp_path / "fixed", port=port).start()
    finally:
        stop()
    with socket.socket() as s:  # nothing of ours is left listening on the squatted port
        assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        ("HTTP://Www.Example.TEST:80/a/./b/../c?x=1#frag", None, "http://www.example.test/a/c?x=1"),
        ("../d e", "http://h.test/a/b/c", "http://h.test/a/d%20e"),
        ("//H.test:8080/%7euser/%2fa", "http://x.test/", "http://h.test:8080/~user/%2Fa"),
        ("https://h.test:443", None, "https://h.test/"),
        ("?q=2", "http://h.test/p/q?x=1", "http://h.test/p/q?q=2"),
        ("http://h.test/\u00e4", None, "http://h.test/%C3%A4"),
        ("mailto:a@b.test", None, None),
        ("javascript:void(0)", None, None),
        ("http://h.test:99999/", None, None),
    ],
)
def test_canonicalize(url, base, expected):
    assert canonicalize(url, base) == expected


def test_the_runs_ray_workers_listen_on_ports_of_their_own(ray_local):
    """The run's Ray cluster (tests/local_cluster.py) gives its workers ports of a block of their own,
    below the kernel's ephemeral ports: a worker listening on a port the kernel handed out once took
    the port a test had freed to restart its S3 server on (four tests failed at once)."""
    import psutil
    from local_cluster import worker_ports

    @ray_local.remote(num_cpus=0)
    class Listener:
        def ports(self) -> list[int]:
            return [c.laddr.port for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]

    block = worker_ports(0)
    actors = [Listener.remote() for _ in range(3)]
    for ports in ray_local.get([a.ports.remote() for a in actors]):
        assert ports and all(block["min_worker_port"] <= p <= block["max_worker_port"] for p in ports), ports
    for a in actors:
        ray_local.kill(a)


def test_text_pipeline_drops_markup_scripts_and_stopwords():
    html = b"<html><head><title>Running</title><script>var hidden=1</script></head><body><p>The dogs <b>are</b> jumping"
    assert text.terms(html) == ["run", "dog", "jump"]
    # Same visible text, different markup: same digest.
    other = "<html><head><title>Running</title></head><body><div>The  DOGS are jumping</div></body></html>"
    assert text.content_digest(text.visible_text(html)) == text.content_digest(text.visible_text(other))


def test_stopwords_are_scikit_learns_list():
    """core/stopwords_en.py is a copy of scikit-learn's English list (installed with the tests)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert text.stopwords() == ENGLISH_STOP_WORDS and len(ENGLISH_STOP_WORDS) == 318
