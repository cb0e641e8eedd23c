"""A real S3 API server on loopback for the object-store tests: moto's server mode (from PyPI),
started and stopped by the test like the embedded Redis. It keeps objects in memory, so a
restarted server is an empty one (:meth:`MotoS3.start` makes the bucket again)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from raycrawl.redis_server import free_port

BUCKET = "crawls"
# The client reads these as AWS's own tools do (storage/out_store.py); moto takes any key.
ENV = {"AWS_ACCESS_KEY_ID": "test-key", "AWS_SECRET_ACCESS_KEY": "test-secret", "AWS_REGION": "us-east-1",
       "AWS_ALLOW_HTTP": "true"}


class MotoS3:
    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        """``host``: the address it listens on (a bridge's, for machines in network namespaces)."""
        self.port = port or free_port()
        self.host = host
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        return {**ENV, "AWS_ENDPOINT_URL": self.endpoint}

    def start(self) -> MotoS3:
        server = Path(sys.executable).parent / "moto_server"
        self.proc = subprocess.Popen([str(server), "-H", self.host, "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        self.client().create_bucket(Bucket=BUCKET)
        return self

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ENV["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=ENV["AWS_SECRET_ACCESS_KEY"], region_name=ENV["AWS_REGION"])

    def objects(self, prefix: str) -> dict[str, bytes]:
        """key (under ``prefix/``) -> bytes of every stored object, read with boto3 (not our client)."""
        c, out = self.client(), {}
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
            for o in page.get("Contents", []):
                out[o["Key"][len(prefix) + 1:]] = c.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
        return out

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def __enter__(self) -> MotoS3:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def set_env(monkeypatch, s3: MotoS3) -> None:
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)


def environ(s3: MotoS3) -> dict[str, str]:
    return {**os.environ, **s3.env()}
