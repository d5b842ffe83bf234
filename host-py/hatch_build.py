"""Refuses to build a wheel without the component: the wheel must work alone."""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COMPONENT = Path("backstop") / "backstop.component.wasm"


class ComponentHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        path = Path(self.root) / COMPONENT
        if not path.is_file() or path.read_bytes()[:4] != b"\0asm":
            raise RuntimeError(
                f"{COMPONENT} is missing or not WebAssembly: copy target/backstop.component.wasm "
                "there first (scripts/package does)")
