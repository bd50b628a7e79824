"""The service's JSON read routes (``POST /search``, ``/rerank``, ``/context``,
``/rerank/context``) dispatched by their path, ahead of FastAPI's own stack.

Those endpoints parse their own body and answer their own response
(:class:`credrank.serve.app.SelfParsedRoute`), so nothing of FastAPI's per-request stack
serves them: its error middleware, its body-size layer, the layer that records an exception
for its telemetry before a handler answers it, Starlette's exception middleware, the exit
stack for uploaded files, the router's scan of every route (the documentation's four come
first) and FastAPI's own handling of a route (solving its dependencies, two exit stacks).
:class:`DirectRoutes` calls such an endpoint straight from the request guards and answers its
exceptions with the app's own handlers, found as Starlette's ``ExceptionMiddleware`` finds
them (:func:`find_handler`); an exception no handler takes goes on to the server, which
answers 500. An endpoint whose client left while its work ran in a worker
(:class:`~credrank.serve.limits.ClientGone`: the work was cancelled) answers nothing.

A path is matched exactly, as the router matches it, under the prefix an enclosing app may
mount this one under (:func:`~credrank.serve.config.route_path`). Every other request goes
through FastAPI's stack (``fallback``): ``POST /search/`` is redirected to ``/search`` there,
as before. Measured in process: ≈ 0.03 ms less a cheap ``/search``
(``bench_serve.py --section overhead``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from credrank.serve.config import route_path
from credrank.serve.limits import ClientGone

#: an exception handler of the app (all of the service's are coroutines)
Handler = Callable[[Request, Any], Awaitable[Response]]


class DirectRoute(Protocol):
    """A route whose endpoint takes the request and returns the response to send."""

    path: str
    endpoint: Callable[[Request], Awaitable[Response]]


def find_handler(handlers: Mapping[Any, Any], exc: Exception) -> Handler | None:
    """The handler of ``handlers`` (keys: status codes and exception classes) for ``exc``:
    for an ``HTTPException`` its status code's, else the first of its classes' in method
    resolution order; ``None`` when none takes it."""
    if isinstance(exc, HTTPException) and exc.status_code in handlers:
        return handlers[exc.status_code]
    for cls in type(exc).__mro__:
        if cls in handlers:
            return handlers[cls]
    return None


class DirectRoutes:
    """``POST`` to one of ``routes`` (path → route) straight to its endpoint, its exceptions
    answered by ``handlers``; anything else to ``fallback`` (see the module docstring)."""

    def __init__(self, routes: Mapping[str, DirectRoute], handlers: Mapping[Any, Any],
                 fallback: ASGIApp) -> None:
        self.routes, self.handlers, self.fallback = dict(routes), handlers, fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = (self.routes.get(route_path(scope))
                 if scope["type"] == "http" and scope["method"] == "POST" else None)
        if route is None:
            await self.fallback(scope, receive, send)
            return
        scope["route"] = route  # as the router sets it: the access log names its template
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request)
        except ClientGone:
            return  # its work was cancelled; nobody to answer (the access log: disconnect)
        except Exception as exc:
            handler = find_handler(self.handlers, exc)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)


__all__ = ["DirectRoutes", "find_handler"]
