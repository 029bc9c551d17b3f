"""Built-in providers, registered like any outside provider would be (see docs/plugins.md)."""

from __future__ import annotations

from .base import register_provider
from .gemini import GeminiProvider
from .llamacpp import LlamaCppProvider
from .offline import OfflineProvider
from .ollama import OllamaProvider
from .openai import OpenAIProvider

register_provider("offline", OfflineProvider)
register_provider("ollama", OllamaProvider)
register_provider("gemini", GeminiProvider)
register_provider("openai", OpenAIProvider)
register_provider("llamacpp", LlamaCppProvider)
