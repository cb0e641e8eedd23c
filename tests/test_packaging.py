"""The distribution claims one name (issue 15): the wheel's top level is ``raycrawl`` and its
dist-info, and every module imports from the unpacked wheel alone, Lua scripts included."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("raycrawl", "actors", "storage", "policies", "tasks", "websim")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A copy, because setuptools leaves build/ and egg-info in the tree it builds.
    src = out / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", *PACKAGES):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                         if (ROOT / name).is_dir() else {}))
    # No build isolation: the test venv's setuptools builds it, with no download.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(src)], check=True, cwd=out, capture_output=True)
    (found,) = out.glob("raycrawl-*.whl")
    return found


def test_wheel_installs_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"raycrawl", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    for part in ("actors", "storage", "policies", "tasks", "websim", "commands"):
        assert f"raycrawl/{part}/__init__.py" in names
    assert "raycrawl/storage/lua/acquire.lua" in names
    assert not any(n.startswith("raycrawl/tests/") for n in names)


def test_every_module_imports_from_the_unpacked_wheel(wheel: Path, tmp_path: Path) -> None:
    zipfile.ZipFile(wheel).extractall(tmp_path)
    modules = [".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__")
               for p in sorted((tmp_path / "raycrawl").rglob("*.py")) if p.name != "__main__.py"]
    assert len(modules) > 100
    # PYTHONPATH comes before the editable install's finder, so every import below is the wheel's.
    probe = ("import importlib, sys\n"
             "from raycrawl.storage.redis_frontier import LUA_DIR\n"
             f"for m in {modules!r}:\n"
             "    f = importlib.import_module(m).__file__\n"
             f"    assert f.startswith({str(tmp_path)!r}), (m, f)\n"
             "assert (LUA_DIR / 'acquire.lua').is_file()\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
