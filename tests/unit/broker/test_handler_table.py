"""The handler table: each entry names the module that serves its API key, with that
module's own version range, so ApiVersions can be answered without importing handlers."""

from __future__ import annotations

import pkgutil

import slipstream.broker.handlers as handlers_package
from slipstream.broker.handlers import API_TABLE, all_handlers, api_name, load_handler

# Modules in the package that are helpers of several handlers, not handlers themselves.
HELPERS = {"acl_access", "config_access", "config_views"}


def test_every_entry_matches_its_module() -> None:
    for key, entry in API_TABLE.items():
        module = load_handler(key)
        assert module.SPEC.key == key, entry
        assert module.SPEC.name == entry.name
        assert entry.min_version == module.MIN_VERSION, entry
        assert entry.max_version == module.MAX_VERSION, entry
        assert callable(module.handle)


def test_every_handler_module_is_in_the_table() -> None:
    modules = {m.name for m in pkgutil.iter_modules(handlers_package.__path__)} - HELPERS
    assert sorted(e.module for e in API_TABLE.values()) == sorted(modules)


def test_all_handlers_and_names() -> None:
    loaded = all_handlers()
    assert sorted(loaded) == sorted(API_TABLE)
    assert api_name(3) == "Metadata"
    assert api_name(9999) == "9999"
