"""``python -m braze.config``: print every knob, its environment variable, its current value
(whole) and its help.

Kept apart from ``braze/config/__init__.py`` so that running it does not execute the knob
table a second time as ``__main__`` beside the ``braze.config`` that importing ``braze``
already loaded (runpy warns about exactly that).
"""
from braze.config import describe

print(describe())
