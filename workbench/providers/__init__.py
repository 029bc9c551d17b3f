"""Chat providers behind one method; SDKs are imported only inside their own module."""

from .base import (ModelStep, Provider, Readiness, ToolRequest, declared, get_provider, provider_names, readiness,
                   register_provider)

__all__ = ["ModelStep", "Provider", "Readiness", "ToolRequest", "declared", "get_provider", "provider_names",
           "readiness", "register_provider"]
