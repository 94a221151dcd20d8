"""The typed operation methods (parley/_operations.py) are generated from the loaded library's
catalog: the checked-in module is what the generator makes of it today, every catalog
operation is a method of both clients, and the methods call the library exactly as the
untyped form did (`perform(name, params, **kwargs)`)."""
from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import inspect
import re
import sys
from types import ModuleType
from typing import Any, Dict, Optional, Tuple

import pytest

import parley
from parley import _operations
from parley._operation_support import missing_attribute
from conftest import ROOT

GENERATOR = ROOT / "bindings" / "python" / "tools" / "generate_operations.py"
COMMAND = "python3 bindings/python/tools/generate_operations.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_operations", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # NamedTuple classes look their module up
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_module_is_what_the_catalog_generates() -> None:
    text = generator().render(parley.operations())
    checked_in = (ROOT / "bindings" / "python" / "parley" / "_operations.py").read_text()
    assert checked_in == text, f"parley/_operations.py differs from the library's catalog: run {COMMAND}"


def test_the_generators_table_describes_the_whole_catalog() -> None:
    # Every operation and parameter typed: none falls back to Any / a plain dict answer.
    assert generator().gaps(parley.operations()) == []


@pytest.mark.parametrize("client_class", [parley.Client, parley.AsyncClient])
def test_every_catalog_operation_is_a_method(client_class: type) -> None:
    names = [entry["name"] for entry in parley.operations()]
    assert set(names) <= set(dir(client_class))
    for name in names:
        method = getattr(client_class, name)
        assert method.__doc__, name
        if client_class is parley.Client:
            assert method is getattr(_operations.Operations, name), f"{name} is shadowed in Client"
        else:
            assert inspect.iscoroutinefunction(method), name


def test_signatures_follow_the_catalog() -> None:
    for entry in parley.operations():
        signature = inspect.signature(getattr(parley.Client, entry["name"]))
        parameters = list(signature.parameters.values())[1:]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters), entry["name"]
        required = {p.name for p in parameters if p.default is inspect.Parameter.empty}
        placeholders = set(re.findall(r"{([^}]+)}", entry["path"])) - {"user_id"}
        assert required == placeholders | set(entry["required"]), entry["name"]
        for name, value in entry["defaults"].items():
            assert signature.parameters[name].default == value, (entry["name"], name)
        assert str(signature.return_annotation).startswith("Future["), entry["name"]
        async_signature = inspect.signature(getattr(parley.AsyncClient, entry["name"]))
        assert list(async_signature.parameters) == list(signature.parameters)
        assert f"Future[{async_signature.return_annotation}]" == signature.return_annotation


class Recorder(_operations.Operations):
    """A client whose perform records its arguments."""

    def perform(self, operation: str, params: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
        return operation, params, kwargs


class AsyncRecorder(_operations.AsyncOperations):
    async def perform(self, operation: str, params: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
        return operation, params, kwargs


def test_methods_call_perform_as_the_untyped_form_did() -> None:
    client: Any = Recorder()
    assert client.get_group_channel(channel_url="c") == ("get_group_channel", None, {"channel_url": "c"})
    # A mapping first, and parameters the signature does not name, still reach the library.
    assert client.get_group_channel({"channel_url": "c"}, show_member=True, brand_new=1) == (
        "get_group_channel", {"channel_url": "c"}, {"show_member": True, "brand_new": 1})
    assert client.list_messages(params={"channel_url": "c"}) == ("list_messages", {"channel_url": "c"}, {})
    # None means "not given" (the signatures' defaults).
    assert client.get_current_user(user_id=None, super_mode=None) == ("get_current_user", None, {})
    # A missing required parameter is the library's to report (InvalidArgument), as before.
    assert client.invite_users(channel_url="c") == ("invite_users", None, {"channel_url": "c"})

    async def scenario() -> Tuple[Any, Any]:
        aclient: Any = AsyncRecorder()
        return (await aclient.get_group_channel(channel_url="c", show_member=None),
                await aclient.hide_channel({"channel_url": "c"}, hide_previous_messages=True))

    assert asyncio.run(scenario()) == (("get_group_channel", None, {"channel_url": "c"}),
                                       ("hide_channel", {"channel_url": "c"}, {"hide_previous_messages": True}))


def test_unknown_names_raise_attribute_error_with_a_hint() -> None:
    with parley.Client(server_url="http://127.0.0.1:1") as client:
        with pytest.raises(AttributeError, match="did you mean 'delete_message'"):
            getattr(client, "delete_mesage")
        with pytest.raises(AttributeError, match="no attribute 'frobnicate'"):
            getattr(client, "frobnicate")
        assert not hasattr(client, "_private")
    # A name the library's catalog has but the generated module lacks (a newer library).
    error = missing_attribute(client, "archive_channel", ["archive_channel"])
    assert "perform('archive_channel', ...)" in str(error) and COMMAND in str(error)


@pytest.mark.parametrize("options, fields_of", [
    (parley.MessageListOptions, parley.MessageListParams),
    (parley.GroupChannelListOptions, parley.GroupChannelListQuery),
    (parley.SyncViewOverrides, parley.SyncViewOptions),
])
def test_keyword_options_name_the_dataclass_fields(options: type, fields_of: type) -> None:
    assert list(options.__annotations__) == [field.name for field in dataclasses.fields(fields_of)]
