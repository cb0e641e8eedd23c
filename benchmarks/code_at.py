"""Run raycrawl as it was at an earlier commit, beside today's, in the same benchmark run.

``env_at(commit)`` checks the commit out into a git worktree (once; kept under
``$TMPDIR/raycrawl-at-<sha>``) and returns an environment whose ``PYTHONPATH`` holds a
``sitecustomize`` that maps the ``raycrawl`` packages to that worktree before the editable install's
own mapping does. Every Python process started with it — the CLI, and a local Ray's workers, which
inherit the driver's environment — runs that commit's crawler. websim stays today's (the same web
for both; its command-line wrapper is the commit's, so a flag it lacks is the commit's limit).

    from code_at import env_at
    subprocess.run([sys.executable, "-m", "raycrawl", "crawl", ...], env=env_at("d0e6aca"))
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"raycrawl": "core", "raycrawl.actors": "actors", "raycrawl.policies": "policies",
            "raycrawl.storage": "storage", "raycrawl.tasks": "tasks"}

SHIM = '''import sys
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location
from pathlib import Path

MAPPING = {mapping!r}


class _At:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            return spec_from_file_location(fullname, Path(MAPPING[fullname]) / "__init__.py",
                                           submodule_search_locations=[MAPPING[fullname]])
        parent, _, _ = fullname.rpartition(".")
        if parent in MAPPING:
            spec = PathFinder.find_spec(fullname, path=[MAPPING[parent]])
            if spec is None:  # not in that commit: never today's module in its place
                raise ModuleNotFoundError(f"No module named {{fullname!r}} at that commit", name=fullname)
            return spec
        return None


sys.meta_path.insert(0, _At)
'''


def resolve(commit: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short=12", commit], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def env_at(commit: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment running ``commit``'s raycrawl (``HEAD``: the work tree as it is, unchanged)."""
    env = dict(os.environ if base is None else base)
    if commit == "HEAD":
        return env
    sha = resolve(commit)
    tree = Path(tempfile.gettempdir()) / f"raycrawl-at-{sha}"
    if not (tree / "core").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(tree), sha], cwd=ROOT, check=True,
                       capture_output=True)
    shim = tree / ".at"
    shim.mkdir(exist_ok=True)
    mapping = {name: str(tree / d) for name, d in PACKAGES.items()}
    mapping["raycrawl.websim"] = str(ROOT / "websim")
    (shim / "sitecustomize.py").write_text(SHIM.format(mapping=mapping))
    env["PYTHONPATH"] = os.pathsep.join([str(shim), *filter(None, [env.get("PYTHONPATH", "")])])
    return env
