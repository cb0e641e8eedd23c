"""Credentials: read from a file or the environment (never a command-line value, which ``ps``
shows), and the one place that decides what is secret so that nothing a crawl writes — warcinfo
records, ``raycrawl settings``, the report, ``OUT/redis-url``, logs, error messages — carries one.

What is secret: the password of any URL (``redis://user:PASSWORD@host``), every value read by
:func:`read_secret` (a password file, ``RAYCRAWL_REDIS_PASSWORD``), and the settings named in
:data:`SECRET_SETTINGS`. They are shown as ``***``.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from raycrawl.errors import UserError

MASK = "***"
PASSWORD_ENV = "RAYCRAWL_REDIS_PASSWORD"
# Settings whose whole value is a credential (none today: credentials are given as files, whose
# paths are not secret).
SECRET_SETTINGS: frozenset[str] = frozenset()
# scheme://user:password@  — the password part, wherever a URL appears in a text
_URL_PASSWORD = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s:]*):([^/@\s]+)@")
_known: set[str] = set()  # secret values this process has read: scrubbed from every text it writes

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """``host`` (a name or an address) is this machine's loopback: a listener there needs no
    credential; anywhere else it does (the console's token, the daemon's password)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def remember(secret: str | None) -> None:
    """Scrub ``secret`` from whatever this process writes from now on (log lines, messages)."""
    if secret and len(secret) >= 3:  # (shorter would mask ordinary text; such a password is no secret anyway)
        _known.add(secret)
        _known.add(quote(secret, safe=""))


def read_secret(path: str | Path, what: str) -> str:
    """The credential in file ``path`` (its first line, without the line end); a missing, empty or
    unreadable file is a :class:`UserError` naming ``what``. A file others may read is used, with a
    warning (as ssh does for keys, but without refusing)."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{what} {path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    secret = lines[0].strip() if lines else ""
    if not secret:
        raise UserError(f"{what} {path}: the file is empty")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s %s can be read by other users (chmod 600 it)", what, path)
    remember(secret)
    return secret


def env_secret(name: str = PASSWORD_ENV) -> str | None:
    value = os.environ.get(name) or None
    remember(value)
    return value


def redis_password(password_file: str | Path | None, url: str | None = None) -> str | None:
    """The Redis password: from ``password_file`` (``--redis-password-file``), else
    ``$RAYCRAWL_REDIS_PASSWORD``, else ``url``'s own; remembered for scrubbing."""
    if password_file:
        return read_secret(password_file, "--redis-password-file")
    password = env_secret() or url_password(url)
    remember(password)
    return password


def url_password(url: str | None) -> str | None:
    if not url:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def with_password(url: str, password: str | None) -> str:
    """``url`` with ``password`` in its authority (its user, if any, kept), as redis-py reads it."""
    if not password:
        return url
    remember(password)
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    user = quote(unquote(parts.username), safe="") if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def scrub(text: str) -> str:
    """``text`` with every URL password and every remembered secret replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    for secret in sorted(_known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact(name: str, value: Any) -> Any:
    """A setting's value as it may be shown or written."""
    if name in SECRET_SETTINGS and value:
        return MASK
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [redact(name, v) for v in value]
    return value


class ScrubFilter(logging.Filter):
    """Scrubs log records (on a handler: it sees every record the handler writes)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info:  # an exception's text may quote a URL
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def scrub_logs(logger: logging.Logger | None = None) -> None:
    """Put a :class:`ScrubFilter` on every handler of ``logger`` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubFilter) for f in handler.filters):
            handler.addFilter(ScrubFilter())
