#!/usr/bin/env python3
"""Writes bindings/python/parley/_operations.py: every operation of the library's catalog as a
typed method of parley.Client (and, awaitable, of parley.AsyncClient).

    python3 bindings/python/tools/generate_operations.py           # rewrite the module
    python3 bindings/python/tools/generate_operations.py --check   # exit 1 if it is out of date

It loads the package (and so libparley: PARLEY_LIBRARY as usual) and reads the catalog
(`parley.operations()`, the C function parley_operations). The catalog gives each
operation's name, method, path, one-line summary and its parameters in order, each with its
wire type, whether it is required and the library's default if any:

- a required parameter is a keyword without a default;
- a parameter with a default gets it (the library applies it);
- every other one is optional (`None`: not sent);
- the annotation follows the wire type (WIRE_TYPES; one the table lacks is `Any`).

What the catalog does not say is the Python type of each answer and where docs/PROTOCOL.md
describes the operation: the ANSWERS table below. An operation missing from it still gets a
method (the answer as a dict); `main` warns about it. bindings/python/tests/test_operations_generated.py
renders the module from the loaded library's catalog and fails when the file differs.
"""
from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Sequence

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
TARGET = PACKAGE / "parley" / "_operations.py"
COMMAND = "python3 bindings/python/tools/generate_operations.py"

# Wire type (the catalog's "type" of a parameter, docs/C-REFERENCE.md) -> annotation.
WIRE_TYPES: Dict[str, str] = {
    "string": "str", "integer": "int", "boolean": "bool", "string[]": "List[str]", "object": "Dict[str, str]",
    "object<integer>": "Dict[str, int]", "object[]": "List[MetaArrayItem]", "integer[]": "List[int]", "any": "Any",
}


class Answer(NamedTuple):
    """What the catalog does not say about an operation: the answer's type and where
    docs/PROTOCOL.md describes it."""

    returns: str
    section: str


_ANY = "Dict[str, Any]"

ANSWERS: Dict[str, Answer] = {
    "get_current_user": Answer("User", "§5"),
    "update_current_user": Answer("User", "§5"),
    "get_unread_message_count": Answer(_ANY, "§5"),
    "get_unread_channel_count": Answer(_ANY, "§5"),
    "mark_all_as_read": Answer(_ANY, "§5"),
    "get_channel_invitation_preference": Answer(_ANY, "§5"),
    "set_channel_invitation_preference": Answer(_ANY, "§5"),
    "register_push_token": Answer(_ANY, "§5.1"),
    "unregister_push_token": Answer(_ANY, "§5.1"),
    "unregister_all_push_tokens": Answer(_ANY, "§5.1"),
    "list_push_tokens": Answer(_ANY, "§5.1"),
    "get_push_preference": Answer(_ANY, "§5.1"),
    "set_push_preference": Answer(_ANY, "§5.1"),
    "get_channel_push_preference": Answer(_ANY, "§5.1"),
    "set_channel_push_preference": Answer(_ANY, "§5.1"),
    "list_users": Answer("UserListPage", "§5"),
    "list_my_group_channels": Answer("ChannelListPage", "§6.2"),
    "list_group_channels": Answer("ChannelListPage", "§6.2"),
    "list_public_group_channels": Answer("ChannelListPage", "§6.2"),
    "list_channel_changelogs": Answer("ChannelChangelogPage", "§8.3"),
    "create_group_channel": Answer("Channel", "§6.1"),
    "get_group_channel": Answer("Channel", "§6.3"),
    "update_group_channel": Answer("Channel", "§6.3"),
    "delete_group_channel": Answer(_ANY, "§6.3"),
    "invite_users": Answer("Channel", "§6.3"),
    "accept_invitation": Answer("Channel", "§6.3"),
    "decline_invitation": Answer(_ANY, "§6.3"),
    "join_channel": Answer("Channel", "§6.3"),
    "leave_channel": Answer(_ANY, "§6.3"),
    "freeze_channel": Answer("Channel", "§6.3"),
    "unfreeze_channel": Answer("Channel", "§6.3"),
    "hide_channel": Answer(_ANY, "§6.3"),
    "unhide_channel": Answer(_ANY, "§6.3"),
    "reset_my_history": Answer(_ANY, "§6.3"),
    "start_typing": Answer(_ANY, "§6.3"),
    "end_typing": Answer(_ANY, "§6.3"),
    "mark_as_read": Answer(_ANY, "§6.3"),
    "mark_as_delivered": Answer(_ANY, "§6.3"),
    "list_members": Answer("MemberListPage", "§6.3"),
    "get_member_state": Answer(_ANY, "§6.3"),
    "list_operators": Answer(_ANY, "§6.3"),
    "add_operators": Answer(_ANY, "§6.3"),
    "remove_operators": Answer(_ANY, "§6.3"),
    "remove_all_operators": Answer(_ANY, "§6.3"),
    "ban_user": Answer(_ANY, "§6.3"),
    "unban_user": Answer(_ANY, "§6.3"),
    "get_ban": Answer(_ANY, "§6.3"),
    "list_banned_users": Answer(_ANY, "§6.3"),
    "mute_user": Answer(_ANY, "§6.3"),
    "unmute_user": Answer(_ANY, "§6.3"),
    "get_mute": Answer(_ANY, "§6.3"),
    "list_muted_users": Answer(_ANY, "§6.3"),
    "report_channel": Answer(_ANY, "§7.5"),
    "report_message": Answer(_ANY, "§7.5"),
    "report_user": Answer(_ANY, "§7.5"),
    "get_metadata": Answer(_ANY, "§6.4"),
    "create_metadata": Answer(_ANY, "§6.4"),
    "update_metadata": Answer(_ANY, "§6.4"),
    "delete_metadata": Answer(_ANY, "§6.4"),
    "delete_all_metadata": Answer(_ANY, "§6.4"),
    "get_metacounters": Answer(_ANY, "§6.4"),
    "create_metacounters": Answer(_ANY, "§6.4"),
    "update_metacounters": Answer(_ANY, "§6.4"),
    "delete_metacounter": Answer(_ANY, "§6.4"),
    "delete_all_metacounters": Answer(_ANY, "§6.4"),
    "list_messages": Answer("MessageListPage", "§7.2"),
    "list_thread_replies": Answer("MessageListPage", "§7.2"),
    "get_total_message_count": Answer(_ANY, "§7.4"),
    "list_message_changelogs": Answer("MessageChangelogPage", "§8.2"),
    "get_message": Answer("Message", "§7.4"),
    "update_message": Answer("Message", "§7.4"),
    "delete_message": Answer(_ANY, "§7.4"),
    "copy_message": Answer("Message", "§7.4"),
    "add_reaction": Answer(_ANY, "§7.4"),
    "remove_reaction": Answer(_ANY, "§7.4"),
    "list_reactions": Answer(_ANY, "§7.4"),
    "translate_message": Answer("Message", "§7.8"),
    "pin_message": Answer(_ANY, "§7.4"),
    "unpin_message": Answer(_ANY, "§7.4"),
    "add_message_meta_array": Answer("Message", "§7.4"),
    "update_message_meta_array": Answer("Message", "§7.4"),
    "create_poll": Answer("Poll", "§7.6"),
    "list_polls": Answer("PollListPage", "§7.6"),
    "get_poll": Answer("Poll", "§7.6"),
    "update_poll": Answer("Poll", "§7.6"),
    "delete_poll": Answer(_ANY, "§7.6"),
    "close_poll": Answer("Poll", "§7.6"),
    "add_poll_option": Answer("Poll", "§7.6"),
    "update_poll_option": Answer("Poll", "§7.6"),
    "delete_poll_option": Answer("Poll", "§7.6"),
    "vote_poll": Answer("Poll", "§7.6"),
    "list_poll_voters": Answer("PollVoters", "§7.6"),
    "list_poll_changelogs": Answer("PollChangelogPage", "§7.6"),
}

OBJECT_TYPES = ("BasicUser", "Channel", "ChannelChangelogPage", "ChannelListPage", "MemberListPage", "Message",
                "MessageChangelogPage", "MessageListPage", "MetaArrayItem", "Poll", "PollChangelogPage", "PollListPage",
                "PollVoters", "User", "UserListPage")


class Parameter(NamedTuple):
    name: str
    annotation: str
    default: str  # "" when required


def placeholders(path: str) -> List[str]:
    return re.findall(r"{([^}]+)}", path)


def parameters(entry: Mapping[str, Any]) -> List[Parameter]:
    """An operation's parameters in the catalog's order (the required ones first)."""
    if not entry["name"].isidentifier() or keyword.iskeyword(entry["name"]):
        raise ValueError(f"{entry['name']!r} cannot be a Python name: the generator needs a spelling for it")
    result: List[Parameter] = []
    for parameter in entry.get("parameters") or []:
        name = parameter["name"]
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"{entry['name']}: {name!r} cannot be a Python name: the generator needs a spelling for it")
        annotation = WIRE_TYPES.get(parameter["type"], "Any")
        if parameter["required"]:
            result.append(Parameter(name, annotation, ""))
        elif "default" in parameter:
            result.append(Parameter(name, annotation, repr(parameter["default"])))
        else:
            result.append(Parameter(name, f"Optional[{annotation}]", "None"))
    return result


def _wrap(text: str, indent: str, width: int = 100) -> List[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)


def docstring(entry: Mapping[str, Any], indent: str) -> List[str]:
    answer = ANSWERS.get(entry["name"])
    summary = entry.get("summary") or "An operation of the catalog."
    route = f"``{entry['method']} {entry['path']}``"
    if answer:
        route += f" (docs/PROTOCOL.md {answer.section})"
    notes = [route + "."]
    if "user_id" in placeholders(entry["path"]):
        notes.append("``user_id`` in the path is the connected user unless given.")
    defaults: Mapping[str, Any] = entry.get("defaults") or {}
    if defaults:
        given = ", ".join(f"``{name}={defaults[name]!r}``" for name in sorted(defaults))
        notes.append(f"The library sends {given} unless told otherwise.")
    text = summary.replace("`", "``").replace("````", "``")
    lines = _wrap(text, indent)
    lines[0] = indent + '"""' + lines[0][len(indent):]
    lines.append("")
    lines += _wrap(" ".join(notes), indent)
    lines.append(indent + '"""')
    return lines


def returns(entry: Mapping[str, Any]) -> str:
    answer = ANSWERS.get(entry["name"])
    return answer.returns if answer else _ANY


def method(entry: Mapping[str, Any]) -> List[str]:
    indent = " " * 8
    params = parameters(entry)
    lines = ["    @operation"]
    head = f"    def {entry['name']}("
    tail = f") -> Future[{returns(entry)}]:"
    rendered = [f"{p.name}: {p.annotation}" + (f" = {p.default}" if p.default else "") for p in params]
    one_line = head + "self" + (", *, " + ", ".join(rendered) if rendered else "") + tail
    if len(one_line) <= 120:
        lines.append(one_line)
    else:
        lines.append(head)
        lines.append(indent + "self, *,")
        lines += [indent + item + "," for item in rendered]
        lines.append("    " + tail)
    lines += docstring(entry, indent)
    return lines


HEADER = f'''\
# Generated from the library's operation catalog (parley_operations) and the answer table of
# bindings/python/tools/generate_operations.py: do not edit. Regenerate with
#     {COMMAND}
# when the catalog changes (bindings/python/tests/test_operations_generated.py fails until then).
# mypy: disable-error-code="empty-body"
"""Every operation of the library's catalog as a typed method.

:class:`Operations` is part of :class:`parley.Client`: each method performs the operation as
the connected user and returns a Future of the server's answer. :class:`AsyncOperations` is
part of :class:`parley.AsyncClient`: the same methods, awaitable. Both call ``perform``
(:func:`parley._operation_support.operation`): the library checks the parameters (a required
one missing raises :class:`parley.InvalidArgument`), fills the path and sends the rest as the
query or the body, and applies the answer to the cache. Parameters are keyword-only and
named as on the wire (docs/PROTOCOL.md); an optional one left ``None`` is not sent, so the
server's default applies.
"""
from __future__ import annotations

from concurrent.futures import Future
'''


def render(catalog: Sequence[Mapping[str, Any]]) -> str:
    """The module's text for `catalog` (the value of parley.operations())."""
    body: List[str] = []
    for entry in catalog:
        body += method(entry)
        body.append("")
    text_of_methods = "\n".join(body)
    used_typing = [name for name in ("Any", "Dict", "List", "Optional")
                   if re.search(rf"\b{name}\b" if name == "Any" else rf"\b{name}\[", text_of_methods)]
    used_objects = [name for name in OBJECT_TYPES if re.search(rf"\b{name}\b", text_of_methods)]
    out = [HEADER.rstrip("\n")]
    if used_typing:
        out.append(f"from typing import {', '.join(used_typing)}")
    out += ["", "from ._operation_support import awaiting_operation, operation, own_qualnames"]
    if used_objects:
        out += ["from .objects import ("] + _wrap(", ".join(used_objects) + ",", "    ", 116) + [")"]
    out += ["", "", "class Operations:",
            '    """The catalog operations of :class:`parley.Client`: each returns a Future of the server\'s answer."""',
            ""]
    out += body
    out += ["", "@own_qualnames", "class AsyncOperations:",
            '    """The catalog operations of :class:`parley.AsyncClient`: each is awaited for the server\'s answer."""',
            ""]
    out += [f"    {entry['name']} = awaiting_operation(Operations.{entry['name']})" for entry in catalog]
    return "\n".join(out) + "\n"


def gaps(catalog: Sequence[Mapping[str, Any]]) -> List[str]:
    """What the answer table lacks or holds in excess for `catalog`, and the wire types the
    generator cannot annotate (warnings)."""
    names = [entry["name"] for entry in catalog]
    found = [f"operation {name!r} is not in ANSWERS (its answer is typed as a dict)" for name in names
             if name not in ANSWERS]
    found += [f"ANSWERS describes {name!r}, which the catalog does not have" for name in ANSWERS if name not in names]
    for entry in catalog:
        for parameter in entry.get("parameters") or []:
            if parameter["type"] not in WIRE_TYPES or parameter["type"] == "any":
                found.append(f"{entry['name']}: parameter {parameter['name']!r} has the type {parameter['type']!r} (Any)")
    return found


def load_catalog() -> List[Dict[str, Any]]:
    sys.path.insert(0, str(PACKAGE))
    import parley

    return parley.operations()


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the module is out of date, write nothing")
    parser.add_argument("--catalog", type=Path, help="read the catalog from this JSON file instead of the library")
    args = parser.parse_args(list(argv))
    catalog = json.loads(args.catalog.read_text()) if args.catalog else load_catalog()
    for warning in gaps(catalog):
        print(f"warning: {warning}", file=sys.stderr)
    text = render(catalog)
    current = TARGET.read_text() if TARGET.exists() else ""
    if args.check:
        if current != text:
            print(f"{TARGET} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text)
        print(f"wrote {TARGET} ({len(catalog)} operations)")
    else:
        print(f"{TARGET} is up to date ({len(catalog)} operations)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
