"""A filesystem that can crash as a machine does: what was written but never fsynced is lost.

The tests' stand-in for a power cut or a VM whose host fails (issue 49). A FUSE filesystem over two
trees of a backing directory: ``cache/``, what programs see (every write, as in the kernel's page
cache), and ``disk/``, what a crash keeps. A write reaches ``cache/`` only, its byte range noted
dirty; ``fsync``/``fdatasync`` copies the file's dirty ranges to ``disk/`` before it returns.
:meth:`CrashFS.crash` kills the filesystem's process (every call in progress fails), unmounts it,
and puts ``disk/`` back as ``cache/``: the machine came back.

The model, stated so a test's claim can be read against it: file *data* is lost unless fsynced
(ext4's delayed allocation, XFS, any filesystem after a power cut); *metadata* — a file made,
renamed, truncated, unlinked, a directory made — is kept at once, as a journal that commits before
the crash would keep it. So a file renamed over another after unsynced writes comes back short
(ext4's zero-length-file case), but a file created and never named durably by an fsync of its
directory does not vanish: the model is harsher than a real disk for data, kinder for names.

Run as ``python tests/crash_fs.py BACKING MOUNTPOINT`` (foreground; needs /dev/fuse, libfuse3 and
root or fusermount3): :class:`CrashFS` does that.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def serve(backing: Path, mountpoint: Path) -> None:
    import mfusepy as fuse

    cache, disk = backing / "cache", backing / "disk"

    class Ops(fuse.Operations):
        use_ns = True

        def __init__(self) -> None:
            self.mutex = threading.Lock()
            self.dirty: dict[int, list[tuple[int, int]]] = {}  # cache inode → unsynced (offset, length)
            self.ino: dict[int, int] = {}  # open handle → its inode

        def _c(self, path: str) -> str:
            return str(cache) + path

        def _d(self, path: str) -> str:
            return str(disk) + path

        def _both(self, fn, path: str, *args) -> None:
            fn(self._c(path), *args)
            with contextlib.suppress(FileNotFoundError):  # (made before the filesystem was)
                fn(self._d(path), *args)

        def getattr(self, path, fh=None):
            st = os.fstat(fh) if fh is not None else os.lstat(self._c(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns", "st_mtime_ns",
                    "st_ctime_ns", "st_ino", "st_blocks", "st_blksize")
            return {k.replace("_ns", ""): getattr(st, k) for k in keys}

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._c(path))]

        def readlink(self, path):
            return os.readlink(self._c(path))

        def statfs(self, path):
            sv = os.statvfs(self._c(path))
            return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                 "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

        def access(self, path, amode):
            if not os.access(self._c(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

        # --- metadata: applied to both trees at once (a journal that committed) ------------------
        def mkdir(self, path, mode):
            self._both(os.mkdir, path, mode)
            return 0

        def rmdir(self, path):
            self._both(os.rmdir, path)
            return 0

        def unlink(self, path):
            self._both(os.unlink, path)
            return 0

        def rename(self, old, new):
            os.rename(self._c(old), self._c(new))
            if os.path.lexists(self._d(old)):
                os.rename(self._d(old), self._d(new))
            return 0

        def symlink(self, target, source):
            os.symlink(source, self._c(target))
            os.symlink(source, self._d(target))
            return 0

        def link(self, target, source):
            os.link(self._c(source), self._c(target))
            os.link(self._d(source), self._d(target))
            return 0

        def chmod(self, path, mode):
            self._both(os.chmod, path, mode)
            return 0

        def chown(self, path, uid, gid):
            self._both(os.chown, path, uid, gid)
            return 0

        def utimens(self, path, times=None):
            os.utime(self._c(path), ns=times) if times else os.utime(self._c(path))
            return 0

        def truncate(self, path, length, fh=None):
            if fh is not None:
                os.ftruncate(fh, length)
                path = self._path_of(fh) or path
            else:
                os.truncate(self._c(path), length)
            if path and os.path.exists(self._d(path)):
                os.truncate(self._d(path), min(length, os.path.getsize(self._d(path))))
            return 0

        # --- data: the cache now, the disk at fsync ----------------------------------------------
        @staticmethod
        def _own(flags: int) -> int:
            """Our handle reads too (fsync copies from it); the kernel gives each write its offset,
            appends included."""
            return (flags & ~(os.O_ACCMODE | os.O_APPEND)) | os.O_RDWR

        def create(self, path, mode, flags=os.O_WRONLY):
            fd = os.open(self._c(path), self._own(flags) | os.O_CREAT, mode)
            os.close(os.open(self._d(path), os.O_WRONLY | os.O_CREAT | (flags & os.O_TRUNC), mode))
            self.ino[fd] = os.fstat(fd).st_ino
            return fd

        def open(self, path, flags):
            fd = os.open(self._c(path), self._own(flags))
            self.ino[fd] = os.fstat(fd).st_ino
            if flags & os.O_TRUNC and os.path.exists(self._d(path)):
                os.truncate(self._d(path), 0)
            return fd

        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            n = os.pwrite(fh, data, offset)
            with self.mutex:
                self.dirty.setdefault(self.ino[fh], []).append((offset, n))
            return n

        def fsync(self, path, datasync, fh):
            ino = self.ino.get(fh)
            rel = self._path_of(fh)
            with self.mutex:
                ranges = self.dirty.pop(ino, [])
            if rel is None:  # unlinked: nothing of it survives a crash anyway
                return 0
            size = os.fstat(fh).st_size
            out = os.open(self._d(rel), os.O_WRONLY | os.O_CREAT)
            try:
                for off, n in ranges:
                    os.pwrite(out, os.pread(fh, n, off), off)
                os.ftruncate(out, size)
            finally:
                os.close(out)
            return 0

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            self.ino.pop(fh, None)
            os.close(fh)
            return 0

        def fsyncdir(self, path, datasync, fh):
            return 0

        def _path_of(self, fh: int) -> str | None:
            """The file's path now (renames followed), relative to the mount; None once unlinked."""
            target = os.readlink(f"/proc/self/fd/{fh}")
            if target.endswith(" (deleted)") or not target.startswith(str(cache)):
                return None
            return target[len(str(cache)):]

    fuse.FUSE(Ops(), str(mountpoint), foreground=True, nothreads=False)


class CrashFS:
    """``with CrashFS(base) as fs:`` mounts at ``fs.mnt`` (backing trees in ``base``); ``fs.crash()``
    drops every unsynced write and mounts again."""

    def __init__(self, base: Path) -> None:
        self.base, self.mnt = base / "crashfs", base / "mnt"
        self.log = base / "crashfs.log"
        self.proc: subprocess.Popen | None = None
        for d in (self.base / "cache", self.base / "disk", self.mnt):
            d.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> CrashFS:
        self._mount()
        return self

    def __exit__(self, *exc) -> None:
        self._unmount()

    def _mount(self) -> None:
        with open(self.log, "ab") as log:  # (a pipe nobody reads would block the filesystem once full)
            self.proc = subprocess.Popen([sys.executable, __file__, str(self.base), str(self.mnt)],
                                         stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 20
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"crash_fs did not mount: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    def _unmount(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        subprocess.run(["fusermount3", "-u", "-z", str(self.mnt)], capture_output=True)
        subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)

    def crash(self) -> None:
        """The machine lost power: every write not fsynced is gone. Then it came back."""
        self._unmount()
        shutil.rmtree(self.base / "cache")
        shutil.copytree(self.base / "disk", self.base / "cache", symlinks=True)
        self._mount()

    def unsynced_bytes(self) -> int:
        """How many bytes ``cache/`` holds beyond ``disk/`` (a rough measure: file sizes)."""
        def sizes(root: Path) -> dict[str, int]:
            return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}

        c, d = sizes(self.base / "cache"), sizes(self.base / "disk")
        return sum(max(0, n - d.get(k, 0)) for k, n in c.items())


if __name__ == "__main__":
    serve(Path(sys.argv[1]), Path(sys.argv[2]))
