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
PACKAGES = ("core", "actors", "storage", "policies", "tasks", "websim")


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


@pytest.mark.slow
def test_the_installed_wheel_runs_the_demo_in_a_checkout(wheel: Path, tmp_path: Path) -> None:
    """The README's pip route: the wheel installed (not editable) in a fresh venv runs ``raycrawl
    demo`` — websim, its audit and a short crawl on a local Ray — with a checkout of the repository
    as working directory, where no folder may shadow the installed package (issue 30)."""
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    py = venv / "bin" / "python"
    # The dependencies are this test venv's, on the path as a plain directory (not a site dir, so its
    # .pth files — the editable install's finder — are not run): no download, no editable mapping.
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    where = subprocess.run([str(py), "-c", "import raycrawl.storage, sys; print(raycrawl.storage.__file__)"],
                           cwd=ROOT, capture_output=True, text=True)
    assert where.returncode == 0 and where.stdout.startswith(str(site)), (where.stdout, where.stderr[-2000:])
    from raycrawl.commands.demo import STAGES

    out = tmp_path / "demo"
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "RAY_AUTH_MODE": "disabled"}
    demo = subprocess.run([str(venv / "bin" / "raycrawl"), "demo", "--out", str(out), "--hosts", "20", "--ips", "4",
                           "--max-pages", "60", "--skip", ",".join(STAGES)], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=400)
    assert demo.returncode == 0, (demo.stdout[-3000:], demo.stderr[-3000:])
    assert "verdict             OK" in demo.stdout, demo.stdout[-3000:]
    assert (out / "crawl" / "report.json").is_file()
