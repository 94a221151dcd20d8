"""How the typed operation methods of parley._operations (generated) reach the library.

Each catalog operation is written once, in the generated module, as a method of
:class:`parley._operations.Operations` with typed keyword parameters and no body. The
decorators here make it call the client's ``perform``, exactly as the untyped form always
did (``client.perform(name, params, **kwargs)``): the library checks the parameters and the
server answers; the signature is what type checkers, ``help()`` and editors read. The async
form of each method is derived from that one description by :func:`awaiting_operation`.
"""
from __future__ import annotations

import difflib
import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Dict, Iterable, TypeVar, cast

if TYPE_CHECKING:
    import concurrent.futures
    from typing_extensions import Concatenate, ParamSpec

    P = ParamSpec("P")

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
ClassT = TypeVar("ClassT", bound=type)


def _given(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The keyword parameters without those given as None: None means "not given", as the
    signatures say (the library would take a null for a path placeholder as a wrong value)."""
    return {key: value for key, value in kwargs.items() if value is not None}


def operation(method: F) -> F:
    """A catalog operation of a synchronous client: calls ``self.perform(name, params, **kwargs)``
    (a Future of the server's answer). As before the methods were typed, a mapping of wire
    parameters may also be given first, and parameters the signature does not name go to
    the library as they are; type checkers see the signature only."""
    name = method.__name__

    @functools.wraps(method)
    def perform(self: Any, params: Any = None, **kwargs: Any) -> Any:
        return self.perform(name, params, **_given(kwargs))

    return cast(F, perform)


def awaited(annotation: Any) -> Any:
    """The result type of a Future annotation ("Future[Channel]" -> "Channel", also spelled
    concurrent.futures.Future), for the awaitable form of a method; no annotation otherwise."""
    for prefix in ("Future[", "concurrent.futures.Future["):
        if isinstance(annotation, str) and annotation.startswith(prefix) and annotation.endswith("]"):
            return annotation[len(prefix):-1]
    return inspect.Signature.empty


def awaiting_operation(
    method: Callable[Concatenate[Any, P], concurrent.futures.Future[R]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The awaitable form of an :func:`operation` method: a coroutine of the server's answer,
    through the async client's ``perform`` (which cancels the operation when the awaiting task
    is cancelled). Same parameters, same documentation."""
    name = method.__name__

    async def perform(self: Any, params: Any = None, **kwargs: Any) -> Any:
        return await self.perform(name, params, **_given(kwargs))

    functools.update_wrapper(perform, method)
    # It gives what the Future gives: the same parameters, the Future's result type.
    forwarding(perform, method, awaited(method.__annotations__.get("return")))
    return cast("Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]", perform)


def forwarding(wrapper: Callable[..., Any], method: Callable[..., Any], returns: Any) -> None:
    """Describes `wrapper`, made from `method` (functools.wraps), as taking `method`'s parameters
    and returning `returns` (an annotation; ``inspect.Signature.empty`` for none), for help(),
    inspect and editors; and marks it as forwarding (see :func:`own_qualnames`)."""
    setattr(wrapper, "__signature__", inspect.signature(method).replace(return_annotation=returns))
    wrapper.__annotations__ = {key: value for key, value in method.__annotations__.items() if key != "return"}
    if returns is not inspect.Signature.empty:
        wrapper.__annotations__["return"] = returns
    setattr(wrapper, "_forwards", True)


def own_qualnames(cls: ClassT) -> ClassT:
    """Class decorator: names the class's forwarding methods (made from another class's
    methods) as its own (``__qualname__``), so help() and tracebacks say where they live."""
    for name, value in vars(cls).items():
        if getattr(value, "_forwards", False):
            value.__qualname__ = f"{cls.__qualname__}.{name}"
    return cls


def missing_attribute(owner: object, name: str, operation_names: Iterable[str]) -> AttributeError:
    """The AttributeError for a name a client does not have, saying what was probably meant: a
    catalog operation this package's generated methods do not know yet (then ``perform``
    reaches it), or the nearest method name."""
    kind = type(owner).__name__
    names = set(operation_names)
    if name in names:
        return AttributeError(
            f"{kind} has no method {name!r}: the loaded library's catalog has this operation but this parley package "
            f"was generated from an older catalog; call perform({name!r}, ...) or regenerate "
            "(python3 bindings/python/tools/generate_operations.py)")
    candidates = names | {attribute for attribute in dir(type(owner)) if not attribute.startswith("_")}
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return AttributeError(f"{kind!r} object has no attribute {name!r}{hint}")
