"""Built-in providers, registered like any outside provider would be."""

from __future__ import annotations

from .base import register_provider
from .offline import OfflineProvider

register_provider("offline", OfflineProvider)
