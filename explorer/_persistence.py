"""Pickling fitted estimators: what a GPU run left on the device is stored as NumPy/SciPy.

A fitted estimator holds CuPy arrays and cupyx sparse matrices after a GPU run. Pickled
as they are, they need CuPy and a device to load; :func:`host_state` copies them to the
host so that the pickle loads anywhere (a laptop, a CPU-only CI job, a process that never
imports CuPy).
"""

from __future__ import annotations

import dataclasses


def is_device_object(obj) -> bool:
    """Whether `obj` is a CuPy array or a cupyx sparse matrix (judged by its type's
    module, so CuPy is never imported)."""
    return type(obj).__module__.split(".", 1)[0] in ("cupy", "cupyx")


def host_copy(obj):
    """`obj` with every CuPy array and cupyx sparse matrix in it copied to the host.

    CuPy arrays become NumPy arrays and cupyx sparse matrices SciPy ones (their
    ``get()``); dicts, lists, tuples (named ones too) and dataclass instances are
    rebuilt around converted members, other objects are returned as they are (the
    same object when nothing in it lives on a device).

    Raises
    ------
    TypeError
        For a CuPy object that has no ``get()`` (nothing that a fit stores).
    """
    if is_device_object(obj):
        if not hasattr(obj, "get"):
            raise TypeError(
                f"cannot copy a {type(obj).__module__}.{type(obj).__name__} to the host for "
                "pickling: it has no get()"
            )
        return obj.get()
    if isinstance(obj, dict):
        items = {key: host_copy(value) for key, value in obj.items()}
        if all(items[key] is value for key, value in obj.items()):
            return obj
        return type(obj)(items) if type(obj) is not dict else items
    if isinstance(obj, (list, tuple)):
        items = [host_copy(value) for value in obj]
        if all(new is old for new, old in zip(items, obj, strict=True)):
            return obj
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*items)
        return type(obj)(items)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            new = host_copy(value)
            if new is not value:
                changes[f.name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj


def host_state(state: dict) -> dict:
    """An estimator's ``__getstate__`` dict with its device arrays copied to the host."""
    return host_copy(dict(state))
