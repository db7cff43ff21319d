"""Turning an exception from the library into a sentence a user can act on.

The app never answers with a traceback alone: every job catches what it raises and
hands this text to an alert, and the traceback of anything unexpected goes to the
server log.
"""

from __future__ import annotations

import logging

log = logging.getLogger("explorer.ui")

_OOM_ADVICE = (
    "lower the threshold (fewer edges per row), subsample the data, or lower "
    "memUseRate / hypoMaxNnzRow"
)


def _is_gpu_oom(exc: BaseException) -> bool:
    # cupy.cuda.memory.OutOfMemoryError, recognised by name so that this module
    # never imports CuPy; cuSPARSE/cuBLAS allocation failures carry the status name.
    name = type(exc).__name__
    return name == "OutOfMemoryError" or "ALLOC_FAILED" in str(exc)


def describe_error(exc: BaseException, doing: str) -> str:
    """A one-paragraph message for `exc`, raised while `doing` (e.g. "building the graph").

    Parameters
    ----------
    exc : BaseException
    doing : str
        What was being done, in the gerund.

    Returns
    -------
    str
        Invalid input (ValueError, TypeError, FileNotFoundError) gives the library's own
        message, which names the argument, the value and what is allowed. Running out
        of host or GPU memory says so and what to change. Anything else is reported as
        unexpected, with its type, and logged with its traceback.
    """
    text = str(exc).strip() or type(exc).__name__
    if _is_gpu_oom(exc):
        return (f"The GPU ran out of memory while {doing}: {text}. To fit, {_OOM_ADVICE}, "
                "or use the CPU backend.")
    if isinstance(exc, MemoryError):
        if doing.startswith(("reading", "loading")):
            return (f"Out of memory while {doing}: {text if str(exc).strip() else 'no memory left'}"
                    ". To fit, use a smaller file or data set (fewer rows or features).")
        return f"Out of memory while {doing}: {text}. To fit, {_OOM_ADVICE}."
    if isinstance(exc, (ValueError, TypeError, FileNotFoundError)):
        return f"Error while {doing}: {text}"
    log.error("unexpected error while %s", doing, exc_info=exc)
    return f"Unexpected {type(exc).__name__} while {doing}: {text}"
