#!/usr/bin/env python3
"""Writes bindings/python/parley/_operations.py: every operation of the library's catalog as a
typed method of parley.Client (and, awaitable, of parley.AsyncClient).

    python3 bindings/python/tools/generate_operations.py           # rewrite the module
    python3 bindings/python/tools/generate_operations.py --check   # exit 1 if it is out of date

It loads the package (and so libparley: PARLEY_LIBRARY as usual) and reads the catalog
(`parley.operations()`, the C function parley_operations). The catalog gives each
operation's name, method, path, required parameters and the library's defaults; it carries
no types, no optional parameters and no descriptions. Those come from the table below,
written from docs/PROTOCOL.md (which the catalog points to for the parameters):

- path placeholders are required, except `{user_id}` (the connected user by default);
- the catalog's `required` parameters are required;
- the catalog's `defaults` become the parameters' defaults (the library applies them);
- every other parameter the table lists for the operation is optional (`None`: not sent);
- types come from TYPES by parameter name; a name it lacks is typed by its default's JSON
  type when it has one, else `Any`.

An operation missing from the table still gets a method (its path and required parameters,
the answer as a dict); `main` warns about it. bindings/python/tests/test_operations_generated.py
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

# Parameter name -> annotation (docs/PROTOCOL.md). One name has one type in every operation.
TYPES: Dict[str, str] = {
    # identities and paging
    "channel_url": "str", "message_id": "int", "user_id": "str", "user_ids": "List[str]", "member_id": "str",
    "target_user_id": "str", "offending_user_id": "str", "dest_channel_url": "str", "key": "str", "keys": "List[str]",
    "token": "str", "limit": "int", "change_ts": "int",
    # users (§5)
    "nickname": "str", "nickname_startswith": "str", "active_mode": "str", "metadatakey": "str",
    "metadatavalues_in": "List[str]", "include_unread_count": "bool", "super_mode": "str", "profile_url": "str",
    "is_active": "bool", "metadata": "Dict[str, str]", "discovery_keys": "List[str]", "preferred_languages": "List[str]",
    "last_seen_at": "int", "channel_urls": "List[str]", "auto_accept": "bool",
    # channels (§6)
    "name": "str", "cover_url": "str", "custom_type": "str", "data": "str", "is_distinct": "bool", "is_super": "bool",
    "is_public": "bool", "is_ephemeral": "bool", "operator_ids": "List[str]", "inviter_id": "str", "strict": "bool",
    "order": "str", "metadata_order_key": "str", "show_empty": "bool", "show_frozen": "bool", "show_member": "bool",
    "show_metadata": "bool", "show_metacounter": "bool", "show_read_receipt": "bool", "show_delivery_receipt": "bool",
    "distinct_mode": "str", "public_mode": "str", "public_membership_filter": "str", "member_state_filter": "str",
    "hidden_mode": "str", "unread_filter": "str", "custom_types": "List[str]", "custom_type_startswith": "str",
    "name_contains": "str", "name_startswith": "str", "members_exactly_in": "List[str]",
    "members_include_in": "List[str]", "query_type": "str", "created_after": "int", "created_before": "int",
    "metadata_key": "str", "metadata_values": "List[str]", "metadata_value_startswith": "str",
    "should_leave_all": "bool", "operator_filter": "str", "muted_member_filter": "str",
    "hide_previous_messages": "bool", "allow_auto_unhide": "bool", "should_hide_all": "bool",
    "should_unhide_all": "bool", "reset_all": "bool", "seconds": "int", "description": "str", "agent_id": "str",
    "include_ts": "bool", "upsert": "bool", "metacounter": "Dict[str, int]", "mode": "str",
    # reports (§7.5)
    "report_category": "str", "reporting_user_id": "str", "report_description": "str",
    # messages (§7)
    "message_ts": "int", "prev_limit": "int", "next_limit": "int", "include": "bool", "reverse": "bool",
    "message_type": "str", "sender_ids": "List[str]", "include_reply_type": "str", "parent_message_id": "int",
    "include_reactions": "bool", "include_thread_info": "bool", "include_parent_message_info": "bool",
    "with_sorted_meta_array": "bool", "include_meta_array": "bool", "message": "str", "mention_type": "str",
    "mentioned_user_ids": "List[str]", "sorted_metaarray": "List[MetaArrayItem]", "url": "str", "reaction": "str",
}

_CHANNEL_LIST = (
    "token limit order metadata_order_key show_empty show_frozen show_member show_metadata show_metacounter "
    "show_read_receipt show_delivery_receipt distinct_mode super_mode member_state_filter custom_types "
    "custom_type_startswith channel_urls name name_contains name_startswith members_exactly_in members_include_in "
    "query_type created_after created_before metadata_key metadata_values metadata_value_startswith"
)
_MESSAGE_FILTERS = (
    "message_type custom_types sender_ids include_reply_type include_reactions include_thread_info "
    "include_parent_message_info with_sorted_meta_array include_meta_array"
)
_MESSAGE_LIST = "message_ts message_id prev_limit next_limit include reverse " + _MESSAGE_FILTERS


class Spec(NamedTuple):
    """What the catalog does not say about an operation: a one-line summary, its optional
    parameters (space-separated, in the order shown), the answer's type and where
    docs/PROTOCOL.md describes it."""

    summary: str
    parameters: str
    returns: str
    section: str


_ANY = "Dict[str, Any]"

OPERATIONS: Dict[str, Spec] = {
    # the user (§5)
    "get_current_user": Spec("The connected user's profile, or with `user_id` another user's.",
                             "include_unread_count custom_types super_mode", "User", "§5"),
    "update_current_user": Spec("Changes the connected user's profile; answers the user.",
                                "nickname profile_url is_active metadata discovery_keys preferred_languages last_seen_at",
                                "User", "§5"),
    "get_unread_message_count": Spec('The messages the user has not read: `{"unread_count"}`.', "custom_types super_mode",
                                     _ANY, "§5"),
    "get_unread_channel_count": Spec('The channels with messages the user has not read: `{"unread_count"}`.',
                                     "custom_types super_mode", _ANY, "§5"),
    "mark_all_as_read": Spec("Marks every joined channel (or those of `channel_urls`) read.", "channel_urls", _ANY, "§5"),
    "get_channel_invitation_preference": Spec('Whether the user joins the channels they are invited to at once: '
                                              '`{"auto_accept"}`.', "", _ANY, "§5"),
    "set_channel_invitation_preference": Spec('Sets whether the user joins the channels they are invited to at once: '
                                              '`{"auto_accept"}`.', "", _ANY, "§5"),
    "list_users": Spec("One page of users in `user_id` order, without their private fields.",
                       "token limit user_ids nickname nickname_startswith active_mode metadatakey metadatavalues_in",
                       "UserListPage", "§5"),
    # channel lists (§6.2, §8.3)
    "list_my_group_channels": Spec("One page of the channels the user joined or is invited to; the cache stores them.",
                                   _CHANNEL_LIST + " public_mode hidden_mode unread_filter", "ChannelListPage", "§6.2"),
    "list_group_channels": Spec("One page of the channels the user may see (public ones and their own); the cache "
                                "stores them.", _CHANNEL_LIST + " public_mode public_membership_filter", "ChannelListPage",
                                "§6.2"),
    "list_public_group_channels": Spec("One page of public channels, as the reference SDK's public channel list: empty "
                                       'ones only with `show_empty=True`, `public_membership_filter="joined"` for those '
                                       "the user joined; the cache stores them.",
                                       _CHANNEL_LIST + " public_membership_filter", "ChannelListPage", "§6.2"),
    "list_channel_changelogs": Spec("The user's channels changed or gone since `token` (or `change_ts`), applied to the "
                                    "cache like the engine's own catch-up.",
                                    "token change_ts limit show_member show_metadata show_metacounter show_read_receipt "
                                    "show_delivery_receipt show_empty show_frozen custom_types",
                                    "ChannelChangelogPage", "§8.3"),
    # one channel (§6.1, §6.3)
    "create_group_channel": Spec("Creates a channel with the user and `user_ids` as members; answers it, with "
                                 "`is_created`.",
                                 "user_ids name cover_url custom_type data channel_url is_distinct is_super is_public "
                                 "is_ephemeral operator_ids inviter_id strict", "Channel", "§6.1"),
    "get_group_channel": Spec("One channel as the user sees it; the cache stores it.",
                              "show_member show_read_receipt show_delivery_receipt show_metadata show_metacounter",
                              "Channel", "§6.3"),
    "update_group_channel": Spec("Changes the channel's settings (operators only); `operator_ids` are added.",
                                 "name cover_url custom_type data is_public is_distinct operator_ids", "Channel", "§6.3"),
    "delete_group_channel": Spec("Deletes the channel (operators only); it leaves the cache.", "", _ANY, "§6.3"),
    "invite_users": Spec("Invites users; those who accept invitations automatically join at once.", "inviter_id",
                         "Channel", "§6.3"),
    "accept_invitation": Spec("Accepts the user's invitation to the channel.", "user_id", "Channel", "§6.3"),
    "decline_invitation": Spec("Declines the user's invitation; the channel leaves the cache.", "user_id", _ANY, "§6.3"),
    "join_channel": Spec("Joins a public channel.", "user_id", "Channel", "§6.3"),
    "leave_channel": Spec("Leaves the channel; it leaves the cache.", "user_ids should_leave_all", _ANY, "§6.3"),
    "freeze_channel": Spec("Freezes the channel: only operators may send then (operators only).", "", "Channel", "§6.3"),
    "unfreeze_channel": Spec("Unfreezes the channel (operators only).", "", "Channel", "§6.3"),
    "hide_channel": Spec("Hides the channel from the user's list, with `hide_previous_messages` also its messages so far.",
                         "user_id hide_previous_messages allow_auto_unhide should_hide_all", _ANY, "§6.3"),
    "unhide_channel": Spec("Shows the hidden channel again.", "user_id should_unhide_all", _ANY, "§6.3"),
    "reset_my_history": Spec('Hides the channel\'s messages so far from the user: `{"ts_message_offset"}`.',
                             "user_id reset_all", _ANY, "§6.3"),
    "start_typing": Spec("Tells the channel the user is typing.", "user_ids", _ANY, "§6.3"),
    "end_typing": Spec("Tells the channel the user stopped typing.", "user_ids", _ANY, "§6.3"),
    "mark_as_read": Spec('Marks the channel read up to now: `{"ts"}`.', "user_id", _ANY, "§6.3"),
    "mark_as_delivered": Spec('Marks the channel\'s messages delivered: `{"ts"}`.', "user_id", _ANY, "§6.3"),
    # members and moderation (§6.3)
    "list_members": Spec("One page of the channel's members.",
                         "token limit order operator_filter member_state_filter muted_member_filter nickname_startswith",
                         "MemberListPage", "§6.3"),
    "get_member_state": Spec('Whether `member_id` is a member: `{"is_member", "state"}`.', "", _ANY, "§6.3"),
    "list_operators": Spec('One page of the channel\'s operators: `{"operators", "next"}`.', "token limit", _ANY, "§6.3"),
    "add_operators": Spec("Makes joined members operators (operators only).", "", _ANY, "§6.3"),
    "remove_operators": Spec("Takes the operator role from users (operators only).", "", _ANY, "§6.3"),
    "remove_all_operators": Spec("Takes the operator role from every operator (operators only).", "", _ANY, "§6.3"),
    "ban_user": Spec("Bans `user_id` from the channel for `seconds` (-1, the default: for good); a member is removed "
                     "(operators only).", "seconds description agent_id", _ANY, "§6.3"),
    "unban_user": Spec("Lifts the ban of `target_user_id` (operators only).", "", _ANY, "§6.3"),
    "get_ban": Spec('Whether `target_user_id` is banned: `{"is_banned", ...}`.', "", _ANY, "§6.3"),
    "list_banned_users": Spec('One page of the channel\'s bans (operators only): `{"banned_list", "next"}`.', "token limit",
                              _ANY, "§6.3"),
    "mute_user": Spec("Mutes the member `user_id` for `seconds` (-1, the default: until unmuted) (operators only).",
                      "seconds description", _ANY, "§6.3"),
    "unmute_user": Spec("Lifts the mute of `target_user_id` (operators only).", "", _ANY, "§6.3"),
    "get_mute": Spec('Whether `target_user_id` is muted: `{"is_muted", ...}`.', "", _ANY, "§6.3"),
    "list_muted_users": Spec('One page of the channel\'s mutes (operators only): `{"muted_list", "next"}`.', "token limit",
                             _ANY, "§6.3"),
    # reports (§7.5)
    "report_channel": Spec("Reports the channel; `report_category`: suspicious, harassing, inappropriate or spam.",
                           "reporting_user_id report_description", _ANY, "§7.5"),
    "report_message": Spec("Reports a message; `report_category`: suspicious, harassing, inappropriate or spam.",
                           "reporting_user_id report_description", _ANY, "§7.5"),
    "report_user": Spec("Reports a user, in the channel `channel_url` if given; `report_category`: suspicious, "
                        "harassing, inappropriate or spam.", "channel_url reporting_user_id report_description", _ANY,
                        "§7.5"),
    # metadata and metacounters (§6.4)
    "get_metadata": Spec("The channel's metadata (all of it, or `keys`).", "keys", _ANY, "§6.4"),
    "create_metadata": Spec("Adds metadata keys (a key that exists is an error); answers them.", "include_ts", _ANY,
                            "§6.4"),
    "update_metadata": Spec("Changes metadata values (`upsert` adds missing keys); answers them.", "upsert", _ANY, "§6.4"),
    "delete_metadata": Spec("Removes the metadata key `key`.", "", _ANY, "§6.4"),
    "delete_all_metadata": Spec("Removes every metadata key.", "", _ANY, "§6.4"),
    "get_metacounters": Spec("The channel's metacounters (all of them, or `keys`).", "keys", _ANY, "§6.4"),
    "create_metacounters": Spec("Adds metacounters (a key that exists is an error); answers them.", "", _ANY, "§6.4"),
    "update_metacounters": Spec("Sets, increases or decreases metacounters (`mode`: set, increase, decrease); answers "
                                "them.", "mode upsert", _ANY, "§6.4"),
    "delete_metacounter": Spec("Removes the metacounter `key`.", "", _ANY, "§6.4"),
    "delete_all_metacounters": Spec("Removes every metacounter.", "", _ANY, "§6.4"),
    # messages (§7.2, §7.4, §8.2)
    "list_messages": Spec("Messages around an anchor (`message_ts` or `message_id`; the newest end without one); the "
                          "cache stores them. As the reference SDK: the anchor's own messages only with `include=True`, "
                          'and `message_type` also by the collections\' names "all", "user", "file", "admin".',
                          _MESSAGE_LIST, "MessageListPage", "§7.2"),
    "list_thread_replies": Spec("The replies to `parent_message_id` around an anchor, as `list_messages`.", _MESSAGE_LIST,
                                "MessageListPage", "§7.2"),
    "get_total_message_count": Spec('How many messages the channel holds: `{"total"}`.', "", _ANY, "§7.4"),
    "list_message_changelogs": Spec("The channel's messages changed or deleted since `token` (or `change_ts`), applied "
                                    "to the cache.", "token change_ts limit " + _MESSAGE_FILTERS, "MessageChangelogPage",
                                    "§8.2"),
    "get_message": Spec("One message; the cache stores it.", "", "Message", "§7.4"),
    "update_message": Spec("Edits a message (its sender or an operator).",
                           "message_type message custom_type data mention_type mentioned_user_ids sorted_metaarray url",
                           "Message", "§7.4"),
    "delete_message": Spec("Deletes a message (its sender or an operator); it leaves the cache.", "", _ANY, "§7.4"),
    "copy_message": Spec("Copies a message (its sender only) into `dest_channel_url`; answers the copy.", "", "Message",
                         "§7.4"),
    "add_reaction": Spec("Adds the user's `reaction` to a message.", "user_id", _ANY, "§7.4"),
    "remove_reaction": Spec("Removes the user's `reaction` from a message.", "user_id", _ANY, "§7.4"),
    "list_reactions": Spec('The reactions to a message: `{"reactions"}`.', "", _ANY, "§7.4"),
    "pin_message": Spec("Pins a message to the channel.", "", _ANY, "§7.4"),
    "unpin_message": Spec("Unpins a message.", "", _ANY, "§7.4"),
    "add_message_meta_array": Spec("Adds keys to a message's sorted meta array, or values to its keys; answers the "
                                   "message.", "", "Message", "§7.4"),
    "update_message_meta_array": Spec("Adds or removes (`mode`) values of a message's sorted meta array; answers the "
                                      "message.", "mode upsert", "Message", "§7.4"),
}

OBJECT_TYPES = ("BasicUser", "Channel", "ChannelChangelogPage", "ChannelListPage", "MemberListPage", "Message",
                "MessageChangelogPage", "MessageListPage", "MetaArrayItem", "User", "UserListPage")


class Parameter(NamedTuple):
    name: str
    annotation: str
    default: str  # "" when required


def placeholders(path: str) -> List[str]:
    return re.findall(r"{([^}]+)}", path)


def parameters(entry: Mapping[str, Any]) -> List[Parameter]:
    """An operation's parameters in the order shown: the required ones (path placeholders,
    then the catalog's `required`), then `{user_id}`, then the table's, then any other default."""
    spec = OPERATIONS.get(entry["name"])
    defaults: Mapping[str, Any] = entry.get("defaults") or {}
    required = [name for name in placeholders(entry["path"]) if name != "user_id"]
    required += [name for name in entry.get("required") or [] if name not in required]
    optional = ["user_id"] if "user_id" in placeholders(entry["path"]) and "user_id" not in required else []
    listed = spec.parameters.split() if spec else []
    for name in listed + sorted(defaults):
        if name not in required and name not in optional:
            optional.append(name)
    for name in [entry["name"]] + required + optional:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"{entry['name']}: {name!r} cannot be a Python name: the generator needs a spelling for it")
    result = [Parameter(name, TYPES.get(name, "Any"), "") for name in required]
    for name in optional:
        if name in defaults:
            guessed = type(defaults[name]).__name__ if isinstance(defaults[name], (bool, int, str)) else "Any"
            result.append(Parameter(name, TYPES.get(name, guessed), repr(defaults[name])))
        else:
            result.append(Parameter(name, f"Optional[{TYPES.get(name, 'Any')}]", "None"))
    return result


def _wrap(text: str, indent: str, width: int = 100) -> List[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)


def docstring(entry: Mapping[str, Any], indent: str) -> List[str]:
    spec = OPERATIONS.get(entry["name"])
    summary = spec.summary if spec else "An operation of the catalog (not yet described in the generator's table)."
    route = f"``{entry['method']} {entry['path']}``"
    if spec:
        route += f" (docs/PROTOCOL.md {spec.section})"
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
    spec = OPERATIONS.get(entry["name"])
    return spec.returns if spec else _ANY


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
# Generated from the library's operation catalog (parley_operations) and the parameter table
# of bindings/python/tools/generate_operations.py: do not edit. Regenerate with
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
    """What the table lacks or holds in excess for `catalog` (warnings)."""
    names = [entry["name"] for entry in catalog]
    found = [f"operation {name!r} is not in the table (its parameters are typed Any, its answer a dict)" for name in names if name not in OPERATIONS]
    found += [f"the table describes {name!r}, which the catalog does not have" for name in OPERATIONS if name not in names]
    for entry in catalog:
        for parameter in parameters(entry):
            if parameter.name not in TYPES:
                found.append(f"{entry['name']}: parameter {parameter.name!r} is not in TYPES ({parameter.annotation})")
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
