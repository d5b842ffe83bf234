"""The installed wheel: what it carries, one version everywhere, and the
contract check. Run by scripts/test-python with pytest from a fresh virtual
environment where only the wheel (and pytest) is installed."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import backstop

ROOT = Path(__file__).resolve().parents[2]


def crate_version() -> str:
    with open(ROOT / "Cargo.toml", "rb") as f:
        return tomllib.load(f)["package"]["version"]


def bumped(version: str, part: int) -> str:
    """`version` with its major (0), minor (1) or patch (2) raised by one, the parts after it zeroed."""
    nums = [int(x) for x in version.split(".")]
    nums[part] += 1
    nums[part + 1:] = [0] * (2 - part)
    return ".".join(map(str, nums))


def test_imported_from_the_installed_wheel_with_its_bundled_component():
    package_dir = Path(backstop.__file__).resolve().parent
    assert not package_dir.is_relative_to(ROOT), package_dir
    component = Path(str(backstop.component_path()))
    assert component == package_dir / "backstop.component.wasm"
    assert component.read_bytes() == (ROOT / "target" / "backstop.component.wasm").read_bytes()


def test_wheel_metadata_declares_wasmtime_and_the_celery_extra():
    requires = importlib.metadata.requires("backstop")
    assert "wasmtime==50.0.1" in requires
    assert any(r.startswith("celery") and re.search(r"extra == ['\"]celery['\"]", r) for r in requires), requires
    assert "celery" in importlib.metadata.metadata("backstop").get_all("Provides-Extra")
    # The source-tree requirements (scripts/bench) pin the same wasmtime.
    assert "wasmtime==50.0.1" in (ROOT / "host-py" / "requirements.txt").read_text().split()


def test_one_version_everywhere():
    version = crate_version()
    wit = {p.name: re.search(r"^package backstop:policy@(\S+);", p.read_text(), re.M)
           for p in sorted((ROOT / "wit").glob("*.wit"))}
    assert wit and {name: m and m[1] for name, m in wit.items()} == {name: version for name in wit}
    assert importlib.metadata.version("backstop") == version
    assert backstop.__version__ == version
    assert backstop.info()["package_version"] == version
    package_json = json.loads((ROOT / "host-js" / "package.json").read_text())
    lock = json.loads((ROOT / "host-js" / "package-lock.json").read_text())
    assert (package_json["version"], lock["version"], lock["packages"][""]["version"]) == (version,) * 3
    assert backstop.Backstop()._interface == f"backstop:policy/engine@{version}"


@pytest.mark.parametrize("part", [0, 1])
def test_a_component_of_another_major_or_minor_is_refused_naming_both_versions(part):
    mine = backstop.__version__
    other = bumped(mine, part)
    with pytest.raises(backstop.ContractError) as e:
        backstop.check_contract({**backstop.info(), "package_version": other})
    assert other in str(e.value) and mine in str(e.value)
    assert (e.value.component_version, e.value.host_version) == (other, mine)


def test_a_component_of_another_patch_is_accepted():
    backstop.check_contract({**backstop.info(), "package_version": bumped(backstop.__version__, 2)})


def test_a_malformed_or_missing_contract_version_is_refused():
    for info in [{"package_version": "0.1"}, {"package_version": "v0.1.0"}, {}, {"package_version": 1}]:
        with pytest.raises(backstop.ContractError):
            backstop.check_contract(info)


def test_the_rule_from_1_0_on():
    assert backstop.supports_contract("1.2.0", "1.2.5")
    assert backstop.supports_contract("1.4.1", "1.2.0")
    assert not backstop.supports_contract("1.1.9", "1.2.0")
    assert not backstop.supports_contract("2.0.0", "1.2.0")
    assert not backstop.supports_contract("0.2.0", "0.1.0")
    assert backstop.supports_contract("0.1.7", "0.1.0")
    # Before 1.0 a patch may add functions the package calls: an older patch is refused.
    assert not backstop.supports_contract("0.2.0", "0.2.1")
    assert backstop.supports_contract("0.2.3", "0.2.1")


def test_backstop_refuses_the_real_component_when_the_package_speaks_another_contract(monkeypatch):
    real = backstop.__version__
    monkeypatch.setattr(backstop, "__version__", bumped(real, 1))
    with pytest.raises(backstop.ContractError) as e:
        backstop.Backstop()
    assert f"contract version {real} " in str(e.value)
    assert f"package {bumped(real, 1)} " in str(e.value)


def run_installed(code: str) -> str:
    """Runs `code` with this interpreter, isolated (-I) from the source tree, outside the repository."""
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         cwd=Path(sys.prefix), env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_install_usage_of_both_readmes_runs_as_written():
    usage = (ROOT / "host-py" / "tests" / "install_usage.py").read_text()
    for readme in [ROOT / "README.md", ROOT / "host-py" / "README.md"]:
        assert usage in readme.read_text(), f"{readme} must hold host-py/tests/install_usage.py verbatim"
    assert run_installed(usage) == "transient_transport retry"
