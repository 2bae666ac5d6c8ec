"""Warnings that point at the user's line.

``warnings.warn(..., stacklevel=k)`` needs k to count the frames between the warning and
the user's call, and that count changes with the path: ``CDClassifier.fit`` called by the
user, through scikit-learn's ``_fit_context`` wrapper, or through ``RBClassifier.fit`` and
a ``GridSearchCV``. :func:`warn` counts them at run time instead: the warning is
attributed to the first frame, walking out from the caller, that is outside rbcd and
scikit-learn (Python 3.12's ``skip_file_prefixes``, written for 3.9+).
"""
import os
import sys
import warnings

__all__ = ["warn"]

_RBCD_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _internal_dirs():
    dirs = [_RBCD_DIR]
    sklearn = sys.modules.get("sklearn")
    if sklearn is not None and getattr(sklearn, "__file__", None):
        dirs.append(os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep)
    return tuple(dirs)


def warn(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the first caller outside rbcd and
    scikit-learn (the user's line; the outermost frame when every frame is internal)."""
    internal = _internal_dirs()
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_back is not None \
            and os.path.abspath(frame.f_code.co_filename).startswith(internal):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level + 1)
