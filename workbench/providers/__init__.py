"""Chat providers behind one method; SDKs are imported only inside their own module."""

from .base import (ModelStep, Provider, Readiness, ToolRequest, get_provider, provider_names,
                   register_provider)

__all__ = ["ModelStep", "Provider", "Readiness", "ToolRequest", "get_provider", "provider_names",
           "register_provider"]
