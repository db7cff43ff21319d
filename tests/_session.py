"""Run app actions the way a Panel server session does (for the UI tests).

In a session, Panel schedules the app's asynchronous jobs on the running event loop,
and a job may request another (new data -> statistics). Here an action runs inside a
fresh event loop, which then runs until no task is left.
"""

from __future__ import annotations

import asyncio


def act(action):
    """Do `action` (widget changes, clicks) and wait for the jobs it starts."""

    async def coroutine():
        action()

    act_async(coroutine)


def act_async(make_coroutine):
    """:func:`act` for an action that is a coroutine (made by `make_coroutine`)."""

    async def main():
        await make_coroutine()
        me = asyncio.current_task()
        while pending := [t for t in asyncio.all_tasks() if t is not me and not t.done()]:
            await asyncio.gather(*pending)

    asyncio.run(main())
